#include "methods/fedpft/closed_form_head.h"

#include "methods/fedcgs/lda.h"  // FedCGS's head: the LDA of additive statistics, which the moments are
#include "methods/fedcgs/stats.h"
#include "methods/fedpft/correlation.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace fednode {
namespace {

// Rows gathered before one rank update (OuterProductSum).
constexpr Eigen::Index kBlockRows = 512;
// Tried in this order, a tie going to the earlier (the less shrunk); 1 is the nearest class mean.
// None is FedCGS's default and the best where the covariance is well estimated (FedCGS, 10
// classes, 20 000 rows of d = 1 280: 0.839 at 0, 0.821 at 0.5); much more pays where few rows
// stand for many dimensions (100 classes of 57 rows: 0.690 at 0, 0.720 at 0.7, 0.734 at 1).
// docs/methods/fedpft.md, "A head in closed form".
constexpr double kShrinkages[] = {0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0};
// A node with nothing received scores the candidates by cross-validation over its own rows.
constexpr int64_t kLocalFolds = 5;

// The sum of rows' outer products, a block of rows at a time: a block keeps the update a matrix
// product (OpenBLAS's dsyrk, on its threads: some 5 000 means of d = 1 280 in 0.1 s, where Eigen's
// rank update on one thread took most of the head's time).
class OuterProductSum {
 public:
  explicit OuterProductSum(Eigen::Index dim) : block_(kBlockRows, dim), upper_(MatrixD::Zero(dim, dim)) {}
  void add(const Eigen::RowVectorXd& v) {
    block_.row(pending_++) = v;
    if (pending_ == kBlockRows) flush();
  }
  MatrixD finish() {
    flush();
    return upper_.selfadjointView<Eigen::Upper>();
  }

 private:
  void flush() {
    // Row-major block_ is pending_ x d; Trans makes this upper_ += block^T block.
    const int d = static_cast<int>(upper_.cols());
    if (pending_ > 0)
      cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, d, static_cast<int>(pending_), 1.0, block_.data(), d, 1.0,
                  upper_.data(), d);
    pending_ = 0;
  }

  MatrixD block_;
  MatrixD upper_;
  Eigen::Index pending_ = 0;
};

// Sums A, N and B as mixtures come.
class MomentSum {
 public:
  // `correlation`, if not null, is the within-class correlation R (unit diagonal) that diagonal and
  // spherical components are taken to have: S_k = diag(s_k) R diag(s_k), s_k their deviations.
  MomentSum(int classes, int dim, const MatrixD* correlation = nullptr)
      : correlation_(correlation), means_(dim), deviations_(correlation ? dim : 0) {
    stats_.A = MatrixD::Zero(classes, dim);
    stats_.N.assign(static_cast<size_t>(classes), 0);
    stats_.B = MatrixD::Zero(dim, dim);
  }

  void add(const ClassMixture& cm) {
    const GaussianMixture& g = cm.mixture;
    const Eigen::Index d = g.dim();
    stats_.N[static_cast<size_t>(cm.label)] += cm.count;
    for (int k = 0; k < g.components(); ++k) {  // component k stands for n w_k samples
      const double nw = static_cast<double>(cm.count) * g.weights(k);
      stats_.A.row(cm.label) += nw * g.means.row(k);
      means_.add(std::sqrt(nw) * g.means.row(k));
      if (correlation_ && g.type != CovarianceType::Full) {
        // n w_k diag(s_k) R diag(s_k) = R .* (sqrt(n w_k) s_k)^T (sqrt(n w_k) s_k): summed over
        // components first, one product with R at the end.
        if (g.type == CovarianceType::Diag) deviations_.add(std::sqrt(nw) * g.covariances.row(k).array().sqrt().matrix());
        else deviations_.add(Eigen::RowVectorXd::Constant(d, std::sqrt(nw * g.covariances(k, 0))));
        continue;
      }
      switch (g.type) {
        case CovarianceType::Diag: stats_.B.diagonal() += nw * g.covariances.row(k).transpose(); break;
        case CovarianceType::Spherical: stats_.B.diagonal().array() += nw * g.covariances(k, 0); break;
        case CovarianceType::Full: stats_.B += nw * g.covariances.middleRows(k * d, d); break;
      }
    }
  }

