#include "node/member.h"

#include "methods/registry.h"
#include "node/local_host.h"

namespace fednode {
namespace {

// The context a node following `plan` runs its method in.
NodeContext node_context(const MemberInputs& in) {
  NodeContext ctx;
  ctx.node = in.plan.id;
  ctx.seed = in.seed;
  ctx.backbone_fingerprint = in.backbone_fingerprint;
  ctx.num_classes = in.num_classes;
  ctx.dim = in.dim;
  ctx.min_class_count = in.options->min_class_count;
  ctx.head_is_sent = !in.plan.send_head_to.empty();
  const MethodDescriptor& descriptor = method_named(in.options->method);
  if (descriptor.open_resource) ctx.resource = descriptor.open_resource(*in.options, local_host());
  ctx.noise_key = in.noise_key;
  ctx.class_names = in.class_names;
  ctx.image_encoder = in.image_encoder;
  return ctx;
}

}  // namespace

MemberMasks member_masks(const Topology& topology, const NodePlan& plan, const MethodOptions& method, const Identity& me,
                         NodeId me_id, const std::map<NodeId, PublicKey>& keys, const RunId& run) {
  MemberMasks m;
  m.plan = mask_plan(topology, plan, method);
  if (m.plan) m.secrets = mask_secrets(me, me_id, *m.plan, keys, run);
  return m;
}

Precision transfer_precision(const MethodOptions& m) {
  return method_named(m.method).half_precision(m) ? Precision::Float16 : Precision::Float32;
}

Member assemble_member(MemberInputs in) {
  Member member;
  MachineConfig& m = member.machine;
  m.topology = in.topology;
  m.plan = in.plan;
  m.method = in.method;
  m.local = in.local;
  m.ctx = node_context(in);
  m.half_precision = transfer_precision(*in.options) == Precision::Float16;
  m.say = in.say;
  const MemberMasks& masks = in.masks;
  if (masks.plan && masks.plan->member) m.ctx.masking = local_masking(in.plan.id, *masks.plan, masks.secrets);
  const Topology* topology = in.topology;
  member.unmasking = UnmaskingRound::for_node(masks.plan, masks.secrets, in.plan, in.plan.id, in.say,
                                              [topology](NodeId id) { return topology->describe(id); });
  m.gate = member.unmasking;
  m.personalization = Personalization::for_method(*in.method, in.local, in.say);
  member.privacy = privacy_ledger(*in.method, in.plan, *in.local, m.ctx);
  return member;
}

RunningMember start_member(Member member) {
  RunningMember r;
  r.unmasking = std::move(member.unmasking);
  r.machine = std::make_unique<Machine>(std::move(member.machine));
  r.admission = std::make_unique<Admission>(*r.machine, r.unmasking.get());
  return r;
}

}  // namespace fednode
