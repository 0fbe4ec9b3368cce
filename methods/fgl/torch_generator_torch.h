// The TorchScript generators' LibTorch part, in libfednode_torch.so (core/torch_library.h), which
// torch_generator.cpp calls after checking its arguments. Internal to the library: not installed.
#pragma once

#include "core/torch_library.h"
#include "methods/fgl/torch_generator.h"

// Trains the DCGAN (torch_generator.h) and writes the generator's TorchScript bytes to `module`.
// A text generator learns `phrasings` of each class name (`names`).
FEDNODE_TORCH_EXPORT void fednode_torch_generator_train(const fednode::MatrixF& images, const fednode::Labels& labels,
                                                        int channels, int size, const std::vector<std::string>& names,
                                                        const std::vector<std::string>& phrasings,
                                                        const fednode::GeneratorTrainOptions& options,
                                                        std::string* module);

namespace fednode {
// What each image is drawn from: a label generator's label per row (`rows`), or a text
// generator's texts, one per request, and per row the index of its request's text.
struct DrawConditions {
  std::vector<int64_t> rows;
  std::vector<std::string> texts, negative_texts;  // empty for a label generator
};
}  // namespace fednode

// Runs the module on latent rows `z`; fills `out` with one image per row. Throws InputError when
// the module does not answer as torch_generator.h says.
FEDNODE_TORCH_EXPORT void fednode_torch_generator_draw(const std::string& module, const fednode::MatrixF& z,
                                                       const fednode::DrawConditions& conditions, int channels, int size,
                                                       const std::atomic<bool>* stop, fednode::MatrixF* out);
