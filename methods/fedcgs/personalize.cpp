#include "methods/fedcgs/personalize.h"

#include "core/rng.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace fednode {

namespace {

// SGD with momentum on the standardised features X and class means mu, from the W, b, U, V given;
// the epoch at which the weights stopped being finite, or 0.
int train_personal(const MatrixD& X, const MatrixD& mu, const Labels& y, const PersonalizeOptions& o,
                   double lr, MatrixD& W, Eigen::VectorXd& b, MatrixD& U, MatrixD& V) {
  const Eigen::Index n = X.rows(), d = X.cols(), C = W.rows(), r = U.cols();
  MatrixD mU = MatrixD::Zero(d, r), mV = MatrixD::Zero(d, r), mW = MatrixD::Zero(C, d);
  Eigen::VectorXd mb = Eigen::VectorXd::Zero(C);

  Rng shuffle = Rng::stream(o.seed, Purpose::HeadShuffle, 0x9E25);
  std::vector<Eigen::Index> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), Eigen::Index{0});
  const Eigen::Index B = std::min<Eigen::Index>(o.batch_size, n);
  MatrixD Xb(B, d), Mb(B, d), dL(B, C);
  for (int epoch = 0; epoch < o.epoch_count(); ++epoch) {
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[shuffle.below(i)]);
    for (Eigen::Index first = 0; first < n; first += B) {
      const Eigen::Index m = std::min(B, n - first);
      Xb.resize(m, d);
      Mb.resize(m, d);
      for (Eigen::Index i = 0; i < m; ++i) {
        const Eigen::Index row = order[static_cast<size_t>(first + i)];
        Xb.row(i) = X.row(row);
        Mb.row(i) = mu.row(y[static_cast<size_t>(row)]);
      }
      const MatrixD Z = Xb * V;                // m x r
      const MatrixD G = Xb + Z * U.transpose(); // adapted features, m x d
      MatrixD P = (G * W.transpose()).rowwise() + b.transpose();
      for (Eigen::Index i = 0; i < m; ++i) {
        const double top = P.row(i).maxCoeff();
        P.row(i) = (P.row(i).array() - top).exp();
        P.row(i) /= P.row(i).sum();
        P(i, y[static_cast<size_t>(order[static_cast<size_t>(first + i)])]) -= 1.0;
      }
      dL = P / static_cast<double>(m);
      const MatrixD dG = dL * W + (2.0 * o.lambda / static_cast<double>(m)) * (G - Mb);
      const MatrixD gW = dL.transpose() * G + o.weight_decay * W;
      const Eigen::VectorXd gb = dL.colwise().sum().transpose();
      const MatrixD gU = dG.transpose() * Z + o.weight_decay * U;
      const MatrixD gV = Xb.transpose() * (dG * U) + o.weight_decay * V;
      mW = o.momentum * mW + gW;
      mb = o.momentum * mb + gb;
      mU = o.momentum * mU + gU;
      mV = o.momentum * mV + gV;
      W -= lr * mW;
      b -= lr * mb;
      U -= lr * mU;
      V -= lr * mV;
    }
    if (!all_finite(W) || !all_finite(U) || !all_finite(V)) return epoch + 1;
  }
  return 0;
}

}  // namespace

uint64_t personal_seed(uint64_t run_seed, NodeId node) {
  return derive_seed(run_seed, {static_cast<uint64_t>(Purpose::HeadInit), 0x9E25, static_cast<uint64_t>(node)});
}

MatrixD global_class_means(const StatsKnowledge& stats, std::vector<bool>* present) {
  const Eigen::Index C = stats.A.rows();
  MatrixD mu = MatrixD::Zero(C, stats.A.cols());
  present->assign(static_cast<size_t>(C), false);
  for (Eigen::Index c = 0; c < C; ++c)
    if (stats.N[static_cast<size_t>(c)] > 0) {
      mu.row(c) = stats.A.row(c) / static_cast<double>(stats.N[static_cast<size_t>(c)]);
      (*present)[static_cast<size_t>(c)] = true;
    }
  return mu;
}

