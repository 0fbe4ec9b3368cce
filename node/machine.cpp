#include "node/machine.h"

#include "node/admission.h"
#include "node/unmasking_round.h"

#include "node/generator.h"

#include "methods/registry.h"
#include "node/state_store.h"
#include "node/step.h"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace fednode {
namespace {

// Adds `id` unless it is there already; true if it was added.
bool add_once(std::vector<NodeId>& ids, NodeId id) {
  if (std::find(ids.begin(), ids.end(), id) != ids.end()) return false;
  ids.push_back(id);
  return true;
}

bool includes(const Contributors& big, const Contributors& small) {
  return std::includes(big.begin(), big.end(), small.begin(), small.end());
}

}  // namespace

Precision transfer_precision(const MethodOptions& m) {
  return method_named(m.method).half_precision(m) ? Precision::Float16 : Precision::Float32;
}

NodeContext node_context(const NodePlan& plan, const MethodOptions& method, uint64_t seed,
                         std::string backbone_fingerprint, int num_classes, int dim) {
  NodeContext ctx;
  ctx.node = plan.id;
  ctx.seed = seed;
  ctx.backbone_fingerprint = std::move(backbone_fingerprint);
  ctx.num_classes = num_classes;
  ctx.dim = dim;
  ctx.min_class_count = method.min_class_count;
  ctx.head_is_sent = !plan.send_head_to.empty();
  ctx.generator = open_generator(method.fgl);
  return ctx;
}

Machine::Machine(MachineConfig config) : config_(std::move(config)), progress_(config_.plan) {
  outcome_.expected_contributors = config_.plan.expected_contributors;
  const NodePlan& plan = config_.plan;
  unmasking_ = UnmaskingRound::for_node(config_.masks, config_.mask_secrets, plan, config_.ctx.node, config_.say,
                                        [this](NodeId id) { return who(id); });
  if (relays_pieces(plan) || plan.complete_from) return;
  std::map<NodeId, int> routes;  // per contributor, the senders that can bring its data here
  for (const auto& [sender, possible] : plan.sources)
    for (NodeId c : possible) ++routes[c];
  for (NodeId from : plan.wait_for) {
    const auto it = plan.sources.find(from);
    if (it != plan.sources.end() && it->second == Contributors{from} && routes[from] == 1)
      foldable_senders_.push_back(from);
  }
  std::sort(foldable_senders_.begin(), foldable_senders_.end());
  // Only where something may be folded: a chain's later nodes and a star's leaves hold no sum.
  // A node that sends nothing on folds for its head alone, which more methods can (a FedPFT hub).
  if (!foldable_senders_.empty())
    folded_ = forwards_knowledge(plan) ? config_.method->start_sum(config_.ctx)
                                       : config_.method->start_head_sum(config_.ctx);
  if (!folded_) foldable_senders_.clear();  // knowledge that does not add is held as it is
}

Machine::~Machine() = default;

std::string Machine::who(NodeId id) const { return config_.topology->describe(id); }

void Machine::say(const std::string& line) const { config_.say(line); }
void Machine::warn(const std::string& line) const { config_.say.warn(line); }

// --- receiving --------------------------------------------------------------------------------

bool Machine::incompatible(MessageType type, const Payload& p) const { return incompatible_message(config_, type, p); }

std::string Machine::refusal(NodeId from, MessageType type, const Payload& p) const {
  return refusal_of(config_, unmasking_.get(), from, type, p);
}

bool Machine::awaits_knowledge_from(NodeId from) const {
  for (PlanMessage kind : {PlanMessage::Knowledge, PlanMessage::Complete})
    if (config_.plan.expects(from, kind) && !progress_.has(from, kind)) return true;
  return false;
}

bool Machine::is_repeat(NodeId from, MessageType type, const Payload& p) const {
  if (type == MessageType::UnmaskRequest || type == MessageType::UnmaskReply)
    return unmasking_ && unmasking_->is_repeat(from, type, p);
  if (type == MessageType::Head) {
    // A head covering more than the one held is the hub's refit on knowledge that came late.
    return hub_head_ && includes(hub_head_->contributors, std::get<HeadMessage>(p).contributors);
  }
  const auto& k = std::get<Knowledge>(p);
  const auto kind = *plan_message_of(type);
  for (const auto& piece : pieces_)
    if (piece.from == from && piece.kind == kind && piece.knowledge->contributors == k.contributors) return true;
  if (kind == PlanMessage::Knowledge)
    for (const auto& piece : folded_pieces_)
      if (piece.from == from && piece.contributors == k.contributors) return true;
  return false;
}

