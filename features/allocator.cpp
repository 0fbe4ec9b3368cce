#include "features/allocator.h"

#include <malloc.h>

#include <atomic>
#include <climits>

namespace fednode {

namespace {

static_assert(kBatchHeapUpTo <= INT_MAX, "mallopt takes an int");

std::atomic<bool> policy_set{false};

bool set_policy(size_t heap_up_to, size_t keep_freed) {
  // Setting either threshold also stops glibc from moving them dynamically (mallopt(3)).
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(heap_up_to)) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(keep_freed)) == 1;
  return mmap_ok && trim_ok;
}

}  // namespace

bool reuse_large_allocations() {
  const bool ok = set_policy(kHeapUpTo, kKeepFreed);
  policy_set = ok;
  return ok;
}

BatchAllocations::BatchAllocations() {
  if (policy_set) active_ = set_policy(kBatchHeapUpTo, kBatchHeapUpTo);
}

BatchAllocations::~BatchAllocations() {
  if (!active_) return;
  set_policy(kHeapUpTo, kKeepFreed);
  malloc_trim(0);
}

const char* batch_allocations_tunables() {
  return "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=1073741824";
}

}  // namespace fednode