  StatsKnowledge finish() {
    stats_.B += means_.finish();
    if (correlation_) stats_.B += correlation_->cwiseProduct(deviations_.finish());
    return std::move(stats_);
  }

 private:
  const MatrixD* correlation_;
  StatsKnowledge stats_;
  OuterProductSum means_;
  OuterProductSum deviations_;  // with a correlation only
};

FedCgsOptions lda_options(double shrinkage) {
  FedCgsOptions o;
  o.covariance = LdaCovariance::Within;
  o.shrinkage = shrinkage;
  return o;
}

// a + b: the statistics add up.
StatsKnowledge plus(StatsKnowledge a, const StatsKnowledge& b) {
  a.A += b.A;
  a.B += b.B;
  for (size_t c = 0; c < a.N.size(); ++c) a.N[c] += b.N[c];
  return a;
}

}  // namespace

StatsKnowledge mixture_statistics(const std::vector<const ClassMixture*>& mixtures, const Features* local,
                                  int num_classes, int dim, const MatrixD* correlation) {
  MomentSum sum(num_classes, dim, correlation);
  for (const ClassMixture* cm : mixtures) sum.add(*cm);
  StatsKnowledge s = sum.finish();
  // Real rows are FedCGS's own statistics.
  return local && local->size() > 0 ? plus(std::move(s), compute_stats(*local)) : s;
}

double least_shrinkage_near_best(const std::vector<ShrinkageChoice::Tried>& tried, int64_t rows) {
  double best = 0.0;
  for (const auto& t : tried) best = std::max(best, t.accuracy);
  const double standard_error = std::sqrt(best * (1.0 - best) / static_cast<double>(std::max<int64_t>(rows, 1)));
  for (const auto& t : tried)
    if (t.accuracy >= best - standard_error) return t.shrinkage;
  return 0.0;  // nothing tried
}

std::string ShrinkageChoice::summary() const {
  char text[64];
  std::snprintf(text, sizeof text, "%g", shrinkage);
  std::string s = std::string("closed form (LDA of the mixtures' moments), shrinkage ") + text;
  if (given) return s;
  if (validation_samples == 0) return s + " (not chosen: that takes two rows of this node's own)";
  s += " chosen on this node's " + std::to_string(validation_samples) + " local rows";
  if (folds > 1) s += " in " + std::to_string(folds) + " folds";
  s += " (";
  for (size_t i = 0; i < tried.size(); ++i) {
    std::snprintf(text, sizeof text, "%s%g: %.4f", i ? "; " : "", tried[i].shrinkage, tried[i].accuracy);
    s += text;
  }
  return s + ")";
}

namespace {

// Rows the candidates are scored on and the statistics each is solved from without them.
struct HeldOut {
  StatsKnowledge solve_from;
  bool every_local_row = false;  // scored on the local rows themselves (not copied: a node may hold 20 000)
  Features fold;                 // or on these, a fold of them
  const Features& rows(const Features& local) const { return every_local_row ? local : fold; }
};

// all less the rows' own statistics: the statistics add up (equal up to rounding).
StatsKnowledge without(const StatsKnowledge& all, const Features& rows) {
  StatsKnowledge rest = compute_stats(rows);
  rest.A = all.A - rest.A;
  rest.B = all.B - rest.B;
  for (size_t c = 0; c < rest.N.size(); ++c) rest.N[c] = all.N[c] - rest.N[c];
  return rest;
}

// With knowledge received, the node's own rows, each candidate solved from the received moments
// alone. With none (a chain's first node, a node alone), its rows in kLocalFolds folds, row i in
// fold i mod kLocalFolds, each scored by the candidates solved from the other folds: there the
// unshrunk covariance of 1 396 rows of d = 1 280 scored 0.443 on Fashion-MNIST where the trained
// head scores 0.689 (docs/methods/fedpft.md, "A head in closed form").
std::vector<HeldOut> held_out_sets(const StatsKnowledge& all, const StatsKnowledge& received, const Features& local,
                                   bool any_received) {
  std::vector<HeldOut> sets;
  if (any_received) {
    sets.push_back({received, true, {}});
    return sets;
  }
  const int64_t n = local.size();
  const int64_t folds = std::min<int64_t>(kLocalFolds, n);
  if (folds < 2) return sets;  // one row: nothing to solve from without it
  for (int64_t f = 0; f < folds; ++f) {
    std::vector<int64_t> in_fold;
    for (int64_t i = f; i < n; i += folds) in_fold.push_back(i);
    Features rows = local.subset(in_fold);
    StatsKnowledge rest = without(all, rows);
    sets.push_back({std::move(rest), false, std::move(rows)});
  }
  return sets;
}

}  // namespace

