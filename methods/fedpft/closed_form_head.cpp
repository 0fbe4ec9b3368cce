#include "methods/fedpft/closed_form_head.h"

#include "methods/fedcgs/lda.h"  // FedCGS's head: the LDA of additive statistics, which the moments are
#include "methods/fedcgs/stats.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace fednode {
namespace {

// Mean vectors gathered before one rank update of B: a block keeps the update a matrix product
// (OpenBLAS's dsyrk, on its threads: some 5 000 means of d = 1 280 in 0.1 s, where Eigen's rank
// update on one thread took most of the head's time).
constexpr Eigen::Index kBlockRows = 512;
// Tried in this order, a tie going to the earlier (the less shrunk); 1 is the nearest class mean.
// None is FedCGS's default and the best where the covariance is well estimated (FedCGS, 10
// classes, 20 000 rows of d = 1 280: 0.839 at 0, 0.821 at 0.5); much more pays where few rows
// stand for many dimensions (100 classes of 57 rows: 0.690 at 0, 0.720 at 0.7, 0.734 at 1).
// docs/methods/fedpft.md, "A head in closed form".
constexpr double kShrinkages[] = {0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0};

// Sums A, N and B as mixtures come; the outer products of the means go into the upper triangle a
// block at a time.
class MomentSum {
 public:
  MomentSum(int classes, int dim) : block_(kBlockRows, dim) {
    stats_.A = MatrixD::Zero(classes, dim);
    stats_.N.assign(static_cast<size_t>(classes), 0);
    stats_.B = MatrixD::Zero(dim, dim);
    outer_ = MatrixD::Zero(dim, dim);
  }

  void add(const ClassMixture& cm) {
    const GaussianMixture& g = cm.mixture;
    const Eigen::Index d = g.dim();
    stats_.N[static_cast<size_t>(cm.label)] += cm.count;
    for (int k = 0; k < g.components(); ++k) {  // component k stands for n w_k samples
      const double nw = static_cast<double>(cm.count) * g.weights(k);
      stats_.A.row(cm.label) += nw * g.means.row(k);
      push(std::sqrt(nw) * g.means.row(k));
      switch (g.type) {
        case CovarianceType::Diag: stats_.B.diagonal() += nw * g.covariances.row(k).transpose(); break;
        case CovarianceType::Spherical: stats_.B.diagonal().array() += nw * g.covariances(k, 0); break;
        case CovarianceType::Full: stats_.B += nw * g.covariances.middleRows(k * d, d); break;
      }
    }
  }

  StatsKnowledge finish() {
    flush();
    stats_.B += outer_.selfadjointView<Eigen::Upper>();
    return std::move(stats_);
  }

 private:
  void push(const Eigen::RowVectorXd& v) {
    block_.row(pending_++) = v;
    if (pending_ == kBlockRows) flush();
  }
  void flush() {
    // Row-major block_ is pending_ x d; Trans makes this outer_ += block^T block.
    const int d = static_cast<int>(outer_.cols());
    if (pending_ > 0)
      cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, d, static_cast<int>(pending_), 1.0, block_.data(), d, 1.0,
                  outer_.data(), d);
    pending_ = 0;
  }

  StatsKnowledge stats_;
  MatrixD outer_;  // upper triangle of the sum of the pushed rows' outer products
  MatrixD block_;
  Eigen::Index pending_ = 0;
};

FedCgsOptions lda_options(double shrinkage) {
  FedCgsOptions o;
  o.covariance = LdaCovariance::Within;
  o.shrinkage = shrinkage;
  return o;
}

}  // namespace

StatsKnowledge mixture_statistics(const std::vector<const ClassMixture*>& mixtures, const Features* local,
                                  int num_classes, int dim) {
  MomentSum sum(num_classes, dim);
  for (const ClassMixture* cm : mixtures) sum.add(*cm);
  StatsKnowledge s = sum.finish();
  if (local && local->size() > 0) {  // real rows are FedCGS's own statistics
    const StatsKnowledge rows = compute_stats(*local);
    s.A += rows.A;
    s.B += rows.B;
    for (size_t c = 0; c < s.N.size(); ++c) s.N[c] += rows.N[c];
  }
  return s;
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
  if (validation_samples == 0) return s + " (not chosen: that takes rows of this node's own and knowledge of others)";
  s += " chosen on this node's " + std::to_string(validation_samples) + " local rows (";
  for (size_t i = 0; i < tried.size(); ++i) {
    std::snprintf(text, sizeof text, "%s%g: %.4f", i ? "; " : "", tried[i].shrinkage, tried[i].accuracy);
    s += text;
  }
  return s + ")";
}

std::unique_ptr<LinearHead> fit_closed_form_head(const HeadSources& sources, const FedPftOptions& options,
                                                 const NodeContext& ctx, ShrinkageChoice* chosen) {
  std::vector<const ClassMixture*> all;
  for (const auto& m : sources.mixtures) all.push_back(m.mixture);
  if (all.empty() && (!sources.local || sources.local->size() == 0))
    throw InputError("fedpft: no knowledge and no local data to fit a head on");
  ShrinkageChoice choice;
  choice.shrinkage = options.lda_shrinkage.value_or(kShrinkages[0]);
  choice.given = options.lda_shrinkage.has_value();
  const StatsKnowledge stats = mixture_statistics(all, sources.local, ctx.num_classes, ctx.dim);
  // Chosen only with both the node's own rows and something else to solve from.
  if (!choice.given && sources.local && sources.local->size() > 0 && !all.empty()) {
    // The statistics add up: the rest's are all of them less the local rows' (equal up to rounding).
    StatsKnowledge rest = mixture_statistics({}, sources.local, ctx.num_classes, ctx.dim);
    rest.A = stats.A - rest.A;
    rest.B = stats.B - rest.B;
    for (size_t c = 0; c < rest.N.size(); ++c) rest.N[c] = stats.N[c] - rest.N[c];
    choice.validation_samples = sources.local->size();
    const LdaScatter candidates(rest, lda_options(0.0), LdaScatter::Factorisation::Lapack);
    for (double s : kShrinkages) choice.tried.push_back({s, candidates.head(s)->accuracy(*sources.local)});
    choice.shrinkage = least_shrinkage_near_best(choice.tried, sources.local->size());
  }
  auto head = LdaScatter(stats, lda_options(0.0), LdaScatter::Factorisation::Lapack).head(choice.shrinkage);
  if (chosen) *chosen = std::move(choice);
  return head;
}

}  // namespace fednode
