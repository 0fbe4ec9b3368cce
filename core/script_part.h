// A piece of a TorchScript module described without LibTorch: its source and the tensors it names.
// A head describes itself this way (Head::script), and features/classifier_export_torch.cpp builds
// the module that `fednode export` writes from such pieces, so that methods/ need not link
// LibTorch to say how its heads compute.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fednode {

struct ScriptTensor {
  std::string name;            // an attribute of the module: the code reads it as self.<name>
  std::vector<int64_t> shape;  // row-major
  std::vector<float> values;
};

struct ScriptPart {
  // TorchScript methods (as Module::define takes them), among them the entry point the caller
  // documents, e.g. `def head(self, x: Tensor) -> Tensor`. Only aten operators (torch.linear,
  // torch.conv2d, ...), as the C++ compiler resolves no Python module.
  std::string code;
  std::vector<ScriptTensor> tensors;
};

// `flat` cut into consecutive tensors of `shapes`, named prefix0, prefix1, ...: a model kept as
// one parameter vector (FGL's CNN, FedMITR's ViT) as the tensors its layers use. Throws
// std::invalid_argument when the shapes do not add up to the vector.
std::vector<ScriptTensor> split_flat(const std::string& prefix, const std::vector<float>& flat,
                                     const std::vector<std::vector<int64_t>>& shapes);

}  // namespace fednode
