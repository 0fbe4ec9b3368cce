#include "node/unmasking_round.h"


#include "node/wire_message.h"

namespace fednode {
namespace {

Action send(NodeId to, int phase, MessageType type, Payload payload, int64_t counted_bytes = 0) {
  Action a;
  a.kind = Action::Kind::Send;
  a.to = to;
  a.phase = phase;
  a.message = std::make_shared<const WireMessage>(type, std::move(payload));
  a.counted_bytes = counted_bytes;
  return a;
}

}  // namespace

std::shared_ptr<UnmaskingRound> UnmaskingRound::for_node(const std::optional<MaskPlan>& masks, MaskSecrets secrets,
                                                         const NodePlan& plan, NodeId self, Say say,
                                                         std::function<std::string(NodeId)> who) {
  if (!masks || !masks->unmasking_round) return nullptr;
  return std::shared_ptr<UnmaskingRound>(new UnmaskingRound(*masks, std::move(secrets), self, plan.head_from,
                                                            plan.deadline_seconds, std::move(say), std::move(who)));
}

UnmaskingRound::UnmaskingRound(MaskPlan masks, MaskSecrets secrets, NodeId self, std::optional<NodeId> hub,
                               double deadline, Say say, std::function<std::string(NodeId)> who)
    : masks_(std::move(masks)), secrets_(std::move(secrets)), self_(self), hub_(hub), deadline_(deadline),
      say_(std::move(say)), who_(std::move(who)) {}

std::string UnmaskingRound::not_taken(MessageType type) {
  return std::string("only ") +
         (type == MessageType::UnmaskRequest ? "a star's leaf takes unmasking requests from its hub"
                                             : "a star's hub takes unmasking answers") +
         ", under secure aggregation";
}

std::string UnmaskingRound::refusal(NodeId from, MessageType type, const Payload& p) const {
  const bool request = type == MessageType::UnmaskRequest;
  const UnmaskRequest asked = request ? std::get<UnmaskRequest>(p)
                                      : UnmaskRequest{std::get<UnmaskReply>(p).survivors, std::get<UnmaskReply>(p).dropped, {}};
  if (request ? !(masks_.member && hub_ == from) : !is_hub()) return not_taken(type);
  Contributors named = asked.survivors;
  for (NodeId d : asked.dropped)
    if (!named.insert(d).second) return "node " + std::to_string(d) + " is both a survivor and dropped";
  if (named != masks_.group) return "it splits " + to_string(named) + ", not the mask group " + to_string(masks_.group);
  const NodeId survivor = request ? self_ : from;
  if (!asked.survivors.count(survivor)) return who_(survivor) + " is not among the survivors it names";
  if (request_ && (request_->survivors != asked.survivors || request_->dropped != asked.dropped))
    return "it names other survivors (" + to_string(asked.survivors) + ") than the request " +
           (request ? "this node answered" : "this hub made") + " (" + to_string(request_->survivors) +
           "): answering both could unmask one leaf's statistics";
  if (request) {
    const std::string few = too_few_survivors(masks_, asked);
    if (!few.empty()) return few;
    const auto& tagged = std::get<UnmaskRequest>(p);
    if (!tagged.tags.empty()) return inconsistent_tags(self_, tagged, secrets_);
    return "";
  }
  const auto& reply = std::get<UnmaskReply>(p);
  if (!reply.consistency() && reply.pair_seeds.size() != asked.dropped.size())
    return "it holds " + std::to_string(reply.pair_seeds.size()) + " pair seeds for " +
           std::to_string(asked.dropped.size()) + " dropped leaves";
  return "";
}

bool UnmaskingRound::declared_dropped(NodeId from) const { return is_hub() && request_ && request_->dropped.count(from); }

bool UnmaskingRound::is_repeat(NodeId from, MessageType type, const Payload& p) const {
  if (type == MessageType::UnmaskRequest) return false;
  return (std::get<UnmaskReply>(p).consistency() ? tags_ : replies_).count(from) > 0;
}

void UnmaskingRound::accept(NodeId from, MessageType type, Payload payload, bool fresh, Actions& out) {
  if (type == MessageType::UnmaskRequest) {
    auto request = std::get<UnmaskRequest>(std::move(payload));
    if (!request_) request_ = UnmaskRequest{request.survivors, request.dropped, {}};
    if (!request.tags.empty()) tagged_request_ = std::move(request);
    // A request replayed on a restart is answered once the restart says the head is not in yet.
    if (fresh) answer(out);
    else answer_due_ = true;
    return;
  }
  auto reply = std::get<UnmaskReply>(std::move(payload));
  // A hub restarted before its round ended takes its decision back from the answers it holds.
  if (!request_) request_ = UnmaskRequest{reply.survivors, reply.dropped, {}};
  const bool tags = reply.consistency();
  (tags ? tags_ : replies_)[from] = std::move(reply);
  if (fresh) say_(std::string("received the ") + (tags ? "consistency tags" : "unmasking seeds") + " of " + who_(from));
}

void UnmaskingRound::on_tick(Actions& out) {
  if (answer_due_) answer(out);
}

MergeGate::Decision UnmaskingRound::before_merge(const std::function<bool(NodeId)>& holds, double now,
                                                 double last_inbound, Actions& out) {
  Decision g;
  if (!is_hub() || done_) return g;
  const auto give_up = [&](std::string why) {
    done_ = true;
    g.kind = Decision::Kind::GiveUp;
    g.why = std::move(why);
    g.unreadable = masks_.group;
    return g;
  };
  if (!request_) {
    const std::string why = decide(holds);
    if (!why.empty()) return give_up(why);
  }
  const UnmaskRequest& decision = *request_;
  const auto ask = [&](NodeId to, const UnmaskRequest& request) {
    out.push_back(send(to, 1, MessageType::UnmaskRequest, request));
  };
  const auto late = [&](double since) { return now - std::max(since, last_inbound) > deadline_; };
  const auto waiting = [&] {
    g.kind = Decision::Kind::Wait;
    return g;
  };
  // The consistency step: every survivor's tags first, so that no survivor reveals a seed before
  // it knows the others were told the same split.
  if (!asked_) {
    asked_ = true;
    asked_at_ = now;
    for (NodeId s : decision.survivors)
      if (!tags_.count(s)) ask(s, decision);
    say_("secure aggregation: asking " + to_string(decision.survivors) + " to confirm the split" +
         (decision.dropped.empty() ? std::string() : " (dropped: " + to_string(decision.dropped) + ")"));
  }
  for (NodeId s : decision.survivors)
    if (!tags_.count(s)) {
      if (!late(asked_at_)) return waiting();
      return give_up("secure aggregation: " + who_(s) + " did not confirm the split within " + deadline_text(deadline_) +
                     " s, and without its seeds the sum cannot be read");
    }
  if (!tagged_sent_) {
    tagged_sent_ = true;
    tagged_at_ = now;
    for (NodeId s : decision.survivors)
      if (!replies_.count(s)) ask(s, tagged_request(decision, s, tags_));
    say_("secure aggregation: every survivor confirmed the split; asking for the seeds that unmask their sum");
  }
  for (NodeId s : decision.survivors)
    if (!replies_.count(s)) {
      if (!late(tagged_at_)) return waiting();
      return give_up("secure aggregation: " + who_(s) + " did not answer the unmasking request within " +
                     deadline_text(deadline_) + " s, and without its seeds the sum cannot be read");
    }
  done_ = true;
  g.unmasking = unmasking(masks_, decision, replies_);
  return g;
}

std::string UnmaskingRound::decide(const std::function<bool(NodeId)>& holds) {
  UnmaskRequest r;
  for (NodeId m : masks_.group) (holds(m) ? r.survivors : r.dropped).insert(m);
  const std::string few = too_few_survivors(masks_, r);
  if (!few.empty()) return "secure aggregation: the masked statistics of " + to_string(r.survivors) + " arrived: " + few;
  request_ = r;
  return "";
}

void UnmaskingRound::answer(Actions& out) {
  answer_due_ = false;
  const UnmaskRequest& r = *request_;
  Action a;
  Action said;
  said.kind = Action::Kind::Say;
  if (!tagged_request_) {
    a = send(*hub_, 2, MessageType::UnmaskReply, consistency_reply(self_, r, secrets_),
             static_cast<int64_t>(32 * (r.survivors.size() - 1)));
    said.line = "secure aggregation: confirming the split " + to_string(r.survivors) + " to the other survivors";
  } else {
    // refusal() checked the tags of a request that arrived; this guards one handed over in memory.
    const std::string why = inconsistent_tags(self_, *tagged_request_, secrets_);
    if (!why.empty()) {
      say_.warn("secure aggregation: " + why);
      return;
    }
    a = send(*hub_, 2, MessageType::UnmaskReply, unmask_reply(r, secrets_), static_cast<int64_t>(32 * (1 + r.dropped.size())));
    said.line = "secure aggregation: answering the hub's unmasking request with this node's self seed" +
                (r.dropped.empty() ? std::string() : " and its pair seeds with the dropped " + to_string(r.dropped));
  }
  out.push_back(std::move(a));
  out.push_back(std::move(said));
}

}  // namespace fednode
