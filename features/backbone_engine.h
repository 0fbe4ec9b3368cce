// What features/backbone.cpp asks of LibTorch, answered by features/backbone_torch.cpp inside
// libfednode_torch.so (core/torch_library.h). Internal to the library: not installed.
#pragma once

#include "features/backbone.h"
#include "core/torch_library.h"

#include <cstdint>
#include <string>

namespace fednode {

// A loaded TorchScript module. Every call runs with the thread counts Backbone sets around it.
class BackboneEngine {
 public:
  virtual ~BackboneEngine() = default;
  virtual int output_dim() const = 0;
  // As Backbone::forward and Backbone::extract, whose checks of their arguments come first.
  virtual MatrixF forward(const float* batch, int64_t n) const = 0;
  virtual MatrixF extract(const ImageSource& source, const RunOptions& run) const = 0;
};

}  // namespace fednode

// Loads, checks and (as options say) freezes the module at model_path, and finds its output
// dimension by running it once; throws InputError naming model_path for anything wrong.
FEDNODE_TORCH_EXPORT fednode::BackboneEngine* fednode_torch_load_backbone(
    const std::string& model_path, const fednode::Preprocessing& preprocessing,
    const fednode::BackboneOptions& options);
