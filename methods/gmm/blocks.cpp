#include "methods/gmm/blocks.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include <unistd.h>

// OpenBLAS's thread controls; declared here rather than taken from cblas.h because the
// cblas.h found at build time may be the generic one (the library links OpenBLAS either way).
extern "C" {
int openblas_get_num_threads(void);
void openblas_set_num_threads(int num_threads);
}

namespace fednode::gmm_detail {

std::vector<RowRange> partition_rows(Index n, Index max_chunks) {
  std::vector<RowRange> out;
  if (n <= 0) return out;
  const Index chunks = std::max<Index>(1, std::min(max_chunks, n));
  const Index base = n / chunks, extra = n % chunks;
  Index begin = 0;
  for (Index c = 0; c < chunks; ++c) {
    const Index size = base + (c < extra ? 1 : 0);
    out.push_back({begin, begin + size});
    begin += size;
  }
  return out;
}

Index block_rows(Index width) {
  const Index target = (512 * 1024 / 8) / std::max<Index>(width, 1);
  return std::clamp<Index>(target, 16, 1024);
}

void load_block(const MatrixF& X, Index begin, Index rows, const VectorD& offset, bool squares,
                double* out) {
  const Index d = X.cols();
  const double* __restrict o = offset.data();
  for (Index i = 0; i < rows; ++i) {
    const float* __restrict x = X.data() + (begin + i) * d;
    if (squares) {
      double* __restrict z = out + i * 2 * d;
      double* __restrict z2 = z + d;
      for (Index j = 0; j < d; ++j) {
        const double v = static_cast<double>(x[j]) - o[j];
        z[j] = v;
        z2[j] = v * v;
      }
    } else {
      double* __restrict z = out + i * d;
      for (Index j = 0; j < d; ++j) z[j] = static_cast<double>(x[j]) - o[j];
    }
  }
}

namespace {
std::mutex blas_mutex;
int blas_users = 0;
int blas_saved_threads = 1;
}  // namespace

BlasSingleThread::BlasSingleThread() {
  std::lock_guard<std::mutex> lock(blas_mutex);
  if (blas_users++ == 0) {
    blas_saved_threads = openblas_get_num_threads();
    if (blas_saved_threads != 1) openblas_set_num_threads(1);
  }
}

BlasSingleThread::~BlasSingleThread() {
  std::lock_guard<std::mutex> lock(blas_mutex);
  if (--blas_users == 0 && blas_saved_threads != 1) openblas_set_num_threads(blas_saved_threads);
}

namespace {

// Never destroyed: its workers may still be blocked in wait() while the process exits, and a
// forked child (which has none of the parent's threads) must not try to join or use them.
class WorkerPool {
 public:
  static WorkerPool& instance() {
    static WorkerPool* pool = new WorkerPool;
    return *pool;
  }

  // False if the pool is busy with another job, or this is a forked child of the process that
  // started the workers: the caller then runs serially.
  bool run(size_t chunks, int threads, const std::function<void(size_t)>& body) {
    if (getpid() != owner_) return false;
    std::unique_lock<std::mutex> busy(job_mutex_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    const int helpers = std::max(0, std::min<int>(threads, static_cast<int>(chunks)) - 1);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (; started_ < helpers; ++started_) std::thread([this, id = started_] { work(id); }).detach();
      body_ = &body;
      chunks_ = chunks;
      next_.store(0);
      helpers_ = helpers;
      active_ = helpers;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    drain();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return active_ == 0; });
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    return true;
  }

 private:
  void drain() {
    for (size_t c; (c = next_.fetch_add(1)) < chunks_;) {
      try {
        (*body_)(c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
        next_.store(chunks_);  // skip what is left
      }
    }
  }

  [[noreturn]] void work(int id) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (id >= helpers_) continue;  // not needed for this job
      }
      drain();
      std::lock_guard<std::mutex> lock(mutex_);
      if (--active_ == 0) done_.notify_one();
    }
  }

  std::mutex job_mutex_;  // one job at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  int started_ = 0;  // workers started so far; worker i helps in jobs with more than i helpers
  const std::function<void(size_t)>* body_ = nullptr;
  size_t chunks_ = 0;
  std::atomic<size_t> next_{0};
  int helpers_ = 0;
  int active_ = 0;
  uint64_t generation_ = 0;
  std::exception_ptr error_;
  const pid_t owner_ = getpid();
};

}  // namespace

void for_each_chunk(size_t chunks, bool parallel, const std::function<void(size_t)>& body) {
  const int threads = omp_get_max_threads();
  if (parallel && chunks > 1 && threads > 1 && WorkerPool::instance().run(chunks, threads, body))
    return;
  for (size_t c = 0; c < chunks; ++c) body(c);
}

VectorD column_means(const MatrixF& X) {
  VectorD sum = VectorD::Zero(X.cols());
  for (Index i = 0; i < X.rows(); ++i) sum += X.row(i).transpose().cast<double>();
  if (X.rows() > 0) sum /= static_cast<double>(X.rows());
  return sum;
}

void require_finite(const MatrixF& X, const std::string& where) {
  // A float is NaN or infinite iff its exponent bits are all ones; an integer max over the
  // masked bits vectorises, unlike a floating-point test with early exit.
  const size_t count = static_cast<size_t>(X.size());
  uint32_t worst = 0;
  for (size_t i = 0; i < count; ++i) {
    uint32_t bits;
    std::memcpy(&bits, X.data() + i, sizeof bits);
    worst = std::max(worst, bits & 0x7F800000u);
  }
  if (worst != 0x7F800000u) return;
  for (Index i = 0; i < X.rows(); ++i)
    for (Index j = 0; j < X.cols(); ++j)
      if (!std::isfinite(X(i, j)))
        throw InputError(where + ": non-finite value at row " + std::to_string(i) + ", column " +
                         std::to_string(j));
}

}  // namespace fednode::gmm_detail
