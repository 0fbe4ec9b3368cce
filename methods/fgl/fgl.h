#pragma once

#include "methods/method.h"
#include "methods/fgl/fgl_options.h"

#include <functional>
#include <memory>
#include <string>

namespace fednode {

std::unique_ptr<Method> make_fgl(const MethodOptions& options);

// The receiver's network (options.receiver) trained on `train`, images of `channels` x `size` x
// `size` pixels; `seed` starts it. Shared by the method's head and simulate's baselines.
std::unique_ptr<Head> fgl_receiver(const FglOptions& options, const LinearTrainOptions& linear, const Features& train,
                                   int channels, int size, uint64_t seed,
                                   const std::function<void(int, double)>& after_epoch,
                                   const std::function<void(const std::string&)>& progress);

// The synthesis seed at `node` (the same in the simulator and over the network).
uint64_t fgl_synthesis_seed(uint64_t run_seed, NodeId node);

// Its entry in methods/registry.h.
struct MethodDescriptor;
MethodDescriptor fgl_descriptor();

}  // namespace fednode
