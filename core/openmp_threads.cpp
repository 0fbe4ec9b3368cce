#include "core/openmp_threads.h"

#include <mutex>

#include <omp.h>

namespace fednode {
namespace {

// Read while the library loads, before any LibTorch call can have changed it.
const int kOpenMpDefault = omp_get_max_threads();

}  // namespace

int openmp_thread_default() { return kOpenMpDefault; }

void adopt_openmp_thread_default(void (*set_torch_threads)(int)) {
  static std::once_flag once;
  std::call_once(once, [set_torch_threads] {
    if (omp_get_max_threads() != kOpenMpDefault) return;  // someone has chosen already
    set_torch_threads(kOpenMpDefault);
  });
}

}  // namespace fednode