std::unique_ptr<LinearHead> personalize_head(const Features& local, const MatrixD& global_means,
                                             const std::vector<bool>& present, const PersonalizeOptions& o,
                                             const LinearHead* start) {
  const Eigen::Index n = local.X.rows(), d = local.X.cols(), C = local.num_classes;
  if (n == 0) throw InputError("personalised head: the node has no local data");
  if (global_means.rows() != C || global_means.cols() != d || static_cast<Eigen::Index>(present.size()) != C)
    throw InputError("personalised head: global means of shape " + std::to_string(global_means.rows()) + " x " +
                     std::to_string(global_means.cols()) + " for " + std::to_string(C) + " classes of dimension " +
                     std::to_string(d));
  if (!(o.lambda >= 0) || o.rank < 1 || o.epoch_count() < 1 || o.batch_size < 1 || !(o.learning_rate() > 0) || !(o.momentum >= 0) ||
      !(o.weight_decay >= 0))
    throw InputError("personalised head: lambda, momentum and weight decay must be >= 0, rank, epochs and batch "
                     "size >= 1, the learning rate > 0");
  for (int y : local.y)
    if (!present[static_cast<size_t>(y)])
      throw InputError("personalised head: local class " + std::to_string(y) + " has no global mean");

  // Standardised features (per column, local mean and deviation), the means in the same units.
  const MatrixD X0 = local.X.cast<double>();
  const Eigen::RowVectorXd mean = X0.colwise().mean();
  Eigen::RowVectorXd scale = ((X0.rowwise() - mean).array().square().colwise().sum() / static_cast<double>(n)).sqrt();
  for (Eigen::Index j = 0; j < d; ++j)
    if (!(scale(j) > 1e-12)) scale(j) = 1.0;
  // And the whole vector by sqrt(d), to norm about 1: the paper's learning rate is for a network's
  // features, and on d standardised columns (norm sqrt(d)) a linear model's steps grow with d.
  scale *= std::sqrt(static_cast<double>(d));
  const MatrixD X = (X0.rowwise() - mean).array().rowwise() / scale.array();
  const MatrixD mu = (global_means.rowwise() - mean).array().rowwise() / scale.array();

  // LoRA-style start: U = 0 (the adapter starts as the identity), V small and random, W, b = 0.
  Rng init = Rng::stream(o.seed, Purpose::HeadInit, 0x9E25);
  const int r = std::min<int>(o.rank, static_cast<int>(d));
  MatrixD U = MatrixD::Zero(d, r), V(d, r), W = MatrixD::Zero(C, d);
  Eigen::VectorXd b = Eigen::VectorXd::Zero(C);
  for (Eigen::Index k = 0; k < V.size(); ++k) V.data()[k] = init.normal() / std::sqrt(static_cast<double>(d));
  if (o.from_global_head) {
    if (!start || start->dim() != d || start->num_classes() != C)
      throw InputError("personalised head: starting from the global head needs a linear head of the node's shape");
    // W0 x + b0 with x = x~ * scale + mean.
    const MatrixD W0 = start->weights().cast<double>();
    W = W0.array().rowwise() * scale.array();
    b = start->bias().cast<double>() + W0 * mean.transpose();
  }
  // A start from a head whose weights are large in these units (an LDA head on raw pixels) can
  // diverge at a rate that suits others: then training starts over at a quarter of the rate, the
  // same draws, a few times before giving up.
  const MatrixD W_start = W, U_start = U, V_start = V;
  const Eigen::VectorXd b_start = b;
  constexpr int kAttempts = 6;
  double lr = o.learning_rate();
  for (int attempt = 1;; ++attempt, lr /= 4) {
    W = W_start, U = U_start, V = V_start, b = b_start;
    const int diverged = train_personal(X, mu, local.y, o, lr, W, b, U, V);
    if (diverged == 0) break;
    if (attempt == kAttempts)
      throw InputError("personalised head: training diverged at epoch " + std::to_string(diverged) + " down to lr " +
                       std::to_string(lr) + " (lower --personal-lr or --personal-lambda)");
  }
  // Fold: scores = W (I + U V^T) (x - mean) / scale + b.
  const MatrixD Wa = W + (W * U) * V.transpose();
  const MatrixD Weff = Wa.array().rowwise() / scale.array();
  const Eigen::VectorXd beff = b - Weff * mean.transpose();
  return std::make_unique<LinearHead>("linear", Weff.cast<float>(), beff.cast<float>());
}

double accuracy_in_proportion(const std::vector<ClassAccuracy>& per_class, const std::vector<int64_t>& class_counts) {
  double weighted = 0, weight = 0;
  for (size_t c = 0; c < per_class.size() && c < class_counts.size(); ++c) {
    if (per_class[c].total == 0 || class_counts[c] <= 0) continue;
    weighted += static_cast<double>(class_counts[c]) * per_class[c].value();
    weight += static_cast<double>(class_counts[c]);
  }
  return weight > 0 ? weighted / weight : 0.0;
}

}  // namespace fednode
