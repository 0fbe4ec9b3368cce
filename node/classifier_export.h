// `fednode export`: a Classifier (node/classifier.h) as one TorchScript module that
// torch.jit.load in Python or torch::jit::load in C++ runs to logits, and a JSON sidecar that says
// what the module expects and what its outputs mean (docs/cli.md, "fednode export").
#pragma once

#include "node/classifier.h"

#include <string>

namespace fednode {

// Writes `out` (the module) and `out`.json (the sidecar). With head_only the module's forward
// takes the data's features (before any expansion) instead of images. Throws InputError for a
// head whose recipe reads no images (unless head_only), a backbone file that changed since, or a
// head that cannot be written as TorchScript.
void export_classifier(const Classifier& classifier, const std::string& out, bool head_only);

// The sidecar's text.
std::string export_sidecar_json(const Classifier& classifier, bool head_only);

}  // namespace fednode
