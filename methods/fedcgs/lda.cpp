#include "methods/fedcgs/lda.h"

#include "methods/fedcgs/stats.h"
#include "methods/blas_threads.h"
#include "methods/gmm/lapack.h"

#include <cblas.h>

#include <Eigen/Cholesky>

#include <algorithm>
#include <cmath>
#include <limits>

namespace fednode {
namespace {

// A direction whose variance is below this fraction of the average variance counts as singular
// (a feature constant on every node, e.g. a border pixel, or fewer samples than dimensions);
// that much ridge is then added to the diagonal.
constexpr double kRelativeVarianceFloor = 1e-10;
constexpr int kMaxRidgeSteps = 12;
// Average variance below this fraction of the average squared feature: every feature is constant.
constexpr double kConstantTolerance = 1e-12;

void check_options(const FedCgsOptions& options) {
  if (!(options.shrinkage >= 0.0 && options.shrinkage <= 1.0))
    throw InputError("FedCGS shrinkage must lie in [0, 1], got " + std::to_string(options.shrinkage));
}

// A noisy count below this many standard deviations of its noise cannot be told from a class
// nobody holds (docs/privacy.md, "The head on noisy statistics").
constexpr double kNoiseCountSigmas = 3.0;

// The Cholesky factorisation the head is solved with: Eigen's blocked LLT, whose bits FedCGS's
// results have always been, or LAPACK's dpotrf (methods/gmm/lapack.h: 0.04 s against Eigen's
// 0.135 s at d = 1 280), for a caller that solves many heads and has no results to keep.
class Cholesky {
 public:
  explicit Cholesky(LdaScatter::Factorisation how) : lapack_(how == LdaScatter::Factorisation::Lapack) {}
  void compute(const Eigen::MatrixXd& S) {
    if (lapack_) ok_ = lapack_cholesky(S, lower_);
    else ok_ = (llt_.compute(S).info() == Eigen::Success);
  }
  // The smallest pivot (a squared diagonal entry of the factor); -1 if the factorisation failed.
  double least_pivot() const {
    if (!ok_) return -1.0;
    return lapack_ ? lower_.diagonal().array().square().minCoeff()
                   : llt_.matrixLLT().diagonal().array().square().minCoeff();
  }
  Eigen::MatrixXd solve(const Eigen::MatrixXd& rhs) const {
    if (!lapack_) return llt_.solve(rhs);
    Eigen::MatrixXd x = rhs;
    lapack_cholesky_solve(lower_, x);
    return x;
  }

