// A user's TorchScript ViT (vit.h's interface, `--vit-script`) inside libfednode_torch.so: the
// process's table of loaded scripts, by their file's SHA-256, and their forward pass over flat
// parameters. Internal: includes LibTorch, so only *_torch.cpp files may include it.
#pragma once

#include "methods/fedmitr/vit.h"
#include "methods/fedmitr/vit_graph_torch.h"

#include <string>
#include <vector>

namespace fednode {

// Loads the script at `path` (SHA-256 `digest`) into the table, once per digest, after checking
// its attributes and a probe forward; fills `out` (classes included). Throws InputError naming
// the file and what is wrong.
void load_script(const std::string& path, const std::string& digest, VitSpec* out);

// The parameters in a loaded script's file, flat in named_parameters() order.
void script_start(const std::string& digest, std::vector<float>* out);

// M models of the script `s.script` (`flats` [M, P], views, so gradients reach them) on `images`
// [B, pixels]; `keep` undefined or [B, tokens] bool. The script applies the keep-mask itself, so
// `stopped` only decides whether token logits come back (Dropped: they do not, as for the
// built-in ViT). Throws InputError for a script this process has not loaded.
Graph run_script(const VitSpec& s, const torch::Tensor& flats, const torch::Tensor& images, const torch::Tensor& keep,
                 Stopped stopped);

}  // namespace fednode
