// Internal to methods/gmm: the per-component log-densities of a mixture on blocks of rows,
// the E-step shared by EM and score_samples.
#pragma once

#include "methods/gmm/blocks.h"
#include "methods/knowledge.h"

#include <vector>

namespace fednode::gmm_detail {

// Per-thread work space of the passes.
struct BlockWork {
  std::vector<double> block;    // rows of the block (load_block layout), BLAS path
  std::vector<double> scratch;  // evaluate()'s scratch; squared row norms for spherical
  std::vector<double> carry;    // their accumulators between column slices
  std::vector<Index> listed;    // rows with a nonzero responsibility, for the sparse M-step
};

class ComponentDensity {
 public:
  // `g` in the data's coordinates; blocks are the data minus `offset` (see load_block).
  ComponentDensity(const GaussianMixture& g, const VectorD& offset);

  bool squares() const { return type_ == CovarianceType::Diag; }
  Index width() const { return squares() ? 2 * d_ : d_; }
  // Doubles per row of the block work space evaluate() needs beyond the block itself.
  Index scratch_width() const { return type_ == CovarianceType::Full ? K_ * d_ : 0; }
  int components() const { return K_; }
  int regularised() const { return regularised_; }
  const MatrixD& means() const { return means_; }  // minus offset
  const MatrixD& cholesky(int k) const { return chol_[static_cast<size_t>(k)]; }

  // Whether evaluate_rows uses the AVX-512 kernels (diag and spherical on capable CPUs).
  bool uses_simd() const { return simd_; }
  // Rows per block that keep a block's work space in L2.
  Index rows_per_block() const;

  // out (rows x K, row-major) = log w_k + log N(x_i | mu_k, Sigma_k) for rows [begin,
  // begin + rows) of X. Leaves the block in work.block (BLAS path) and, for spherical
  // mixtures, the squared row norms in work.scratch.
  void evaluate_rows(const MatrixF& X, Index begin, Index rows, const VectorD& offset,
                     BlockWork& work, double* out) const;

  // out (rows x K, row-major) = log w_k + log N(x_i | mu_k, Sigma_k) for the rows of a block.
  // `scratch` is resized as needed (one per thread); for spherical mixtures it holds the
  // squared row norms |x_i|^2 on return, which the M-step reuses.
  void evaluate(const double* block, Index rows, double* out, std::vector<double>& scratch) const;

 private:
  CovarianceType type_;
  int K_ = 0;
  Index d_ = 0;
  MatrixD means_;             // K x d, minus offset
  MatrixD W_;                 // diag: 2d x K; spherical: d x K
  std::vector<double> Wm_, Wp_;  // the same terms packed for the AVX-512 kernels
  VectorD constant_;          // K: log w_k - d/2 log 2 pi - 1/2 log det Sigma_k (- mu terms)
  VectorD precision_;         // spherical: K
  std::vector<MatrixD> chol_; // full: lower factors L_k (L L^T = Sigma)
  MatrixD P_;                 // full: d x Kd, block k = L_k^{-T} (precision Cholesky factor)
  VectorD b_;                 // full: Kd, block k = mu_k^T L_k^{-T}
  int regularised_ = 0;
  bool simd_ = false;
};

// Normalises each row of log-probabilities (rows x K) by log-sum-exp. Writes responsibilities
// into resp if not null, per-row log-likelihoods into row_ll if not null; returns their sum.
double normalise_rows(const double* logp, Index rows, int K, double* resp, double* row_ll);

}  // namespace fednode::gmm_detail
