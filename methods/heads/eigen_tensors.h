// Copies between fednode's Eigen matrices and LibTorch tensors for the head trainers. Internal:
// includes LibTorch, so only the *_torch.cpp trainers may include it.
#pragma once

#include "core/types.h"

#include <torch/torch.h>

#include <cstring>

namespace fednode {

// MatrixF is row-major and contiguous: one block copy each way.
inline torch::Tensor to_tensor(const MatrixF& m) {
  torch::Tensor t = torch::empty({m.rows(), m.cols()}, torch::kFloat32);
  std::memcpy(t.data_ptr<float>(), m.data(), static_cast<size_t>(m.size()) * sizeof(float));
  return t;
}

inline torch::Tensor to_tensor(const VectorF& v) {
  torch::Tensor t = torch::empty({v.size()}, torch::kFloat32);
  std::memcpy(t.data_ptr<float>(), v.data(), static_cast<size_t>(v.size()) * sizeof(float));
  return t;
}

// A tensor of any shape as rows of its first dimension.
inline MatrixF to_matrix(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous().to(torch::kFloat32).reshape({t.size(0), -1});
  MatrixF m(c.size(0), c.size(1));
  std::memcpy(m.data(), c.data_ptr<float>(), static_cast<size_t>(m.size()) * sizeof(float));
  return m;
}

inline VectorF to_vector(const torch::Tensor& t) {
  const torch::Tensor c = t.detach().contiguous().to(torch::kFloat32).reshape({-1});
  VectorF v(c.size(0));
  std::memcpy(v.data(), c.data_ptr<float>(), static_cast<size_t>(v.size()) * sizeof(float));
  return v;
}

}  // namespace fednode
