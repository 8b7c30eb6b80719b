// The daemon's heap limits (service/threads/heap.h): an operator's malloc
// settings win; set, blocks up to kHeapBlockBytes come from the heap and its
// free top stays mapped. The behaviour is checked through mallinfo2 against
// glibc's own defaults first, so the check can tell the two apart.
#include <doctest/doctest.h>

#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "service/threads/heap.h"

using namespace ringsync::service::threads;

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
  // glibc's defaults, fixed: a 1 MiB block is mmapped, and freeing it hands it back.
  REQUIRE(::mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1);
  REQUIRE(::mallopt(M_TRIM_THRESHOLD, 128 * 1024) == 1);
  const std::size_t mapped_before = ::mallinfo2().hblks;
  void* block = std::malloc(std::size_t{1} << 20);
  REQUIRE(block != nullptr);
  CHECK(::mallinfo2().hblks == mapped_before + 1);
  std::free(block);

  REQUIRE(keep_heap("", false) == HeapLimits::kKept);
  // 16 blocks of 1 MiB, each touched: from the heap, none mmapped.
  std::vector<void*> blocks;
  for (int i = 0; i < 16; ++i) {
    blocks.push_back(std::malloc(std::size_t{1} << 20));
    REQUIRE(blocks.back() != nullptr);
    std::memset(blocks.back(), i, std::size_t{1} << 20);
  }
  CHECK(::mallinfo2().hblks == mapped_before);
  const std::size_t heap_grown = ::mallinfo2().arena;
  CHECK(heap_grown >= std::size_t{16} << 20);
  // Freed, the 16 MiB stay mapped (below kKeptFreeBytes): the next ones need no new pages.
  for (void* b : blocks) std::free(b);
  CHECK(::mallinfo2().arena == heap_grown);
  CHECK(::mallinfo2().fordblks >= std::size_t{16} << 20);
  // A block past kHeapBlockBytes is still mmapped, and returned whole.
  void* big = std::malloc(kHeapBlockBytes + 4096);
  REQUIRE(big != nullptr);
  CHECK(::mallinfo2().hblks == mapped_before + 1);
  std::free(big);
  CHECK(::mallinfo2().hblks == mapped_before);
}