bool Machine::fold(NodeId from, PlanMessage kind, const Knowledge& k) {
  if (!folded_ || kind != PlanMessage::Knowledge ||
      !std::binary_search(foldable_senders_.begin(), foldable_senders_.end(), from))
    return false;
  try {
    folded_->add(k, "knowledge from " + who(from));
  } catch (const InputError&) {
    // Held as it is: merging then finds the same trouble and discards the piece, naming it.
    return false;
  }
  folded_pieces_.push_back(FoldedPiece{from, k.contributors});
  return true;
}

template <class P>
KnowledgeList Machine::knowledge_held(const std::vector<P>& held) const {
  return KnowledgeList(knowledge_in_order(held), folded_.get());
}

Actions Machine::accept(NodeId from, uint64_t seq, MessageType type, Payload payload, bool fresh, double now) {
  Actions out;
  if (type == MessageType::UnmaskRequest || type == MessageType::UnmaskReply) {
    unmasking_->accept(from, type, std::move(payload), fresh, out);  // refusal() let it in: there is a round
    return out;
  }
  const auto kind = *plan_message_of(type);
  if (type == MessageType::Head) {
    const bool refreshed = hub_head_.has_value();
    hub_head_ = std::get<HeadMessage>(std::move(payload));
    hub_head_arrived_ = now;
    progress_.received(from, kind);
    say(std::string(refreshed ? "received a refitted head from " : "received the head from ") + who(from) +
        " (contributors " + to_string(hub_head_->contributors) + ")");
    if (fresh && progress_.stage() == PlanProgress::Stage::Done) adopt_late_head(from, out);
    return out;
  }
  return accept(from, seq, type, std::make_shared<const Knowledge>(std::get<Knowledge>(std::move(payload))), fresh, now);
}

Actions Machine::accept(NodeId from, uint64_t seq, MessageType type, std::shared_ptr<const Knowledge> knowledge,
                        bool fresh, double /*now: only a head's arrival is timed*/) {
  Actions out;
  const auto kind = *plan_message_of(type);
  if (type == MessageType::Head) throw std::logic_error("a head accepted as knowledge");
  Piece piece;
  piece.from = from;
  piece.seq = seq;
  piece.kind = kind;
  piece.knowledge = std::move(knowledge);
  // A sender's own data comes last among what it sends one node (stop-and-wait keeps the
  // order), so the piece naming it completes what the plan waits for from it.
  const bool completes = piece.knowledge->contributors.count(from) != 0 || kind == PlanMessage::Complete;
  if (fresh && config_.on_knowledge) config_.on_knowledge(from, *piece.knowledge);
  if (fresh)
    say("received " + std::string(to_string(type)) + " from " + who(from) + " (contributors " +
        to_string(piece.knowledge->contributors) + ")");
  const auto& late_from = config_.plan.late_from;
  piece.late = progress_.stage() != PlanProgress::Stage::Gather && kind == PlanMessage::Knowledge &&
               std::find(late_from.begin(), late_from.end(), from) == late_from.end();
  const bool late = piece.late;
  if (!fold(from, kind, *piece.knowledge)) pieces_.push_back(std::move(piece));
  if (completes) progress_.received(from, kind);
  if (late) refit_pending_ = true;
  return out;
}

void Machine::peer_refused(NodeId peer) {
  if (config_.plan.head_from && peer == *config_.plan.head_from) hub_refused_ = true;
}

void Machine::adopt_late_head(NodeId from, Actions& out) {
  // It replaces the head fitted on local data if it covers this node's data too (a hub that gave
  // up on this node in turn sends a head without it); the hub is then no longer missing.
  const Contributors& covers = hub_head_->contributors;
  if (!includes(covers, outcome_.contributors)) {
    say("keeping the head on " + to_string(outcome_.contributors) + ": the head from " + who(from) +
        ", which came after the deadline, covers only " + to_string(covers));
    return;
  }
  say("taking the head from " + who(from) + ", which came after the deadline");
  set_head(hub_head_->head, hub_head_->contributors, out);
  late_change_ = true;
}

