// The ViT's linear layers for M models at once, as one LibTorch operation with its own gradient.
// Internal to libfednode_torch.so: includes LibTorch, so only *_torch.cpp files may include it.
//
// Why not torch::bmm: LibTorch 1.13 runs a batched matmul as one BLAS call per model, one after
// the other, and OpenBLAS runs single-threaded beside LibTorch's own threads (vit.cpp says why),
// so the layers' products, a third of an inversion, used one core of two. Here the products are
// cut into blocks of fixed size (rows of a model, or outputs of its weight's gradient) that
// LibTorch's threads share, each a single-threaded OpenBLAS call: every core works, and the bits
// do not depend on how many there are.
#pragma once

#include <torch/torch.h>

namespace fednode {

// `x` [M, ..., in] through each model's `W` [M, out, in] and `b` [M, out]: [M, ..., out]. `W` and
// `b` may be views with any stride between models (rows of a stacked parameter matrix), but each
// model's own must be contiguous. Differentiable with respect to all three.
torch::Tensor models_linear(const torch::Tensor& x, const torch::Tensor& W, const torch::Tensor& b);

}  // namespace fednode
