#include "service/threads/heap.h"

#include <malloc.h>

#include <cstdlib>

namespace ringsync::service::threads {

HeapLimits keep_heap(std::string_view glibc_tunables, bool malloc_env) {
  if (malloc_env || glibc_tunables.find("glibc.malloc.") != std::string_view::npos)
    return HeapLimits::kFromEnvironment;
  // Setting either turns glibc's own adaptation off: both are set.
  const bool set = ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(kHeapBlockBytes)) == 1 &&
                   ::mallopt(M_TRIM_THRESHOLD, static_cast<int>(kKeptFreeBytes)) == 1;
  return set ? HeapLimits::kKept : HeapLimits::kUnavailable;
}

HeapLimits keep_heap() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const bool malloc_env = std::getenv("MALLOC_TRIM_THRESHOLD_") || std::getenv("MALLOC_MMAP_THRESHOLD_");
  return keep_heap(tunables ? tunables : "", malloc_env);
}

}  // namespace ringsync::service::threads
