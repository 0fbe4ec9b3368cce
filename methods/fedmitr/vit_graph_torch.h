// What the ViT's forward pass hands the rest of libfednode_torch.so, shared by the built-in ViT
// (vit_torch.cpp) and a user's TorchScript ViT (vit_script_torch.cpp). Internal: includes
// LibTorch, so only *_torch.cpp files may include it.
#pragma once

#include <torch/torch.h>

namespace fednode {

// What the ViT computes for M models on the same B images.
struct Graph {
  torch::Tensor logits;         // [M, B, classes]
  torch::Tensor token_logits;   // [M, B, tokens, classes]; undefined when stopped tokens are dropped
  torch::Tensor cls_attention;  // [M, B, tokens]: 0 for a stopped patch
};

// How a keep-mask takes effect. Masked: a stopped patch stays in the sequence but is no key
// (-inf before the softmax), so every token has its output. Dropped: stopped patches leave the
// sequence, which gives the same class scores and CLS attention for less work (sparse
// inversion's point); it needs every image to keep the same number of patches.
enum class Stopped { Masked, Dropped };

}  // namespace fednode
