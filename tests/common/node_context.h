// The NodeContext a method test runs a node under: one backbone for every node, so that the
// knowledge of any two of them is compatible.
#pragma once

#include "methods/method.h"

namespace fednode::test {

inline NodeContext node_context(NodeId node, int num_classes, int dim, uint64_t seed) {
  NodeContext ctx;
  ctx.node = node;
  ctx.seed = seed;
  ctx.backbone_fingerprint = "test-backbone";
  ctx.num_classes = num_classes;
  ctx.dim = dim;
  ctx.noise_key = simulation_noise_key(seed);
  return ctx;
}

}  // namespace fednode::test
