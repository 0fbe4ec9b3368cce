#pragma once

#include "methods/method.h"
#include "methods/fedmitr/fedmitr_options.h"

#include <memory>

namespace fednode {

std::unique_ptr<Method> make_fedmitr(const FedMitrOptions& options);

// The ViT a node of this federation trains: `options.vit` fitted to the data (square images of
// its channels, the federation's classes). Throws InputError when `dim` is not channels * s * s.
VitSpec fedmitr_spec(const FedMitrOptions& options, int dim, int num_classes);
// The images a node's client trains on: all of its own, or with ReceiverHead::Best all but the
// held-out split (`validation`, when given, receives it; empty otherwise) the head is chosen on.
// Drawn from the run's seed and the node, so a node and the simulator's baselines agree.
Features client_training_images(const FedMitrOptions& options, const Features& local, uint64_t run_seed, NodeId node,
                                 Features* validation = nullptr);
// A client's model: the shared initialisation (from `run_seed`) trained on `local` (a node's
// client_training_images), its batches
// ordered by a seed of its own; rounded through float16 when the options send float16. Remembered
// for the process: `trained`, when given, says whether this call trained it.
VitModel train_client_model(const FedMitrOptions& options, const Features& local, uint64_t run_seed, NodeId node,
                            bool* trained = nullptr);
// The receiver's seed at `node` (the same in the simulator and over the network).
uint64_t fedmitr_receiver_seed(uint64_t run_seed, NodeId node);

// Its entry in methods/registry.h.
struct MethodDescriptor;
MethodDescriptor fedmitr_descriptor();

}  // namespace fednode