void Machine::restart(bool phase1_done, bool phase2_done, std::shared_ptr<const Head> head,
                      const Contributors& head_contributors, double now) {
  stage_started_ = now;
  if (phase1_done || phase2_done) {
    outcome_.head = std::move(head);
    outcome_.contributors = head_contributors;
  }
  if (phase1_done && progress_.stage() == PlanProgress::Stage::Gather) {
    if (!progress_.ready_to_merge()) {
      // Phase 1 went on without these before the restart: they stay missing in the result.
      progress_.deadline_passed();
      for (NodeId m : progress_.missing()) add_once(outcome_.missing, m);
    }
    progress_.merged();
  }
  if (phase2_done && progress_.stage() == PlanProgress::Stage::Return) progress_.completed();
  if (progress_.finished() && unmasking_) unmasking_->head_in();  // the hub's round is over
  // Knowledge stored after the last head was fitted (the node was killed before it refitted).
  if (progress_.finished() && outcome_.head && held_knowledge_adds_to_head()) refit_pending_ = true;
}

void Machine::release_inputs() {
  std::vector<Piece>().swap(pieces_);
  folded_.reset();
  std::vector<FoldedPiece>().swap(folded_pieces_);
  hub_head_.reset();
}

Machine::Standing Machine::standing() const {
  Standing s;
  s.accepted = progress_.arrived();
  s.awaiting = progress_.awaiting();
  const NodePlan& plan = config_.plan;
  const double from = std::max(stage_started_, last_inbound_);
  switch (progress_.stage()) {
    case PlanProgress::Stage::Gather:
      s.stage = "phase 1";
      if (!s.awaiting.empty()) s.deadline_at = from + plan.deadline_seconds;
      break;
    case PlanProgress::Stage::Return:
      s.stage = "phase 2";
      if (!s.awaiting.empty()) s.deadline_at = from + plan.return_deadline_seconds;
      break;
    case PlanProgress::Stage::Done:
      s.stage = "plan done";
      break;
  }
  return s;
}

// --- the plan ---------------------------------------------------------------------------------

Actions Machine::tick(double now) {
  Actions out;
  const NodePlan& plan = config_.plan;
  if (unmasking_) unmasking_->answer_if_due(out);
  if (progress_.stage() == PlanProgress::Stage::Gather) {
    if (!progress_.ready_to_merge() && now - std::max(stage_started_, last_inbound_) > plan.deadline_seconds) {
      progress_.deadline_passed();
      give_up_on_missing(plan.deadline_seconds);
    }
    if (progress_.ready_to_merge() && unmasking_round(out, now)) {
      outcome_.seconds_waiting += now - stage_started_;
      phase1(out, now);
    }
  }
  if (progress_.stage() == PlanProgress::Stage::Return) {
    if (!progress_.ready_to_complete() &&
        now - std::max(stage_started_, last_inbound_) > plan.return_deadline_seconds) {
      progress_.deadline_passed();
      give_up_on_missing(plan.return_deadline_seconds);
    }
    if (progress_.ready_to_complete() && !waiting_for_refit(now)) {
      outcome_.seconds_waiting += now - stage_started_;
      phase2(out);
    }
  }
  if (progress_.finished() && refit_pending_) refit(out);
  return out;
}

