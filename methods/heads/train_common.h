// The LibTorch-free parts of head training shared by train.cpp and the *_torch.cpp trainers:
// input checks, seeded mini-batch orders, seeded PyTorch-style initialisation and thread
// settings. Kept out of the two LibTorch translation units so that they stay small.
#pragma once

#include "methods/blas_threads.h"
#include "methods/heads/train.h"
#include "core/rng.h"
#include "core/types.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fednode {

// Throws InputError naming what is wrong with a training set (empty, labels out of range,
// non-finite values, no columns) or with the generic optimiser settings.
void check_training_set(const Features& train, const std::string& who);
void check_optimizer_settings(double lr, int epochs, int batch_size, double weight_decay, int threads,
                              const std::string& who);

// A fresh permutation of [0, n) per epoch, drawn from `rng` by Fisher-Yates with Rng::below, so
// that the order does not depend on the standard library's shuffle.
std::vector<int64_t> shuffled_order(Rng& rng, int64_t n);

// PyTorch's default nn.Linear initialisation (kaiming_uniform with a = sqrt(5), i.e.
// U(-1/sqrt(in), 1/sqrt(in)) for weights and biases), drawn from our own stream instead of
// LibTorch's global generator: no global state, safe when several nodes train at once.
void pytorch_default_init(Rng& rng, MatrixF& W, VectorF& b);

// Per-column mean and standard deviation (population, as scikit-learn's StandardScaler), in
// double precision; a constant column gets scale 1 so that it passes through unchanged.
struct Standardizer {
  VectorD mean;
  VectorD scale;
};
Standardizer fit_standardizer(const MatrixF& X);
// Makes a layer trained on standardised inputs take raw ones: W <- W / s, b <- b - (W / s) mu.
void fold_standardizer(const Standardizer& s, MatrixF& W, VectorF& b);
// (X - mu) / s, row by row.
MatrixF standardized(const Standardizer& s, const MatrixF& X);

// Sets LibTorch's intra-op thread count for the lifetime of the guard and restores the previous
// value afterwards, so that training one head does not change the caller's setting. When that
// count is above 1, OpenBLAS (which LibTorch's products call) runs single-threaded meanwhile:
// LibTorch's OpenMP team and OpenBLAS's own pool would otherwise spin against each other on the
// same cores. With one LibTorch thread, OpenBLAS keeps its threads for the products.
class TorchThreadsGuard {
 public:
  explicit TorchThreadsGuard(int threads);
  ~TorchThreadsGuard();
  TorchThreadsGuard(const TorchThreadsGuard&) = delete;
  TorchThreadsGuard& operator=(const TorchThreadsGuard&) = delete;

 private:
  int previous_ = 0;
  std::optional<BlasSingleThread> blas_;
};

}  // namespace fednode
