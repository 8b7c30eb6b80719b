// How the daemon's heap hands memory back to the kernel. glibc by default
// returns the top of the heap (brk) as soon as 128 KiB of it is free, and
// mmaps every block from 128 KiB up (raising both limits only after such a
// block is freed). A daemon that moves mid-size frames and buffers every few
// hundred microseconds then shrinks and regrows its heap on every collective:
// each shrink is a TLB shootdown across every CPU the process ran on, each
// regrow a page fault per page touched — measured on a 32 KiB allreduce, a
// quarter of the daemon's time (docs/benchmarks.md, "Changes that mattered").
// keep_heap() fixes the limits at what glibc's own adaptation reaches after a
// 32 MiB block: blocks up to kHeapBlockBytes come from the heap, and up to
// kKeptFreeBytes of free heap stay mapped. Larger buffers are mmapped and
// returned whole, as before.
#pragma once

#include <cstddef>
#include <string_view>

namespace ringsync::service::threads {

inline constexpr std::size_t kHeapBlockBytes = std::size_t{32} << 20;
inline constexpr std::size_t kKeptFreeBytes = std::size_t{64} << 20;

enum class HeapLimits {
  kKept,             // set as above
  kFromEnvironment,  // the operator set malloc's own: left as they are
  kUnavailable,      // this malloc ignores mallopt (a sanitizer's, say)
};

// Sets the limits (glibc mallopt) unless the environment sets malloc's own
// (GLIBC_TUNABLES with glibc.malloc.*, MALLOC_TRIM_THRESHOLD_ or
// MALLOC_MMAP_THRESHOLD_): an operator's choice wins. `glibc_tunables` is that
// variable's value ("" when unset), `malloc_env` whether either MALLOC_ is set.
HeapLimits keep_heap(std::string_view glibc_tunables, bool malloc_env);

// The same, reading the process environment.
HeapLimits keep_heap();

}  // namespace ringsync::service::threads