bool Machine::unmasking_round(Actions& out, double now) {
  if (!unmasking_ || config_.ctx.unmasking) return true;
  const auto holds = [&](NodeId m) { return progress_.has(m, PlanMessage::Knowledge); };
  UnmaskingRound::Gate gate = unmasking_->gate(holds, now, last_inbound_, out);
  if (gate.kind == UnmaskingRound::Gate::Kind::Wait) return false;
  if (gate.kind == UnmaskingRound::Gate::Kind::GiveUp) {
    // Unreadable without the round: the masked pieces are dropped, and the head stands on the
    // hub's own data (the run ends incomplete, naming them).
    Contributors held;
    for (NodeId m : config_.masks->group)
      if (holds(m)) {
        held.insert(m);
        add_once(outcome_.discarded_from, m);
      }
    warn(gate.why + "; discarding the masked statistics of " + to_string(held));
    pieces_.erase(std::remove_if(pieces_.begin(), pieces_.end(), [&](const Piece& p) { return held.count(p.from) > 0; }),
                  pieces_.end());
    if (folded_) folded_ = config_.method->start_head_sum(config_.ctx);
    folded_pieces_.clear();
    return true;
  }
  if (gate.unmasking) config_.ctx.unmasking = std::move(gate.unmasking);
  return true;
}

void Machine::give_up_on_missing(double deadline) {
  for (NodeId m : progress_.missing())
    if (add_once(outcome_.missing, m))
      warn(who(m) + " missed the deadline of " + deadline_text(deadline) + " s; going on without it");
}

template <class Work>
auto Machine::with_admission(const std::string& what, Work&& work) {
  return run_admitting(
      std::vector<ReceivedPiece>(pieces_.begin(), pieces_.end()), std::forward<Work>(work),
      [&](const std::string& why) { warn(what + " failed: " + why + "; trying the received pieces one at a time"); },
      [&](const ReceivedPiece& p, const std::string& why) { discard(p, why); });
}

void Machine::discard(const ReceivedPiece& p, const std::string& why) {
  warn("discarding message " + std::to_string(p.seq) + " from " + who(p.from) + " (contributors " +
      to_string(p.knowledge->contributors) + "): " + why);
  add_once(outcome_.discarded_from, p.from);
  // `p` may be one of `pieces_`: copy the key before moving elements around.
  const NodeId from = p.from;
  const uint64_t seq = p.seq;
  const PlanMessage kind = p.kind;
  pieces_.erase(std::remove_if(pieces_.begin(), pieces_.end(),
                               [&](const Piece& q) { return q.from == from && q.seq == seq && q.kind == kind; }),
                pieces_.end());
}

void Machine::phase1(Actions& out, double now) {
  const NodePlan& plan = config_.plan;
  const Features& local = *config_.local;
  say("merging what arrived with " + std::to_string(local.size()) + " local samples (" + config_.method->name() + ")");
  PhaseOne one = with_admission("merging", [&](const std::vector<ReceivedPiece>& received) {
    return run_phase_one(*config_.method, plan, received, folded_.get(), local, config_.ctx);
  });
  outcome_.seconds_merge += one.merge_seconds;
  outcome_.seconds_head += one.head_seconds;
  if (one.head) set_head(std::shared_ptr<const Head>(std::move(one.head)), one.head_contributors, out);
  // Shared by every Send that carries it: FedCGS's Gram matrix alone is 13 MB at d = 1280.
  std::vector<std::shared_ptr<const Knowledge>> outgoing;
  for (auto& k : one.outgoing) outgoing.push_back(std::make_shared<const Knowledge>(std::move(k)));
  for (NodeId to : plan.forward_to)
    for (const auto& k : outgoing) send_knowledge(to, k, MessageType::Knowledge, 1, out);
  for (NodeId to : plan.feedback_to)
    for (const auto& k : outgoing) send_knowledge(to, k, MessageType::Knowledge, 1, out);
  if (one.complete) send_knowledge(*plan.complete_to, outgoing[*one.complete], MessageType::Complete, 1, out);
  if (outcome_.head) send_head(outcome_.head, outcome_.contributors, 1, out);
  Action done;
  done.kind = Action::Kind::PhaseDone;
  done.phase = 1;
  out.push_back(std::move(done));
  progress_.merged();
  stage_started_ = now;
  if (!outcome_.head) return;
  // Said once the phase is marked done: whoever reads it may rely on what a restart finds.
  Action said;
  said.kind = Action::Kind::Say;
  said.line = "phase 1 done: head fitted on " + to_string(outcome_.contributors);
  out.push_back(std::move(said));
}

