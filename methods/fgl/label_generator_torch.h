// The built-in generator's LibTorch part, in libfednode_torch.so (core/torch_library.h), which
// label_generator.cpp calls after checking its arguments. Internal to the library: not installed.
#pragma once

#include "core/torch_library.h"
#include "methods/fgl/label_generator.h"

// Trains the DCGAN (label_generator.h) and writes the generator's TorchScript bytes to `module`.
FEDNODE_TORCH_EXPORT void fednode_torch_label_generator_train(const fednode::MatrixF& images,
                                                              const fednode::Labels& labels, int channels, int size,
                                                              int classes, const fednode::GeneratorTrainOptions& options,
                                                              std::string* module);
// Runs the module's forward on latent rows `z` with generator labels `labels`; fills `out` with
// one image per row. Throws InputError when the module does not answer as label_generator.h says.
FEDNODE_TORCH_EXPORT void fednode_torch_label_generator_draw(const std::string& module, const fednode::MatrixF& z,
                                                             const std::vector<int64_t>& labels, int channels, int size,
                                                             const std::atomic<bool>* stop, fednode::MatrixF* out);
