// The executable's malloc policy: where glibc serves a buffer larger than the process-wide
// threshold, inside and outside BatchAllocations, and whether the memory kept is given back.
#include "features/allocator.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace fednode {
namespace {

size_t mapped_bytes() { return mallinfo2().hblkhd; }  // served by mmap
size_t heap_bytes() { return mallinfo2().arena; }     // the main arena, from brk

// Allocates, touches and frees one buffer; the volatile sink keeps the compiler from eliding the
// malloc/free pair. Returns how much mmap-served memory grew while it was held.
size_t mapped_growth_of_one_buffer(size_t bytes) {
  const size_t before = mapped_bytes();
  char* p = static_cast<char*>(std::malloc(bytes));
  if (p == nullptr) ADD_FAILURE() << "malloc(" << bytes << ") failed";
  if (p == nullptr) return 0;
  std::memset(p, 1, 4096);
  static volatile char sink;
  sink = p[4095];
  const size_t growth = mapped_bytes() - before;
  std::free(p);
  return growth;
}

TEST(BatchAllocations, ServesActivationSizedBuffersFromTheHeapAndGivesTheMemoryBack) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "the sanitizer replaces glibc's malloc";
#endif
  ASSERT_TRUE(reuse_large_allocations()) << "glibc refused the process-wide policy";
  constexpr size_t activation = size_t{160} << 20;  // MobileNetV2's largest at 224 px, batch 32
  static_assert(activation > kHeapUpTo && activation > kKeepFreed, "above the process-wide policy");

  EXPECT_GE(mapped_growth_of_one_buffer(activation), activation) << "outside the scope: mapped";

  size_t kept = 0;
  {
    BatchAllocations scope;
    EXPECT_EQ(mapped_growth_of_one_buffer(activation), 0u) << "inside the scope: from the heap";
    kept = heap_bytes();
    EXPECT_GE(kept, activation) << "freed, but kept for the next batch";
  }
  EXPECT_LT(heap_bytes(), kept - activation / 2) << "handed back when the scope ends";
  EXPECT_GE(mapped_growth_of_one_buffer(activation), activation) << "the process-wide policy is back";

  {
    BatchAllocations outer;
    { BatchAllocations inner; }
    EXPECT_EQ(mapped_growth_of_one_buffer(activation), 0u) << "an inner scope's end keeps the outer one's policy";
  }
  EXPECT_GE(mapped_growth_of_one_buffer(activation), activation) << "the last scope's end restores it";
}

}  // namespace
}  // namespace fednode
