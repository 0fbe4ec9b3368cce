// OpenBLAS keeps its own pool of threads, one per core by default, that ignores OpenMP's and
// LibTorch's thread settings and spins (sched_yield) between calls. Code that already runs on
// several threads -- the EM passes on the library's pool, LibTorch's intra-op OpenMP team while
// a head trains -- would otherwise run two pools on the same cores, each taking them from the
// other: on 2 cores that made FedTC's adapter training 3x slower (docs/performance.md).
#pragma once

namespace fednode {

// While alive, OpenBLAS runs single-threaded. Reference-counted across threads, so that
// overlapping users restore the previous setting only when the last one ends.
class BlasSingleThread {
 public:
  BlasSingleThread();
  ~BlasSingleThread();
  BlasSingleThread(const BlasSingleThread&) = delete;
  BlasSingleThread& operator=(const BlasSingleThread&) = delete;
};

}  // namespace fednode
