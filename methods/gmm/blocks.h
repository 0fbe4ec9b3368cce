// Internal to methods/gmm: how the EM, k-means and scoring passes walk over the data.
//
// The data stays float32 (as it arrives); each pass converts one block of rows at a time to
// double, minus a fixed offset (the data mean, which keeps the expanded quadratic forms of the
// diagonal and spherical E-steps away from cancellation), and runs BLAS on the block while it
// is in cache. E-step and M-step share the pass, so the data is read once per EM iteration.
//
// Rows are split into a fixed number of chunks that depends only on the problem size; every
// chunk accumulates into its own statistics and the chunks are reduced in order. The result is
// therefore the same bits whatever the number of OpenMP threads.
#pragma once

#include "methods/types.h"

#include <exception>
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

// While alive, OpenBLAS runs single-threaded: the passes call it from several OpenMP threads
// at once, each on its own block, and nested BLAS threads would only oversubscribe the cores.
// Reference-counted, so that concurrent passes restore the setting only when the last ends.
class BlasSingleThread {
 public:
  BlasSingleThread();
  ~BlasSingleThread();
  BlasSingleThread(const BlasSingleThread&) = delete;
  BlasSingleThread& operator=(const BlasSingleThread&) = delete;
};

// Below this many floating-point operations a pass runs on one thread: waking a team costs
// more than it saves, and on a busy machine a barrier can wait a whole scheduler time slice.
constexpr double kParallelFlops = 4e6;

// Runs body(chunk_index) for every chunk, on the OpenMP threads if `parallel`. An exception
// thrown by a body is rethrown here (OpenMP regions must not be left by an exception).
template <class Body>
void for_each_chunk(size_t chunks, bool parallel, Body&& body) {
  std::exception_ptr error;
#pragma omp parallel for schedule(dynamic, 1) if (parallel && chunks > 1)
  for (long c = 0; c < static_cast<long>(chunks); ++c) {
    try {
      body(static_cast<size_t>(c));
    } catch (...) {
#pragma omp critical(fednode_gmm_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

// Column means of X in double precision.
VectorD column_means(const MatrixF& X);

// Throws InputError naming the first non-finite entry.
void require_finite(const MatrixF& X, const std::string& where);

}  // namespace fednode::gmm_detail