std::unique_ptr<LinearHead> fit_closed_form_head(const HeadSources& sources, const FedPftOptions& options,
                                                 const NodeContext& ctx, ShrinkageChoice* chosen) {
  std::vector<const ClassMixture*> all;
  for (const auto& m : sources.mixtures) all.push_back(m.mixture);
  const bool has_local = sources.local && sources.local->size() > 0;
  if (all.empty() && !has_local) throw InputError("fedpft: no knowledge and no local data to fit a head on");
  ShrinkageChoice choice;
  choice.shrinkage = options.lda_shrinkage.value_or(kShrinkages[0]);
  choice.given = options.lda_shrinkage.has_value();
  MatrixD correlation;
  if (options.sample_correlation == FedPftOptions::SampleCorrelation::Local && has_local) {
    const WithinClassCorrelation c = within_class_correlation(*sources.local);
    if (c.factor.size() > 0) correlation = c.factor * c.factor.transpose();
  }
  // The received moments and the local rows' statistics, each formed once: the candidates are
  // solved from the first, the head from their sum.
  const StatsKnowledge received = mixture_statistics(all, nullptr, ctx.num_classes, ctx.dim,
                                                     correlation.size() ? &correlation : nullptr);
  const StatsKnowledge stats = has_local ? plus(received, compute_stats(*sources.local)) : received;
  if (!choice.given && has_local) {
    const std::vector<HeldOut> sets = held_out_sets(stats, received, *sources.local, !all.empty());
    std::vector<int64_t> correct(std::size(kShrinkages), 0);
    for (const HeldOut& set : sets) {
      if (total_count(set.solve_from) == 0) continue;  // its rows are all there is: every candidate misses them
      const Features& rows = set.rows(*sources.local);
      const LdaScatter candidates(set.solve_from, lda_options(0.0), LdaScatter::Factorisation::Lapack);
      for (size_t i = 0; i < std::size(kShrinkages); ++i) {
        // A signal is answered between factorisations: at d = 4 096 (a feature expansion) each
        // is 23 GFLOP, and a node alone solves 35 (seven candidates in five folds).
        ctx.interruption_point();
        const Labels predicted = candidates.head(kShrinkages[i])->predict(rows.X);
        for (size_t r = 0; r < predicted.size(); ++r) correct[i] += predicted[r] == rows.y[r];
      }
      choice.validation_samples += rows.size();
      choice.folds += 1;
    }
    if (choice.validation_samples > 0) {
      for (size_t i = 0; i < std::size(kShrinkages); ++i)
        choice.tried.push_back({kShrinkages[i], static_cast<double>(correct[i]) /
                                                    static_cast<double>(choice.validation_samples)});
      choice.shrinkage = least_shrinkage_near_best(choice.tried, choice.validation_samples);
    }
  }
  auto head = LdaScatter(stats, lda_options(0.0), LdaScatter::Factorisation::Lapack).head(choice.shrinkage);
  if (chosen) *chosen = std::move(choice);
  return head;
}

}  // namespace fednode
