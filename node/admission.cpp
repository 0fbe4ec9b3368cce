#include "node/admission.h"

#include "node/printable.h"
#include "node/unmasking_round.h"
#include "node/wire_message.h"

#include <sstream>

namespace fednode {

bool Admission::incompatible(MessageType type, const Payload& p) const {
  const MachineConfig& config = machine_.config();
  const NodeContext& ctx = config.ctx;
  if (const auto* hello = std::get_if<Hello>(&p))
    return hello->method != config.method->name() || hello->backbone_fingerprint != ctx.backbone_fingerprint ||
           hello->dim != ctx.dim || hello->num_classes != ctx.num_classes;
  if (const auto* hm = std::get_if<HeadMessage>(&p))
    return hm->backbone_fingerprint != ctx.backbone_fingerprint || hm->head->dim() != ctx.dim ||
           hm->head->num_classes() != ctx.num_classes;
  if (const auto* k = std::get_if<Knowledge>(&p))
    return k->method_name() != config.method->name() || k->backbone_fingerprint != ctx.backbone_fingerprint ||
           k->dim != ctx.dim || k->num_classes != ctx.num_classes;
  (void)type;
  return false;
}

std::string Admission::refusal(NodeId from, MessageType type, const Payload& p) const {
  const MachineConfig& config = machine_.config();
  const UnmaskingRound* unmasking = unmasking_;
  const NodeContext& ctx = config.ctx;
  const auto who = [&](NodeId id) { return config.topology->describe(id); };
  const std::string where = std::string(to_string(type)) + " from " + who(from);
  if (type == MessageType::Hello) {
    const auto& hello = std::get<Hello>(p);
    std::ostringstream why;
    if (hello.method != config.method->name()) why << "method " << printable(hello.method) << " is not " << config.method->name();
    else if (hello.backbone_fingerprint != ctx.backbone_fingerprint)
      why << "backbone " << printable(hello.backbone_fingerprint) << " is not " << ctx.backbone_fingerprint;
    else if (hello.dim != ctx.dim) why << "feature dimension " << hello.dim << " is not " << ctx.dim;
    else if (hello.num_classes != ctx.num_classes) why << hello.num_classes << " classes, not " << ctx.num_classes;
    return why.str();
  }
  if (type == MessageType::UnmaskRequest || type == MessageType::UnmaskReply)
    return unmasking ? unmasking->refusal(from, type, p) : UnmaskingRound::not_taken(type);
  const auto kind = plan_message_of(type);
  if (!kind || !config.plan.expects(from, *kind))
    return "the topology does not send this node " + std::string(to_string(type)) + " from there";
  if (type == MessageType::Knowledge && unmasking && unmasking->declared_dropped(from))
    return "declared dropped in secure aggregation's unmasking round, whose seeds would now unmask this piece alone";
  const Contributors* contributors = nullptr;
  if (type == MessageType::Head) {
    const auto& hm = std::get<HeadMessage>(p);
    if (hm.backbone_fingerprint != ctx.backbone_fingerprint) return "head for another backbone";
    if (hm.head->dim() != ctx.dim || hm.head->num_classes() != ctx.num_classes)
      return "head of shape " + std::to_string(hm.head->dim()) + " -> " + std::to_string(hm.head->num_classes());
    contributors = &hm.contributors;
  } else {
    const auto& k = std::get<Knowledge>(p);
    // The method's own checks too: a piece that would make merging fail is refused now,
    // before it is stored and acknowledged, not found out in phase 1.
    config.method->validate(k, ctx, where);
    contributors = &k.contributors;
  }
  for (NodeId c : *contributors)
    if (!config.topology->find(c)) return "contributor " + std::to_string(c) + " is not in the topology";
  if (type == MessageType::Knowledge) {
    const auto it = config.plan.sources.find(from);
    const Contributors possible = it != config.plan.sources.end() ? it->second : Contributors{};
    for (NodeId c : *contributors)
      if (!possible.count(c))
        return "contributor " + std::to_string(c) + "'s data cannot reach " + who(from) +
               " in this topology (it can hold " + to_string(possible) + ")";
  }
  return "";
}

bool Admission::is_repeat(NodeId from, MessageType type, const Payload& p) const {
  if (type == MessageType::UnmaskRequest || type == MessageType::UnmaskReply)
    return unmasking_ && unmasking_->is_repeat(from, type, p);
  if (type == MessageType::Head) return machine_.holds_head_covering(std::get<HeadMessage>(p).contributors);
  const auto kind = plan_message_of(type);
  return kind && machine_.holds_knowledge(from, *kind, std::get<Knowledge>(p).contributors);
}

Actions Admission::accept(NodeId from, uint64_t seq, MessageType type, Payload payload, bool fresh, double now) {
  if (type == MessageType::UnmaskRequest || type == MessageType::UnmaskReply) {
    Actions out;
    unmasking_->accept(from, type, std::move(payload), fresh, out);  // refusal() let it in: there is a round
    return out;
  }
  if (type == MessageType::Head) {
    auto hm = std::get<HeadMessage>(std::move(payload));
    return machine_.accept_head(from, HeadOffer{std::move(hm.head), std::move(hm.contributors), std::move(hm.class_means)},
                                fresh, now);
  }
  return machine_.accept_knowledge(from, seq, *plan_message_of(type),
                                   std::make_shared<const Knowledge>(std::get<Knowledge>(std::move(payload))), fresh);
}

}  // namespace fednode
