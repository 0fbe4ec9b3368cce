// glibc's malloc policy for batch work. LibTorch allocates every layer's activations afresh for
// every batch; with glibc's defaults, buffers above the (dynamic) mmap threshold are mapped and
// unmapped each time, and a large share of extraction went into the page faults of fresh
// mappings: at 224 px, extraction ran 1.7x faster with the policy below (docs/performance.md).
#pragma once

#include <cstddef>

namespace fednode {

constexpr size_t kHeapUpTo = size_t{64} << 20;     // allocations up to this come from the heap
constexpr size_t kKeepFreed = size_t{128} << 20;   // freed heap memory kept for reuse

// Process-wide (mallopt), so the fednode executable calls it at start and the library never
// does: an application that embeds fednode keeps its own allocator policy. Returns false where
// glibc refuses (or is not the allocator).
bool reuse_large_allocations();

// The same policy as a GLIBC_TUNABLES value, for a child process (e.g. a Python reference).
const char* reuse_large_allocations_tunables();

}  // namespace fednode
