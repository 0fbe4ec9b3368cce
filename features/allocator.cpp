#include "features/allocator.h"

#include <malloc.h>

namespace fednode {

bool reuse_large_allocations() {
  // Setting either threshold also stops glibc from moving them dynamically (mallopt(3)).
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapUpTo)) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(kKeepFreed)) == 1;
  return mmap_ok && trim_ok;
}

const char* reuse_large_allocations_tunables() {
  return "glibc.malloc.mmap_threshold=67108864:glibc.malloc.trim_threshold=134217728";
}

}  // namespace fednode
