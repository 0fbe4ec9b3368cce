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

// A stratified split of a training set: of every class with n >= 2 samples,
// max(1, round(fraction * n)) (at most n - 1) go to `validation`, drawn by `seed`; the rest,
// and every class of one sample, stay in `fit`. Rows keep their order within each part;
// the *_rows vectors say which rows of the training set went where.
struct ValidationSplit {
  Features fit;
  Features validation;
  std::vector<int64_t> fit_rows;
  std::vector<int64_t> validation_rows;
};
ValidationSplit split_for_validation(const Features& train, double fraction, uint64_t seed);

// Follows a candidate's validation scores epoch by epoch. Its best epoch is the one of highest
// accuracy, the lower loss breaking ties (small validation sets tie often). Training stops when
// the accuracy has not risen for as many epochs as it took to reach it (and at least 10): the
// loss alone does not keep it going, since it creeps down long after the accuracy has settled
// (an adapter at lr 0.1 on 100 classes peaked at epoch 45, and its loss still fell by 0.1 % an
// epoch at 400). Given the best candidate tried before (`leader`), it also stops once it has
// trained four times as long as the leader took to peak without matching it: a rate that slow
// to learn would lose the choice anyway.
class ValidationWatch {
 public:
  explicit ValidationWatch(const Features& validation, const ValidationWatch* leader = nullptr)
      : validation_(&validation), leader_(leader) {}
  const Features& validation() const { return *validation_; }
  // Records epoch `epoch` (0-based); returns whether training should go on.
  bool record(int epoch, double accuracy, double loss);
  int best_epoch() const { return best_epoch_; }  // 0-based; -1 before the first record
  double best_accuracy() const { return best_accuracy_; }
  double best_loss() const { return best_loss_; }  // at the best epoch
  // Whether this candidate did better than `other`: higher accuracy, or as high with lower loss.
  bool beats(const ValidationWatch& other) const;

 private:
  const Features* validation_;
  const ValidationWatch* leader_;
  int best_epoch_ = -1;
  int last_gain_ = -1;  // the epoch the accuracy last rose
  double best_accuracy_ = -1.0;
  double best_loss_ = 0.0;
};

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