 private:
  bool lapack_;
  bool ok_ = false;
  Eigen::LLT<Eigen::MatrixXd> llt_;
  MatrixD lower_;
};

}  // namespace

StatsKnowledge usable_statistics(const StatsKnowledge& stats) {
  if (!stats.noise.any()) return stats;
  StatsKnowledge s = stats;
  const double min_count = std::max(1.0, kNoiseCountSigmas * std::sqrt(stats.noise.n));
  for (size_t j = 0; j < s.N.size(); ++j)
    if (static_cast<double>(s.N[j]) < min_count) {
      s.N[j] = 0;
      s.A.row(static_cast<Eigen::Index>(j)).setZero();
    }
  return s;
}

double noise_shrinkage(const MatrixD& S, const StatsNoise& noise, double dof) {
  if (!(noise.b > 0)) return 0.0;
  const double d = static_cast<double>(S.rows());
  const double entry_variance = noise.b / (dof * dof);
  MatrixD off = S;
  off.diagonal().array() -= S.trace() / d;
  const double spread = off.squaredNorm();
  const double noise_energy = d * d * entry_variance;
  if (!(spread > 0)) return 1.0;
  return std::clamp(noise_energy / spread, 0.0, 1.0);
}

std::vector<int> absent_classes(const StatsKnowledge& stats) {
  std::vector<int> out;
  for (size_t j = 0; j < stats.N.size(); ++j)
    if (stats.N[j] == 0) out.push_back(static_cast<int>(j));
  return out;
}

LdaScatter::LdaScatter(const StatsKnowledge& noisy, const FedCgsOptions& options, Factorisation factorisation)
    : stats_(usable_statistics(noisy)), factorisation_(factorisation) {
  check_options(options);
  const StatsKnowledge& stats = stats_;
  validate_stats(stats, static_cast<int>(stats.A.rows()), static_cast<int>(stats.A.cols()),
                 "FedCGS statistics");
  const int64_t n = total_count(stats);
  if (n == 0) throw InputError("FedCGS statistics hold no samples: no head can be fitted");
  const Eigen::Index d = stats.B.rows();
  const double N = static_cast<double>(n);

  Eigen::MatrixXd& S = scatter_;
  S = stats.B;
  double& dof = dof_;
  if (options.covariance == LdaCovariance::Total) {
    const Eigen::VectorXd a = stats.A.colwise().sum().transpose();
    S.noalias() -= (a / N) * a.transpose();
    dof = N - 1;
  } else {
    // sum_j N_j mu_j mu_j^T = A_p^T Mu_p over the present classes. Written without square roots
    // so that a feature constant on every node (mu_j exact) cancels exactly.
    int present = 0;
    for (int64_t c : stats.N) present += c > 0;
    Eigen::MatrixXd Ap(present, d), Mu(present, d);
    Eigen::Index r = 0;
    for (size_t j = 0; j < stats.N.size(); ++j)
      if (stats.N[j] > 0) {
        Ap.row(r) = stats.A.row(static_cast<Eigen::Index>(j));
        Mu.row(r++) = stats.A.row(static_cast<Eigen::Index>(j)) / static_cast<double>(stats.N[j]);
      }
    if (factorisation_ == Factorisation::Lapack) {
      // OpenBLAS's product: Eigen's ran at SSE2 width, 50 ms for 100 classes at d = 1 280.
      const BlasSingleThread single;  // the same bits whatever the core count (methods/gmm/lapack.h)
      cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, static_cast<int>(d), static_cast<int>(d), present, -1.0,
                  Ap.data(), present, Mu.data(), present, 1.0, S.data(), static_cast<int>(d));
    } else {
      S.noalias() -= Ap.transpose() * Mu;
    }
    dof = N - present;
  }
  // One sample (or one per class) leaves a zero scatter; dividing by 1 keeps it zero and finite.
  dof = std::max(dof, 1.0);
  S /= dof;
  S = 0.5 * (S + S.transpose()).eval();
  // Noise on A inflates sum_j A_j A_j^T / N_j by noise.a / N_j on the diagonal per class; it is
  // subtracted from B, so it is added back.
  if (stats.noise.any() && options.covariance == LdaCovariance::Within) {
    double inverse_counts = 0;
    for (int64_t c : stats.N)
      if (c > 0) inverse_counts += 1.0 / static_cast<double>(c);
    S.diagonal().array() += stats.noise.a * inverse_counts / dof;
  }
}

MatrixD LdaScatter::covariance(double shrinkage, LdaDiagnostics* diagnostics) const {
  FedCgsOptions checked;
  checked.shrinkage = shrinkage;
  check_options(checked);
  const StatsKnowledge& stats = stats_;
  const Eigen::Index d = scatter_.rows();
  const double dof = dof_;
  Eigen::MatrixXd S = scatter_;
  if (stats.noise.any()) shrinkage = std::max(shrinkage, noise_shrinkage(S, stats.noise, dof));
  if (shrinkage > 0) {
    const double target = S.trace() / static_cast<double>(d);
    S *= 1.0 - shrinkage;
    S.diagonal().array() += shrinkage * target;
  }
  double floor = 0;
  if (stats.noise.b > 0) {
    // B's noise is a symmetric matrix of independent entries: its eigenvalues spread over about
    // +-2 sqrt(d) times an entry's deviation (Wigner's semicircle). Directions below that are
    // noise; they are floored there rather than at zero, which would let them dominate Sigma^-1.
    floor = 2.0 * std::sqrt(static_cast<double>(d) * stats.noise.b) / dof * (1.0 - shrinkage);
    floor = std::max(floor, 1e-10 * S.trace() / static_cast<double>(d));
    S = psd_projection(S, floor);
  }
  if (diagnostics) {
    diagnostics->shrinkage = shrinkage;
    diagnostics->eigen_floor = floor;
  }
  return S;
}

MatrixD lda_covariance(const StatsKnowledge& stats, const FedCgsOptions& options, LdaDiagnostics* diagnostics) {
  return LdaScatter(stats, options).covariance(options.shrinkage, diagnostics);
}

std::unique_ptr<LinearHead> fit_lda_head(const StatsKnowledge& stats, const FedCgsOptions& options,
                                         LdaDiagnostics* diagnostics) {
  return LdaScatter(stats, options).head(options.shrinkage, diagnostics);
}

