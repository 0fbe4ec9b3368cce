#include "core/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <unistd.h>

namespace fednode {

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

void for_each_chunk_ordered(size_t chunks, bool parallel, const std::function<void(size_t)>& body) {
  std::vector<std::exception_ptr> failures(chunks);
  for_each_chunk(chunks, parallel, [&](size_t c) {
    try {
      body(c);
    } catch (...) {
      failures[c] = std::current_exception();
    }
  });
  for (const auto& f : failures)
    if (f) std::rethrow_exception(f);
}

int parallel_threads() { return std::max(1, omp_get_max_threads()); }

}  // namespace fednode
