// Internal to methods/gmm: vector kernels for the diagonal and spherical EM pass.
//
// With K around 10 the pass's two products (rows x 2d by 2d x K, and its transpose) are too
// thin for BLAS kernels to reach the FMA units' throughput; these kernels keep a tile of vector
// accumulators in registers (rows x components in the E-step, components in the M-step),
// convert the float32 rows to double and compute the squares in registers (an earlier version
// wrote a double copy of each block first: a tenth of the pass's time, and a block's worth of
// cache), and reduce across lanes once per row and component. They are written once
// (simd_kernels.inc) and compiled for AVX-512 and for AVX2 with FMA with target pragmas, the
// best the CPU has chosen at run time; without either (or when switched off, as tests do to
// compare) the BLAS path runs. Both instruction sets do the same arithmetic in every lane; the
// BLAS path agrees to rounding. On one machine the same path is always taken, so runs stay
// reproducible.
#pragma once

#include "methods/gmm/blocks.h"

#include <vector>

namespace fednode::gmm_detail {

// True if the CPU has AVX-512 F+VL or AVX2, with FMA, and the kernels are not switched off.
bool simd_kernels_active();
// For tests: force the BLAS path (false) or allow the kernels again (true).
void set_simd_kernels_enabled(bool enabled);
// For tests: whether the AVX-512 kernels can run here, and running the AVX2 ones instead (false).
bool cpu_has_avx512_kernels();
void set_avx512_kernels_allowed(bool allowed);

// For tests: which M-step kernel runs, chosen by how many responsibilities are nonzero (Auto,
// the default) or always the one named; both give the same bits.
enum class MstepKernel { Auto, Dense, Sparse };
void set_mstep_kernel(MstepKernel kernel);

// Rows [begin, begin + rows) of the row-major float32 matrix X (d columns), minus offset.
struct Block {
  const float* X;
  Index d;
  Index begin;
  Index rows;
  const double* offset;
};

// The weights of the E-step packed like the data: [8-column chunk][component][lane], lanes
// past d zero. W is d x K row-major (W(j, k)); the result has (d + 7) / 8 * 8 * K doubles.
std::vector<double> simd_pack_weights(const double* W, Index d, int K);

// out (rows x K, row-major) = sum_j v_ij wm[k][j] (+ v_ij^2 wp[k][j] if wp is not null), v the
// block's rows; wm and wp packed by simd_pack_weights. If norms is not null, norms[i] = |v_i|^2.
// `carry` is work space.
void simd_estep(const Block& block, int K, const double* wm, const double* wp, double* out, double* norms,
                std::vector<double>& carry);

// S (K x width) += resp^T [v, v^2] (or resp^T v if !squares); resp is rows x K row-major;
// width = 2d with squares, d without. Where at most 1 in kSparseRatio responsibilities is
// nonzero, only those are visited (the same result to the bit); `rows` is work space.
constexpr Index kSparseRatio = 3;
void simd_mstep(const Block& block, const double* resp, int K, bool squares, double* S,
                std::vector<Index>& rows);

}  // namespace fednode::gmm_detail
