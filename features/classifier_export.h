// One TorchScript module from a classifier's pieces (`fednode export`): preprocessing written as
// TorchScript, the frozen backbone as a submodule, the feature expansion and the head
// (core/script_part.h). Built in C++ with LibTorch (libfednode_torch.so): no Python step.
//
// The module's methods: forward(images) -> logits for images [N, C, H, W] (or [C, H, W]), uint8
// pixel values as torchvision.io.read_image gives them, or float in [0, 1] as ToTensor gives
// them; features(images) -> the head's input; head(x) -> logits. A head-only module's forward
// takes the data's features (before any expansion) instead.
#pragma once

#include "core/script_part.h"
#include "core/types.h"
#include "features/preprocess.h"

#include <string>

namespace fednode {

struct ExportPlan {
  bool images = true;          // false: forward takes features (--head-only)
  std::string backbone;        // the TorchScript backbone file; empty: the pixels are the features
  Preprocessing preprocessing; // how images are read (images only)
  MatrixF projection;          // the expansion's D x d matrix (ReLU after it); empty: none
  ScriptPart head;             // defines head(self, x)
  std::string out;             // where to save the module
};

// Throws InputError naming the file and LibTorch's reason when the module cannot be built or saved.
void export_torchscript(const ExportPlan& plan);

}  // namespace fednode