bool Machine::waiting_for_refit(double now) {
  const NodePlan& plan = config_.plan;
  // Unless the hub refused this leaf's knowledge, its refit with that knowledge is worth a
  // deadline's wait.
  if (!plan.head_from || !hub_head_ || config_.local->size() == 0 || hub_head_->contributors.count(config_.ctx.node) ||
      hub_refused_)
    return false;
  const bool waiting = now - hub_head_arrived_ <= plan.deadline_seconds;
  if (waiting && !said_waiting_for_refit_) {
    said_waiting_for_refit_ = true;
    say("the head from " + who(*plan.head_from) + " leaves out this node's data; waiting up to " +
        deadline_text(plan.deadline_seconds) + " s for the hub to refit it with that data");
  }
  return waiting;
}

void Machine::phase2(Actions& out) {
  const NodePlan& plan = config_.plan;
  if (plan.head_from && hub_head_) {
    if (config_.local->size() > 0 && !hub_head_->contributors.count(config_.ctx.node))
      say("the head from " + who(*plan.head_from) + " covers " + to_string(hub_head_->contributors) +
          ", not this node's own data (its hub gave up on it)");
    set_head(hub_head_->head, hub_head_->contributors, out);
  }
  if (plan.complete_from) take_complete(out);
  if (!plan.late_from.empty() || refit_pending_) refit(out);
  if (!outcome_.head) {
    // The hub never answered, or no complete knowledge came to a node whose first pass carried
    // masked sums (it fits no head in phase 1): a head on its own data is better than none.
    if (plan.head_from) say("no head from " + who(*plan.head_from) + "; fitting one on the local data only");
    else say("no complete knowledge came; fitting a head on the local data only");
    Refit r = refit_head(*config_.method, {}, *config_.local, config_.ctx);
    outcome_.seconds_head += r.seconds;
    set_head(std::shared_ptr<const Head>(std::move(r.head)), r.contributors, out);
  }
  Action done;
  done.kind = Action::Kind::PhaseDone;
  done.phase = 2;
  out.push_back(std::move(done));
  progress_.completed();
}

void Machine::take_complete(Actions& out) {
  const Piece* complete = nullptr;
  for (const auto& p : pieces_)
    if (p.kind == PlanMessage::Complete) complete = &p;
  if (!complete) return;
  // Partial when a node upstream gave up on someone: then what this node already holds (its
  // phase-1 inputs) still counts, combined with it, rather than being thrown away.
  const Contributors& covers = complete->knowledge->contributors;
  const bool partial = !includes(covers, outcome_.contributors);
  say("refitting the head on the complete knowledge " + to_string(covers) +
      (partial ? ", with the knowledge this node holds, since it covers less than " + to_string(outcome_.contributors)
               : std::string()));
  std::vector<const Knowledge*> inputs;
  if (partial) inputs = knowledge_in_order(pieces_);  // the Knowledge pieces (none folded: see folded_)
  inputs.push_back(complete->knowledge.get());
  const std::shared_ptr<const Knowledge> complete_knowledge = complete->knowledge;  // discard() may erase `complete`
  std::optional<Refit> r;
  try {
    r = refit_head(*config_.method, inputs, *config_.local, config_.ctx);
  } catch (const InputError& e) {
    discard(*complete, e.what());  // the head of phase 1 stays
  }
  if (!r) return;
  outcome_.seconds_head += r->seconds;
  set_head(std::shared_ptr<const Head>(std::move(r->head)), r->contributors, out);
  if (config_.plan.complete_to)
    send_knowledge(*config_.plan.complete_to, complete_knowledge, MessageType::Complete, 2, out);
}

void Machine::refit(Actions& out) {
  refit_pending_ = false;
  const Contributors covers = held_contributors();
  if (covers == outcome_.contributors) return;
  say("refitting the head with knowledge that came after phase 1: " + to_string(covers));
  Refit r = with_admission("refitting", [&](const std::vector<ReceivedPiece>& held) {
    return refit_head(*config_.method, knowledge_held(held), *config_.local, config_.ctx);
  });
  outcome_.seconds_head += r.seconds;
  std::shared_ptr<const Head> refitted(std::move(r.head));
  // Offered before it is saved: a node killed in between refits again on its restart (see
  // restart) and offers the same head twice, which a leaf takes once; the other order could
  // leave a saved head that no leaf is ever offered.
  send_head(refitted, r.contributors, kOfferPhase, out);
  set_head(refitted, r.contributors, out);
}

