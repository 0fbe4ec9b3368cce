// The closed-form head of FedCGS (paper Eq. 9-11): a Gaussian classifier with class means
// mu_j = A_j / N_j, one shared covariance and priors pi_j = N_j / N, i.e. linear discriminant
// analysis computed from the additive statistics alone. Also the centralised LDA baseline.
#pragma once

#include "methods/heads/head.h"
#include "methods/knowledge.h"
#include "methods/method.h"

#include <memory>
#include <vector>

namespace fednode {

// Statistics a head can use. Exact ones as they are; noisy ones (DP-FedCGS) with every class
// whose noisy count is below 3 standard deviations of the count's noise (or below 1) treated as
// absent: its count and sum set to zero.
StatsKnowledge usable_statistics(const StatsKnowledge& stats);

// Classes with N_j = 0: present nowhere in the data behind `stats`.
std::vector<int> absent_classes(const StatsKnowledge& stats);

// The shared covariance the head uses, after optional shrinkage, before any ridge:
//   Total:  (B - a a^T / N) / (N - 1),                a = sum_j A_j   (the reference code's choice)
//   Within: (B - sum_j A_j A_j^T / N_j) / (N - C'),   C' = classes with N_j > 0
//   shrinkage s: (1 - s) Sigma + s (tr(Sigma) / d) I
// Noisy statistics (docs/privacy.md, "The head on noisy statistics") are first made usable
// (usable_statistics); the bias A's noise leaves in the within-class scatter is added back; the
// shrinkage is at least the share of the scatter's spread that B's noise explains,
//   s = min(1, d^2 noise.b / dof^2 / ||Sigma - (tr(Sigma)/d) I||_F^2);
// and the eigenvalues are floored at the noise's spectral radius 2 sqrt(d noise.b) / dof.
// Throws InputError when the statistics hold no samples or the options are out of range.
struct LdaDiagnostics;
MatrixD lda_covariance(const StatsKnowledge& stats, const FedCgsOptions& options, LdaDiagnostics* diagnostics = nullptr);

// What fitting found, for reports and logs.
struct LdaDiagnostics {
  double shrinkage = 0;      // as applied: the option's, or more for noisy statistics
  double eigen_floor = 0;    // noisy statistics: the floor under every eigenvalue of Sigma
  std::vector<int> absent;   // classes never predicted (bias = lowest finite float)
  // Both on the equilibrated covariance (each feature scaled by a power of two to a variance
  // near 1): the ridge added to its diagonal because it was (near) singular, and whether it was
  // replaced by I because no feature varied.
  double ridge = 0.0;
  bool identity = false;
  int64_t samples = 0;       // N
};

// What the covariance and the head of some statistics share whatever the shrinkage: the usable
// statistics and the scatter before shrinkage, computed once, so that trying several shrinkages
// (FedPFT's closed-form head tries seven, methods/fedpft/closed_form_head.h) costs one product of
// the class sums, not seven. lda_covariance and fit_lda_head are one of these and one call; the
// same arithmetic in the same order, so the same bits.
class LdaScatter {
 public:
  // Eigen's products and LLT: the bits FedCGS's heads have always had. OpenBLAS's product of the
  // class means and LAPACK's dpotrf and dpotrs: three to five times faster at d = 1 280, for heads
  // with no earlier results to keep (FedPFT's closed form).
  enum class Factorisation { Eigen, Lapack };
  // Throws InputError as lda_covariance does.
  LdaScatter(const StatsKnowledge& stats, const FedCgsOptions& options,
             Factorisation factorisation = Factorisation::Eigen);
  MatrixD covariance(double shrinkage, LdaDiagnostics* diagnostics = nullptr) const;
  std::unique_ptr<LinearHead> head(double shrinkage, LdaDiagnostics* diagnostics = nullptr) const;

 private:
  StatsKnowledge stats_;     // usable_statistics of what was given
  Eigen::MatrixXd scatter_;  // the covariance before shrinkage (with A's noise added back), column-major as ever
  double dof_ = 1;
  Factorisation factorisation_;
};

// W_j = Sigma^-1 (mu_j - m), b_j = log pi_j - W_j^T (mu_j + m) / 2, m = a / N: Eq. 11 up to a
// term common to every class (so the same predictions and softmax), centred so that float32
// scores do not carry a large shared offset. Solved with a Cholesky factorisation in double.
std::unique_ptr<LinearHead> fit_lda_head(const StatsKnowledge& stats, const FedCgsOptions& options,
                                         LdaDiagnostics* diagnostics = nullptr);

}  // namespace fednode
