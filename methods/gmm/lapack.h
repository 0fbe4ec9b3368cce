// LAPACK, from the OpenBLAS fednode already links, for the factorisations of large symmetric
// matrices (DP-FedPFT's full covariances, d = 1 280): at that size OpenBLAS's Cholesky took
// 0.04 s against Eigen's 0.135 s, and its divide-and-conquer eigen-decomposition 0.36-0.46 s
// against Eigen's 2.4 s, on the 2-core machine while another process ran (docs/performance.md, "DP-FedPFT"). Both run OpenBLAS single-threaded:
// its multi-threaded factorisations block differently by thread count, and a node's knowledge
// must not depend on its core count; on a loaded 2-core machine two threads were slower anyway.
// Symmetric input is the same matrix in row- and column-major order, so the row-major MatrixD
// goes to LAPACK as it is.
#pragma once

#include "core/types.h"

namespace fednode {

// The lower Cholesky factor L (L L^T = S) of symmetric S; false, L unspecified, if S is not
// numerically positive definite.
bool lapack_cholesky(const MatrixD& S, MatrixD& L);
// B <- S^-1 B for the factor L that lapack_cholesky made of S (dpotrs; B column-major, d x m):
// OpenBLAS's triangular solves, where Eigen's ran at SSE2 width (FedPFT's closed-form head solves
// 100 classes' right-hand sides at d = 1 280 eight times).
void lapack_cholesky_solve(const MatrixD& L, Eigen::MatrixXd& B);
// Whether lapack_cholesky would succeed on S, without forming the factor's zeros or checks.
bool lapack_positive_definite(const MatrixD& S);
// True if a row v of `probes` (of S's width) proves symmetric S indefinite, v^T S v below what
// dpotrf's rounding can absorb: then lapack_positive_definite(S) is false. False proves nothing.
// One pass over S for all the probes, where the factorisation is d^3 / 3.
bool shown_not_positive_definite(const MatrixD& S, const MatrixD& probes);

// How precisely psd_projection finds the eigenpairs. The result is always formed in double as
// floor I + B B^T, so it is symmetric and its eigenvalues are at least `floor` either way.
enum class EigenArithmetic {
  Double,  // dsyevd: what an exact computation (FedCGS's LDA) or a float32 release needs
  Single,  // ssyevd, 2x faster at d = 1 280: errors near 1e-6 of the largest entry, far below
           // the 2^-12 of a float16 release (docs/performance.md, "DP-FedPFT")
};

// The nearest positive semi-definite matrix to symmetric S with every eigenvalue at least
// `floor`: V diag(max(lambda, floor)) V^T, exactly symmetric. If `at_floor` is given, it receives
// as its rows up to `max_at_floor` of the eigenvectors that were raised to the floor, the lowest
// first: directions along which the result is only `floor` (float16 rounding can make it
// negative there, see round_mixture_to_half).
MatrixD psd_projection(const MatrixD& S, double floor, EigenArithmetic arithmetic = EigenArithmetic::Double,
                       MatrixD* at_floor = nullptr, int max_at_floor = 0);

}  // namespace fednode
