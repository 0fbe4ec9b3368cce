#include "methods/heads/train_common.h"

#include "core/torch_library.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace fednode {

void check_training_set(const Features& train, const std::string& who) {
  if (train.size() == 0) throw InputError(who + ": no training samples");
  if (train.dim() <= 0) throw InputError(who + ": training features have no columns");
  train.validate(who + " training set");
}

void check_optimizer_settings(double lr, int epochs, int batch_size, double weight_decay, int threads,
                              const std::string& who) {
  if (!(lr > 0.0) || !std::isfinite(lr))
    throw InputError(who + ": learning rate must be positive and finite, got " + std::to_string(lr));
  if (epochs < 1) throw InputError(who + ": epochs must be at least 1, got " + std::to_string(epochs));
  if (batch_size < 1)
    throw InputError(who + ": batch size must be at least 1, got " + std::to_string(batch_size));
  if (!(weight_decay >= 0.0) || !std::isfinite(weight_decay))
    throw InputError(who + ": weight decay must be non-negative and finite, got " +
                     std::to_string(weight_decay));
  if (threads < 0) throw InputError(who + ": threads must be >= 0, got " + std::to_string(threads));
}

int64_t training_epochs(int64_t n, int batch_size, int epochs, int min_steps) {
  if (n <= 0 || batch_size <= 0) return std::max(epochs, 0);
  const int64_t batch = std::min<int64_t>(batch_size, n);
  const int64_t steps_per_epoch = (n + batch - 1) / batch;
  return std::max<int64_t>(epochs, (std::max(min_steps, 0) + steps_per_epoch - 1) / steps_per_epoch);
}

ValidationSplit split_for_validation(const Features& train, double fraction, uint64_t seed) {
  std::vector<std::vector<int64_t>> by_class(static_cast<size_t>(std::max(train.num_classes, 0)));
  for (size_t i = 0; i < train.y.size(); ++i) by_class[static_cast<size_t>(train.y[i])].push_back(static_cast<int64_t>(i));
  std::vector<char> held(train.y.size(), 0);
  for (size_t c = 0; c < by_class.size(); ++c) {
    const int64_t n = static_cast<int64_t>(by_class[c].size());
    if (n < 2) continue;
    const int64_t k = std::clamp<int64_t>(std::llround(fraction * static_cast<double>(n)), 1, n - 1);
    // Each class draws from its own stream: adding samples of one class moves no other's split.
    Rng rng = Rng::stream(seed, Purpose::HeadValidation, 0, c);
    const std::vector<int64_t> order = shuffled_order(rng, n);
    for (int64_t i = 0; i < k; ++i) held[static_cast<size_t>(by_class[c][static_cast<size_t>(order[static_cast<size_t>(i)])])] = 1;
  }
  ValidationSplit s;
  for (size_t i = 0; i < held.size(); ++i) (held[i] ? s.validation_rows : s.fit_rows).push_back(static_cast<int64_t>(i));
  s.fit = train.subset(s.fit_rows);
  s.validation = train.subset(s.validation_rows);
  return s;
}

bool ValidationWatch::record(int epoch, double accuracy, double loss) {
  if (best_epoch_ < 0 || accuracy > best_accuracy_) {
    best_epoch_ = last_gain_ = epoch;
    best_accuracy_ = accuracy;
    best_loss_ = loss;
  } else if (accuracy == best_accuracy_ && loss < best_loss_) {
    best_epoch_ = epoch;  // as accurate and surer: later, but no reason to train on
    best_loss_ = loss;
  }
  if (epoch - last_gain_ >= std::max(10, last_gain_ + 1)) return false;
  if (leader_ && leader_->best_epoch_ >= 0 && best_accuracy_ < leader_->best_accuracy_ &&
      epoch + 1 >= std::max(10, 4 * (leader_->last_gain_ + 1)))
    return false;
  return true;
}

bool ValidationWatch::beats(const ValidationWatch& other) const {
  if (best_accuracy_ != other.best_accuracy_) return best_accuracy_ > other.best_accuracy_;
  return best_loss_ < other.best_loss_;
}

std::vector<int64_t> shuffled_order(Rng& rng, int64_t n) {
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i + 1)));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

void pytorch_default_init(Rng& rng, MatrixF& W, VectorF& b) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(W.cols()));
  for (Eigen::Index i = 0; i < W.rows(); ++i)
    for (Eigen::Index j = 0; j < W.cols(); ++j)
      W(i, j) = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
  for (Eigen::Index i = 0; i < b.size(); ++i) b(i) = static_cast<float>((2.0 * rng.uniform() - 1.0) * bound);
}

Standardizer fit_standardizer(const MatrixF& X) {
  Standardizer s;
  const Eigen::Index n = X.rows(), d = X.cols();
  s.mean = VectorD::Zero(d);
  VectorD sq = VectorD::Zero(d);
  for (Eigen::Index i = 0; i < n; ++i) s.mean += X.row(i).cast<double>().transpose();
  s.mean /= static_cast<double>(n);
  // Two-pass variance: the one-pass formula loses everything on large-offset columns.
  for (Eigen::Index i = 0; i < n; ++i)
    sq += (X.row(i).cast<double>().transpose() - s.mean).array().square().matrix();
  s.scale = (sq / static_cast<double>(n)).array().sqrt().matrix();
  // Constant: no spread beyond rounding, relative to the column's own size and to the widest
  // column, never to an absolute size (features of 1e-30 are not all constant).
  const double widest = d > 0 ? s.scale.maxCoeff() : 0.0;
  for (Eigen::Index j = 0; j < d; ++j)
    if (!(s.scale(j) > 1e-12 * std::max(std::abs(s.mean(j)), widest))) s.scale(j) = 1.0;
  return s;
}

void fold_standardizer(const Standardizer& s, MatrixF& W, VectorF& b) {
  // W' ((x - mu) / s) + b'  =  (W' / s) x + (b' - (W' / s) mu), in double precision.
  MatrixD Wd = W.cast<double>();
  for (Eigen::Index j = 0; j < Wd.cols(); ++j) Wd.col(j) /= s.scale(j);
  const VectorD bd = b.cast<double>() - Wd * s.mean;
  W = Wd.cast<float>();
  b = bd.cast<float>();
}

MatrixF standardized(const Standardizer& s, const MatrixF& X) {
  const Eigen::RowVectorXd shift = s.mean.transpose();
  const Eigen::RowVectorXd inv_scale = s.scale.cwiseInverse().transpose();
  return ((X.cast<double>().rowwise() - shift).array().rowwise() * inv_scale.array()).matrix().cast<float>();
}

TorchThreadsGuard::TorchThreadsGuard(int threads) {
  previous_ = torch_threads();
  if (threads > 0) set_torch_threads(threads);
  if (torch_threads() > 1) blas_.emplace();
}

TorchThreadsGuard::~TorchThreadsGuard() {
  if (torch_threads() != previous_) set_torch_threads(previous_);
}

}  // namespace fednode
