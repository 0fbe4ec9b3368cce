// Multi-head self-attention over many short sequences, as one LibTorch operation with its own
// gradient. Internal to libfednode_torch.so: includes LibTorch, so only *_torch.cpp files may
// include it.
//
// Why not LibTorch's matmul and softmax: a ViT of 17 tokens with heads of 16 dimensions gives
// batched matmuls of 17 x 16 x 17, which LibTorch 1.13 runs as one BLAS call per sequence and head
// (11 264 calls for an inversion batch of 256 images against 11 models, at 3 GFLOPS), and its
// softmax over rows of 17 was slower still. Here each (sequence, head) is one small loop nest,
// the sequences shared among LibTorch's threads; what a sequence computes does not depend on the
// thread count.
#pragma once

#include <torch/torch.h>

namespace fednode {

struct Attention {
  torch::Tensor mixed;          // [R, N, D]: the heads' outputs side by side, as the projection reads them
  torch::Tensor probabilities;  // [R, heads, N, N]: each query's attention over the keys; no gradient
};

// `qkv` [R, N, 3 * D] float32 (the queries, keys and values of R sequences of N tokens, each D =
// heads x head-dimension wide and head-major, as the qkv projection writes them); `keys`
// undefined, or [K, N] bool with R a multiple of K, sequence r taking row r % K: a false token is
// no key for any query (its attention is 0). Scores are scaled by 1 / sqrt(head dimension).
// Differentiable with respect to `qkv`.
Attention self_attention(const torch::Tensor& qkv, int64_t heads, const torch::Tensor& keys);

}  // namespace fednode
