#pragma once

#include "methods/method.h"

#include <memory>

namespace fednode {

std::unique_ptr<Method> make_fgl(const MethodOptions& options);

// The synthesis seed at `node` (the same in the simulator and over the network).
uint64_t fgl_synthesis_seed(uint64_t run_seed, NodeId node);

// Its entry in methods/registry.h.
struct MethodDescriptor;
MethodDescriptor fgl_descriptor();

}  // namespace fednode
