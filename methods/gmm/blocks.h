// Internal to methods/gmm: how the EM, k-means and scoring passes walk over the data.
//
// The data stays float32 (as it arrives); each pass converts one block of rows at a time to
// double, minus a fixed offset (the data mean, which keeps the expanded quadratic forms of the
// diagonal and spherical E-steps away from cancellation), and runs BLAS (or, for diagonal and
// spherical mixtures on AVX-512 machines, the kernels of simd_diag.h) on the block while it is
// in cache. E-step and M-step share the pass, so the data is read once per EM iteration.
//
// Rows are split into a fixed number of chunks that depends only on the problem size; every
// chunk accumulates into its own statistics and the chunks are reduced in order. The result is
// therefore the same bits whatever the number of threads.
#pragma once

#include "methods/blas_threads.h"
#include "core/types.h"

#include <functional>
#include <string>
#include <vector>

namespace fednode::gmm_detail {

using Index = Eigen::Index;

struct RowRange {
  Index begin = 0, end = 0;
};

// Chunks of about equal size; at most max_chunks, at least one (for n > 0).
std::vector<RowRange> partition_rows(Index n, Index max_chunks);

// Rows per block for blocks `width` doubles wide (about 512 KiB, so a block stays in L2).
Index block_rows(Index width);

// Writes rows [begin, begin + rows) of X minus offset into out (row-major). With squares the
// row is [x - o, (x - o)^2] (width 2d), otherwise x - o (width d).
void load_block(const MatrixF& X, Index begin, Index rows, const VectorD& offset, bool squares,
                double* out);

// Below this many floating-point operations a pass runs on the calling thread alone: waking
// the workers costs more than it saves.
constexpr double kParallelFlops = 4e6;

// Column means of X in double precision, after checking that every entry is finite (throws
// InputError naming the first one that is not, as require_finite). One pass over the data,
// on the pool: before an EM of a few iterations, two serial passes took a sixth of its time.
VectorD finite_column_means(const MatrixF& X, const std::string& where);

// Throws InputError naming the first non-finite entry.
void require_finite(const MatrixF& X, const std::string& where);

}  // namespace fednode::gmm_detail
