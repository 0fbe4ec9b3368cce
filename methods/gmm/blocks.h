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

#include "methods/types.h"

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

// While alive, OpenBLAS runs single-threaded: the passes call it from several threads at once,
// each on its own block, and nested BLAS threads would only oversubscribe the cores.
// Reference-counted, so that concurrent passes restore the setting only when the last ends.
class BlasSingleThread {
 public:
  BlasSingleThread();
  ~BlasSingleThread();
  BlasSingleThread(const BlasSingleThread&) = delete;
  BlasSingleThread& operator=(const BlasSingleThread&) = delete;
};

// Below this many floating-point operations a pass runs on the calling thread alone: waking
// the workers costs more than it saves.
constexpr double kParallelFlops = 4e6;

// Runs body(chunk_index) for every chunk in [0, chunks), on the calling thread and, if
// `parallel`, on the worker threads of a small pool (as many threads in all as
// omp_get_max_threads(), so OMP_NUM_THREADS and omp_set_num_threads apply). Idle workers
// block on a condition variable rather than spin: on a busy machine spinning threads take
// the cores from the ones doing the work. A call made while the pool is busy (another thread,
// or a body calling in) runs its chunks on its own thread. The first exception thrown by a
// body is rethrown here after every chunk has finished or been skipped.
void for_each_chunk(size_t chunks, bool parallel, const std::function<void(size_t)>& body);

// Column means of X in double precision.
VectorD column_means(const MatrixF& X);

// Throws InputError naming the first non-finite entry.
void require_finite(const MatrixF& X, const std::string& where);

}  // namespace fednode::gmm_detail
