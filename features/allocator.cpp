#include "features/allocator.h"

#include <malloc.h>

#include <climits>
#include <mutex>
#include <string>

namespace fednode {

namespace {

static_assert(kBatchHeapUpTo <= INT_MAX, "mallopt takes an int");

std::mutex policy_mutex;
bool policy_set = false;  // reuse_large_allocations() succeeded: the process opted in
int batch_scopes = 0;     // BatchAllocations alive; the last one to end restores the policy

bool set_policy(size_t heap_up_to, size_t keep_freed) {
  // Setting either threshold also stops glibc from moving them dynamically (mallopt(3)).
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(heap_up_to)) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(keep_freed)) == 1;
  return mmap_ok && trim_ok;
}

}  // namespace

bool reuse_large_allocations() {
  std::lock_guard<std::mutex> lock(policy_mutex);
  policy_set = set_policy(kHeapUpTo, kKeepFreed);
  return policy_set;
}

BatchAllocations::BatchAllocations() {
  std::lock_guard<std::mutex> lock(policy_mutex);
  if (!policy_set) return;
  if (batch_scopes++ == 0) set_policy(kBatchHeapUpTo, kBatchHeapUpTo);
  active_ = true;
}

BatchAllocations::~BatchAllocations() {
  if (!active_) return;
  std::lock_guard<std::mutex> lock(policy_mutex);
  if (--batch_scopes > 0) return;
  set_policy(kHeapUpTo, kKeepFreed);
  malloc_trim(0);
}

void release_freed_memory() { malloc_trim(0); }

const char* batch_allocations_tunables() {
  static const std::string text = "glibc.malloc.mmap_threshold=" + std::to_string(kBatchHeapUpTo) +
                                  ":glibc.malloc.trim_threshold=" + std::to_string(kBatchHeapUpTo);
  return text.c_str();
}

}  // namespace fednode