std::shared_ptr<const ClassMeans> Machine::head_means() const {
  const Method& method = *config_.method;
  if (!method.personalizes() || !outcome_.head) return nullptr;
  if (hub_head_ && outcome_.head == hub_head_->head) return hub_head_->class_means;
  // The inputs the head was fitted on: the complete knowledge (with the pieces held, when it
  // covers less than they do: see take_complete), or the pieces held and the folded sum.
  const Piece* complete = nullptr;
  for (const auto& p : pieces_)
    if (p.kind == PlanMessage::Complete) complete = &p;
  try {
    if (complete) {
      std::vector<const Knowledge*> inputs;
      if (!includes(complete->knowledge->contributors, outcome_.contributors)) inputs = knowledge_in_order(pieces_);
      inputs.push_back(complete->knowledge.get());
      return std::make_shared<const ClassMeans>(method.class_means(inputs, config_.local, config_.ctx));
    }
    return std::make_shared<const ClassMeans>(method.class_means(knowledge_held(pieces_), config_.local, config_.ctx));
  } catch (const InputError& e) {
    // What it holds cannot be read (masked pieces of a first pass that never completed): its
    // head stands on its own data, and so do the means.
    warn(std::string("class means of the knowledge held: ") + e.what() + "; using the local data's");
    return std::make_shared<const ClassMeans>(method.class_means({}, config_.local, config_.ctx));
  }
}

std::shared_ptr<const Head> Machine::personal_head() const {
  if (!config_.method->personalizes() || !outcome_.head || config_.local->size() == 0) return nullptr;
  const auto means = head_means();
  if (!means) throw InputError("no class means came with the head of " + who(*config_.plan.head_from) +
                               ": a personal head needs them (does the hub run with --personalize?)");
  say("training the personal head on " + std::to_string(config_.local->size()) + " local samples");
  return config_.method->personal_head(*config_.local, *means, *outcome_.head, config_.ctx);
}

Contributors Machine::held_contributors() const {
  return select_for_combination(knowledge_held(pieces_), config_.local, config_.ctx, config_.method->name())
      .contributors;
}

bool Machine::held_knowledge_adds_to_head() const {
  const Contributors covers = held_contributors();
  return covers != outcome_.contributors && includes(covers, outcome_.contributors);
}

// --- actions ----------------------------------------------------------------------------------

void Machine::set_head(std::shared_ptr<const Head> head, const Contributors& contributors, Actions& out) {
  outcome_.head = std::move(head);
  outcome_.contributors = contributors;
  Action a;
  a.kind = Action::Kind::HeadChanged;
  a.head = outcome_.head;
  a.contributors = contributors;
  out.push_back(std::move(a));
}

void Machine::send_knowledge(NodeId to, std::shared_ptr<const Knowledge> k, MessageType type, int phase,
                             Actions& out) const {
  Action a;
  a.kind = Action::Kind::Send;
  a.to = to;
  a.type = type;
  a.phase = phase;
  a.counted_bytes = k->payload_bytes(config_.transfer == Precision::Float16);
  a.knowledge = std::move(k);
  out.push_back(std::move(a));
}

void Machine::send_head(const std::shared_ptr<const Head>& head, const Contributors& contributors, int phase,
                        Actions& out) {
  const auto& leaves = config_.plan.send_head_to;
  if (leaves.empty()) return;
  const int64_t bytes = head_bytes(*head);
  const auto means = head_means();
  for (NodeId to : leaves) {
    Action a;
    a.kind = Action::Kind::Send;
    a.to = to;
    a.type = MessageType::Head;
    a.phase = phase;
    a.head = head;
    a.contributors = contributors;
    a.class_means = means;
    a.counted_bytes = bytes + (means ? static_cast<int64_t>(means->means.size() * sizeof(double)) : 0);
    out.push_back(std::move(a));
  }
  if (phase != kOfferPhase) return;
  Action said;
  said.kind = Action::Kind::Say;
  said.line = "offering the refitted head to " + to_string(Contributors(leaves.begin(), leaves.end()));
  out.push_back(std::move(said));
}

}  // namespace fednode
