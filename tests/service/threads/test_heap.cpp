// The daemon's heap limits (service/threads/heap.h): an operator's malloc
// settings win; set, blocks up to kHeapBlockBytes come from the heap and its
// free top stays mapped. The behaviour is checked through mallinfo2 against
// glibc's own defaults first, so the check can tell the two apart; the block
// is larger than everything already free in this process's heap, so malloc
// must fetch new memory for it either way.
#include <doctest/doctest.h>

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "service/threads/heap.h"

namespace test_service_threads_heap {

using namespace ringsync::service::threads;

namespace {

// Allocates and touches `bytes`; the compiler may not drop the allocation.
void* take(std::size_t bytes) {
  void* p = std::malloc(bytes);
  REQUIRE(p != nullptr);
  std::memset(p, 1, bytes);
  asm volatile("" : : "r"(p) : "memory");
  return p;
}

}  // namespace

TEST_CASE("heap: malloc settings from the environment are left alone") {
  CHECK(keep_heap("glibc.malloc.trim_threshold=131072", false) == HeapLimits::kFromEnvironment);
  CHECK(keep_heap("glibc.rtld.nns=2:glibc.malloc.mmap_threshold=1", false) == HeapLimits::kFromEnvironment);
  CHECK(keep_heap("", true) == HeapLimits::kFromEnvironment);
}

TEST_CASE("heap: kept, mid-size blocks come from the heap and freed heap stays mapped") {
  const HeapLimits limits = keep_heap("glibc.rtld.nns=2", false);  // other tunables do not count
  if (limits == HeapLimits::kUnavailable) {
    MESSAGE("this malloc ignores mallopt (a sanitizer build): nothing to check");
    return;
  }
  REQUIRE(limits == HeapLimits::kKept);
  const struct mallinfo2 at_start = ::mallinfo2();
  const std::size_t free_bytes = at_start.fordblks + at_start.fsmblks;
  const std::size_t block = std::max<std::size_t>(std::size_t{1} << 20, (free_bytes | 0xFFFFF) + 1);
  if (block > kHeapBlockBytes / 2) {
    MESSAGE("this process has ", free_bytes, " bytes free in its heap already: nothing to check");
    return;
  }

  // glibc's defaults, fixed: the block is mmapped, and freeing it hands it back.
  REQUIRE(::mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1);
  REQUIRE(::mallopt(M_TRIM_THRESHOLD, 128 * 1024) == 1);
  const std::size_t mapped_before = ::mallinfo2().hblks;
  void* p = take(block);
  CHECK(::mallinfo2().hblks == mapped_before + 1);
  std::free(p);
  CHECK(::mallinfo2().hblks == mapped_before);

  // Kept: the same block grows the heap instead, and stays mapped once freed.
  REQUIRE(keep_heap("", false) == HeapLimits::kKept);
  const std::size_t heap_before = ::mallinfo2().arena;
  p = take(block);
  CHECK(::mallinfo2().hblks == mapped_before);
  const std::size_t heap_grown = ::mallinfo2().arena;
  CHECK(heap_grown > heap_before);
  std::free(p);
  CHECK(::mallinfo2().arena == heap_grown);
  CHECK(::mallinfo2().fordblks >= block);

  // A block past kHeapBlockBytes is still mmapped, and returned whole.
  void* big = take(kHeapBlockBytes + 4096);
  CHECK(::mallinfo2().hblks == mapped_before + 1);
  std::free(big);
  CHECK(::mallinfo2().hblks == mapped_before);
}

}  // namespace test_service_threads_heap
