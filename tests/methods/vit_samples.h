// Inputs for the ViT's tests (test_vit.cpp, test_fedmitr.cpp).
#pragma once

#include "core/openmp_threads.h"
#include "core/rng.h"
#include "core/torch_library.h"
#include "methods/fedmitr/vit.h"

#include <gtest/gtest.h>

namespace fednode::test {

// One LibTorch thread: ctest runs suites side by side, and OpenMP threads spinning against
// another suite's made a 3 s test take 25. Restored afterwards: the thread count is OpenMP's too,
// which later tests of the same executable expect at its default (HeadTraining).
class OneTorchThread : public ::testing::Test {
 protected:
  void SetUp() override { set_torch_threads(1); }
  void TearDown() override { set_torch_threads(openmp_thread_default()); }
};

inline MatrixF random_images(const VitSpec& s, int n, uint64_t seed) {
  Rng rng(seed);
  MatrixF m(n, s.pixels());
  for (Eigen::Index k = 0; k < m.size(); ++k) m.data()[k] = static_cast<float>(rng.uniform());
  return m;
}

// The init's weights are small; these make the attention far from uniform and the logits
// confident, as after training.
inline VitModel scaled_model(const VitSpec& s, uint64_t seed) {
  VitModel m = vit_init(s, seed);
  for (float& p : m.parameters) p *= 3.0f;
  return m;
}

}  // namespace fednode::test
