// glibc's malloc policy for batch work. LibTorch allocates every layer's activations afresh for
// every batch; with glibc's defaults, buffers above the (dynamic) mmap threshold are mapped and
// unmapped each time, and a large share of extraction went into the page faults of fresh
// mappings (docs/performance.md).
#pragma once

#include <cstddef>

namespace fednode {

constexpr size_t kHeapUpTo = size_t{64} << 20;     // allocations up to this come from the heap
constexpr size_t kKeepFreed = size_t{128} << 20;   // freed heap memory kept for reuse
constexpr size_t kBatchHeapUpTo = size_t{1} << 30; // both, while a BatchAllocations is alive

// Process-wide (mallopt), so the fednode executable calls it at start and the library never
// does: an application that embeds fednode keeps its own allocator policy. Returns false where
// glibc refuses (or is not the allocator).
bool reuse_large_allocations();

// Hands the heap memory freed so far back to the system (malloc_trim). The process-wide policy
// keeps up to kKeepFreed of it for reuse, which is right for batch work and wrong for a node that
// has loaded its data and will now wait (a FedCGS leaf on 6 000 images: 73 -> 65 MiB of heap,
// Pss 117 -> 107 MiB).
void release_freed_memory();

// While alive, and only in a process that called reuse_large_allocations(), the heap also serves
// and keeps buffers up to kBatchHeapUpTo: MobileNetV2 at 224 px and batch 32 has activations of
// 154 MB, which the process-wide policy still maps and unmaps every batch (1.3-1.6x slower
// extraction). On destruction the process-wide policy is restored and the memory kept meanwhile
// is handed back to the system, so that a node does not hold its extraction peak while it runs.
// Scopes may overlap (nested, or on several threads): the last one to end restores the policy.
class BatchAllocations {
 public:
  BatchAllocations();
  ~BatchAllocations();
  BatchAllocations(const BatchAllocations&) = delete;
  BatchAllocations& operator=(const BatchAllocations&) = delete;

 private:
  bool active_ = false;
};

// BatchAllocations' policy as a GLIBC_TUNABLES value, for a child process (e.g. a Python
// reference that is to extract under the same policy).
const char* batch_allocations_tunables();

}  // namespace fednode