std::unique_ptr<LinearHead> LdaScatter::head(double shrinkage, LdaDiagnostics* diagnostics) const {
  LdaDiagnostics diag;
  Eigen::MatrixXd Sigma = covariance(shrinkage, &diag);
  const StatsKnowledge& stats = stats_;
  const Eigen::Index C = stats.A.rows(), d = stats.A.cols();
  diag.samples = total_count(stats);
  diag.absent = absent_classes(stats);
  const double N = static_cast<double>(diag.samples);

  // Equilibration: column j is scaled by a power of two e_j near 1 / sqrt(Sigma_jj) (by its RMS
  // value if it does not vary), so that a feature of 1e30 next to features of 1 neither swamps
  // the ridge below nor ruins the factorisation's conditioning. Sigma^-1 = E (E Sigma E)^-1 E,
  // and powers of two keep every scaled entry, and the factor, exact.
  const Eigen::VectorXd second_moment = stats.B.diagonal() / N;
  Eigen::VectorXd e(d);
  for (Eigen::Index j = 0; j < d; ++j) {
    const double varies = Sigma(j, j) > kConstantTolerance * second_moment(j) ? Sigma(j, j) : second_moment(j);
    e(j) = varies > 0 && std::isfinite(varies) ? std::ldexp(1.0, -std::ilogb(varies) / 2) : 1.0;
  }
  Sigma = e.asDiagonal() * Sigma * e.asDiagonal();

  const double mean_variance = Sigma.trace() / static_cast<double>(d);
  // Cancellation in B - (means part) leaves rounding noise of order eps * E[f^2], not zero.
  const double mean_square = e.cwiseAbs2().dot(second_moment) / static_cast<double>(d);
  if (!(mean_variance > kConstantTolerance * mean_square)) {
    // No feature varies at all: the Gaussians differ only in their means (and those only if the
    // classes differ), so a unit covariance is as good as any.
    Sigma.setIdentity();
    diag.identity = true;
  }
  const double floor = kRelativeVarianceFloor * (diag.identity ? 1.0 : mean_variance);
  // Cholesky rather than LDLT: Eigen's LLT is blocked (matrix-matrix updates), its LDLT is not,
  // and at d = 4096 (a feature expansion) the LDLT alone took seconds. The pivots are the squared
  // diagonal of the factor.
  Cholesky llt(factorisation_);
  llt.compute(Sigma);
  auto usable = [&](double min_pivot) { return llt.least_pivot() > min_pivot; };
  if (!usable(floor)) {
    // Cholesky pivots of Sigma + r I are at least r in exact arithmetic (each is at least the
    // smallest eigenvalue); accept any positive pivot and grow r only if rounding defeats it.
    double ridge = floor;
    for (int step = 0;; ++step) {
      Eigen::MatrixXd R = Sigma;
      R.diagonal().array() += ridge;
      llt.compute(R);
      if (usable(0.0)) break;
      if (step == kMaxRidgeSteps)
        throw InputError("FedCGS: the covariance stays singular after a ridge of " + std::to_string(ridge));
      ridge *= 10;
    }
    diag.ridge = ridge;
  }

  const Eigen::RowVectorXd m = stats.A.colwise().sum() / N;
  Eigen::MatrixXd centred(C, d);  // rows mu_j - m of present classes (zero for absent ones)
  centred.setZero();
  for (Eigen::Index j = 0; j < C; ++j)
    if (stats.N[static_cast<size_t>(j)] > 0)
      centred.row(j) = stats.A.row(j) / static_cast<double>(stats.N[static_cast<size_t>(j)]) - m;
  const Eigen::MatrixXd W = (llt.solve(e.asDiagonal() * centred.transpose()).transpose()) * e.asDiagonal();  // C x d

  VectorF b(C);
  for (Eigen::Index j = 0; j < C; ++j) {
    const int64_t nj = stats.N[static_cast<size_t>(j)];
    if (nj == 0) {
      // Never predicted, never NaN: the lowest finite score stays finite in float arithmetic
      // because this class's weight row is exactly zero.
      b(j) = std::numeric_limits<float>::lowest();
      continue;
    }
    const Eigen::RowVectorXd mu = stats.A.row(j) / static_cast<double>(nj);
    b(j) = static_cast<float>(std::log(static_cast<double>(nj) / N) - 0.5 * W.row(j).dot(mu + m));
  }
  MatrixF Wf = W.cast<float>();
  if (!all_finite(Wf) || !all_finite(b))
    throw InputError("FedCGS: the LDA head overflows float32 (features of extreme scale)");
  if (diagnostics) *diagnostics = std::move(diag);
  return std::make_unique<LinearHead>("lda", std::move(Wf), std::move(b));
}

}  // namespace fednode
