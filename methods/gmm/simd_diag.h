// Internal to methods/gmm: AVX-512 kernels for the diagonal and spherical EM pass.
//
// With K around 10 the pass's two products (rows x 2d by 2d x K, and its transpose) are too
// thin for BLAS kernels to reach the FMA units' throughput; these kernels keep up to 2 x 10
// (E-step) or 10 x 2 (M-step) vector accumulators in registers, compute the squares on the
// fly from one packed double copy of the block, and reduce across lanes once per row and
// component. They are compiled for AVX-512 with
// function target attributes and chosen at run time; without AVX-512 (or when switched off,
// as tests do to compare both) the BLAS path runs. Results agree to rounding, and on one
// machine the same path is always taken, so runs stay reproducible.
#pragma once

#include "methods/gmm/blocks.h"

#include <vector>

namespace fednode::gmm_detail {

// True if the CPU has AVX-512 F+VL and the kernels are not switched off.
bool simd_kernels_active();
// For tests: force the BLAS path (false) or allow the kernels again (true).
void set_simd_kernels_enabled(bool enabled);

// Doubles a packed block of `rows` rows of dimension d takes.
inline Index simd_pack_size(Index rows, Index d) { return (d + 7) / 8 * 8 * rows; }

// pack = rows [begin, begin + rows) of X minus offset, laid out as [8-column chunk][row][lane]
// (lanes past d are zero), so that both kernels read whole 64-byte lines.
void simd_pack_block(const MatrixF& X, Index begin, Index rows, const VectorD& offset,
                     double* pack);

// The weights of the E-step packed like the data: [8-column chunk][component][lane], lanes
// past d zero. W is d x K row-major (W(j, k)); the result has simd_pack_size(K, d) doubles.
std::vector<double> simd_pack_weights(const double* W, Index d, int K);

// out (rows x K, row-major) = sum_j v_ij wm[k][j] (+ v_ij^2 wp[k][j] if wp is not null),
// wm and wp packed by simd_pack_weights. If norms is not null, norms[i] = |v_i|^2. `carry` is work space.
void simd_estep(const double* pack, Index rows, Index d, int K, const double* wm,
                const double* wp, double* out, double* norms, std::vector<double>& carry);

// S (K x width) += resp^T [v, v^2] (or resp^T v if !squares); resp is rows x K row-major;
// width = 2d with squares, d without.
void simd_mstep(const double* pack, Index rows, Index d, const double* resp, int K, bool squares,
                double* S);

}  // namespace fednode::gmm_detail
