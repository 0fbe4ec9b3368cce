#include "node/member.h"

namespace fednode {

MemberMasks member_masks(const Topology& topology, const NodePlan& plan, const MethodOptions& method, const Identity& me,
                         NodeId me_id, const std::map<NodeId, PublicKey>& keys, const RunId& run) {
  MemberMasks m;
  m.plan = mask_plan(topology, plan, method);
  if (m.plan) m.secrets = mask_secrets(me, me_id, *m.plan, keys, run);
  return m;
}

Member assemble_member(MemberInputs in) {
  Member member;
  MachineConfig& m = member.machine;
  m.topology = in.topology;
  m.plan = in.plan;
  m.method = in.method;
  m.local = in.local;
  m.ctx = node_context(in.plan, *in.options, in.seed, std::move(in.backbone_fingerprint), in.num_classes, in.dim);
  m.ctx.noise_key = in.noise_key;
  m.ctx.class_names = std::move(in.class_names);
  m.ctx.image_encoder = std::move(in.image_encoder);
  m.transfer = transfer_precision(*in.options);
  m.masks = std::move(in.masks.plan);
  m.mask_secrets = std::move(in.masks.secrets);
  if (m.masks && m.masks->member) m.ctx.masking = local_masking(in.plan.id, *m.masks, m.mask_secrets);
  member.privacy = privacy_ledger(*in.method, in.plan, *in.local, m.ctx);
  return member;
}

}  // namespace fednode
