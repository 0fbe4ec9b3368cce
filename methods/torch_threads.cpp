#include "methods/torch_threads.h"

#include <ATen/Parallel.h>

#include <mutex>

#include <omp.h>

namespace fednode {
namespace {

// Read while the library loads, before any LibTorch call can have changed it.
const int kOpenMpDefault = omp_get_max_threads();

}  // namespace

int openmp_thread_default() { return kOpenMpDefault; }

void adopt_openmp_thread_default() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (omp_get_max_threads() != kOpenMpDefault) return;  // someone has chosen already
    at::set_num_threads(kOpenMpDefault);
  });
}

}  // namespace fednode
