// The checking toolkit of ringsync-test-rank (rank_main.cpp): failure
// counting, bounded waits, every rank's deterministic inputs, and one checked
// call of each collective (it knows every rank's input, so it knows the
// result). Globals, as a test program's: one rank per process.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "ringsync/ringsync.h"

namespace ringsync::test::rank {

extern int g_failures;
extern int g_rank;  // global rank and size once connected (on one node: the local ones)
extern int g_size;
// No wait outlives this ($RINGSYNC_TEST_DEADLINE_S after start, default 300 s).
extern std::chrono::steady_clock::time_point g_deadline;

#define EXPECT(cond, ...)                                                          \
  do {                                                                             \
    if (!(cond)) {                                                                 \
      ++::ringsync::test::rank::g_failures;                                        \
      std::fprintf(stderr, "rank %d: check failed: %s: ", ::ringsync::test::rank::g_rank, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                           \
      std::fprintf(stderr, "\n");                                                  \
    }                                                                              \
  } while (0)

void expect_ok(rs_status_t s, const char* what);

// Waits for a submitted request until g_deadline; a rank still waiting then
// exits with rank_exit::kStillWaiting rather than hang its test. Takes the
// request's address: `submitted` (the submit call) must run before the request
// pointer is read, and argument evaluation order is unspecified.
rs_status_t finish(rs_status_t submitted, rs_request_t** request_slot, const char* what);

// Writes rank r's deterministic input of `count` elements to `out` (see rank_checks.cpp).
void fill_input(std::byte* out, int rank, std::size_t count, DType dtype, ReduceOp op, std::uint32_t salt);

// At least `bytes` of memory that stays this slot's from one check to the
// next: a rank checks the same large sizes again and again, and under the
// sanitizers first touches of fresh pages (ASan maps every large block anew)
// were half of its time.
std::byte* scratch(std::size_t slot, std::size_t bytes);

// Buffers for one check: shared memory from the daemon, or plain heap memory
// (scratch slots); either filled with 0xA5 bytes, neither zero nor a result.
struct Buffers {
  rs_context_t* ctx;
  bool shared;
  std::vector<void*> owned;
  std::size_t heap_used = 0;
  void* get(std::size_t bytes);
  ~Buffers();
};

// One checked collective each, named after its arguments.
void check_allreduce(rs_context_t* ctx, bool shared, std::size_t count, DType dtype, ReduceOp op, bool in_place);
void check_broadcast(rs_context_t* ctx, bool shared, std::size_t count, int root);
void check_allgather(rs_context_t* ctx, bool shared, std::size_t count, bool in_place);
void check_reduce_scatter(rs_context_t* ctx, bool shared, std::size_t count, DType dtype, ReduceOp op);
void check_alltoall(rs_context_t* ctx, bool shared, std::size_t count);
void check_reduce(rs_context_t* ctx, bool shared, std::size_t count, DType dtype, ReduceOp op, int root);
void check_gather(rs_context_t* ctx, bool shared, std::size_t count, int root);
void check_scatter(rs_context_t* ctx, bool shared, std::size_t count, int root);

}  // namespace ringsync::test::rank
