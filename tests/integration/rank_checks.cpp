// ringsync-test-rank's checks (rank_checks.h).
#include "rank_checks.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cluster_fixture.h"
#include "common/half.h"
#include "common/reduce.h"

namespace ringsync::test::rank {

int g_failures = 0;
int g_rank = 0;
int g_size = 1;
std::chrono::steady_clock::time_point g_deadline;

void expect_ok(rs_status_t s, const char* what) {
  EXPECT(s == RS_SUCCESS, "%s: %s: %s", what, rs_status_string(s), rs_last_error());
}

// Waits for a submitted request until the scenario's deadline; a rank still
// waiting then gives up with kStillWaiting rather than hang its test.
// Takes the request's address: `submitted` (the submit call) must run before the
// request pointer is read, and argument evaluation order is unspecified.
rs_status_t finish(rs_status_t submitted, rs_request_t** request_slot, const char* what) {
  if (submitted != RS_SUCCESS) return submitted;
  rs_request_t* request = *request_slot;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      g_deadline - std::chrono::steady_clock::now());
  const int ms = static_cast<int>(std::max<long long>(left.count(), 1));
  const rs_status_t s = rs_wait_timeout(request, ms);
  if (s == RS_IN_PROGRESS) {
    std::fprintf(stderr, "rank %d: %s still pending at the deadline\n", g_rank, what);
    std::exit(rank_exit::kStillWaiting);
  }
  return s;
}

namespace {

// SplitMix64 of element i of the stream `seed`: every element is drawn on its
// own, with no generator state to step through (under the sanitizers a
// std::mt19937 stepped per element was most of a rank's time).
std::uint64_t draw(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed + (i + 1) * 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

}  // namespace

// Rank r's deterministic input for a tensor: random bytes turned into values
// small enough that sums and products stay finite, and such that every partial
// sum or product is exact in the element type: a ring that rounds at each step
// (f16, bf16) then matches the one-shot reference bit for bit. Half types get
// k/8 with k in [-16, 16), so sums over up to 16 ranks are j/8 with |j| <= 256,
// exact in bf16's 8 significant bits; their products multiply 1s and 2s.
void fill_input(std::byte* out, int rank, std::size_t count, ringsync::DType dtype, ringsync::ReduceOp op,
                std::uint32_t salt) {
  using ringsync::DType;
  const std::uint64_t seed = draw(static_cast<std::uint64_t>(rank) * 7919 + count * 31 + salt, 0);
  const bool prod = op == ringsync::ReduceOp::kProd;
  const bool half = dtype == DType::kF16 || dtype == DType::kBF16;
  const std::uint64_t range = prod ? (half ? 2 : 3) : half ? 32 : 200;
  const int lowest = prod ? 1 : half ? -16 : -100;
  const auto small = [&](std::size_t i) { return static_cast<int>(draw(seed, i) % range) + lowest; };
  const auto real = [prod](int k) { return prod ? static_cast<float>(k) : static_cast<float>(k) / 8.0f; };
  // One loop per element type, each value written as that type.
  const auto fill = [&](auto value_of) {
    for (std::size_t i = 0; i < count; ++i) {
      const auto v = value_of(small(i));
      std::memcpy(out + i * sizeof(v), &v, sizeof(v));
    }
  };
  switch (dtype) {
    case DType::kF32: fill(real); break;
    case DType::kF64: fill([&](int k) { return static_cast<double>(real(k)); }); break;
    // Small multiples of 1/8 are exact in both half types.
    case DType::kF16: fill([&](int k) { return ringsync::f32_to_f16(real(k)); }); break;
    case DType::kBF16: fill([&](int k) { return ringsync::f32_to_bf16(real(k)); }); break;
    case DType::kI32: fill([](int k) { return static_cast<std::int32_t>(k); }); break;
    case DType::kI64: fill([](int k) { return static_cast<std::int64_t>(k * 1000003LL); }); break;
    case DType::kU8: fill([](int k) { return static_cast<std::uint8_t>(k); }); break;
  }
}

std::byte* scratch(std::size_t slot, std::size_t bytes) {
  static std::vector<std::vector<std::byte>> slots;
  if (slots.size() <= slot) slots.resize(slot + 1);
  if (slots[slot].size() < bytes) slots[slot].resize(bytes);
  return slots[slot].data();
}

namespace {

// The scratch slots of one check: every rank's input has its own (up to 4096 ranks).
enum Slot : std::size_t { kExpected, kMine, kInputs, kHeap = kInputs + 4096 };

// Rank r's input in its own slot.
const std::byte* input_of(int rank, std::size_t count, ringsync::DType dtype, ringsync::ReduceOp op,
                          std::uint32_t salt, std::size_t slot) {
  std::byte* out = scratch(slot, count * ringsync::dtype_size(dtype));
  fill_input(out, rank, count, dtype, op, salt);
  return out;
}

}  // namespace

void* Buffers::get(std::size_t bytes) {
  void* p = nullptr;
  if (shared) {
    expect_ok(rs_alloc(ctx, std::max<std::size_t>(bytes, 1), &p), "rs_alloc");
    owned.push_back(p);
  } else {
    p = scratch(kHeap + heap_used++, std::max<std::size_t>(bytes, 1));
  }
  // Not zero, not the last check's result: only a collective that writes its
  // output passes.
  if (p != nullptr) std::memset(p, 0xA5, bytes);
  return p;
}

Buffers::~Buffers() {
  for (void* p : owned) rs_free(ctx, p);
}

void check_allreduce(rs_context_t* ctx, bool shared, std::size_t count, ringsync::DType dtype,
                     ringsync::ReduceOp op, bool in_place) {
  const std::size_t bytes = count * ringsync::dtype_size(dtype);
  std::vector<const void*> srcs;
  for (int r = 0; r < g_size; ++r) srcs.push_back(input_of(r, count, dtype, op, 1, kInputs + r));
  std::byte* expected = scratch(kExpected, bytes);
  ringsync::reduce::reduce_reference(expected, srcs.data(), srcs.size(), count, dtype, op);
  const std::byte* mine = static_cast<const std::byte*>(srcs[g_rank]);

  Buffers mem{ctx, shared, {}, {}};
  void* send = mem.get(bytes);
  void* recv = in_place ? send : mem.get(bytes);
  if (bytes) std::memcpy(send, mine, bytes);
  const std::string name = "ar." + std::string(ringsync::dtype_name(dtype)) + "." +
                           std::string(ringsync::reduce_op_name(op)) + "." +
                           std::to_string(count) + (in_place ? ".inplace" : "") +
                           (shared ? ".shm" : ".heap");
  rs_request_t* req = nullptr;
  rs_status_t s = finish(rs_allreduce_async(ctx, name.c_str(), send, recv, count,
                                            static_cast<rs_dtype_t>(dtype),
                                            static_cast<rs_op_t>(op), &req),
                         &req, name.c_str());
  expect_ok(s, name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, expected, bytes) == 0, "%s: wrong result", name.c_str());
  EXPECT(in_place || bytes == 0 || std::memcmp(send, mine, bytes) == 0, "%s: the input changed",
         name.c_str());
}

void check_broadcast(rs_context_t* ctx, bool shared, std::size_t count, int root) {
  const std::size_t bytes = count * 4;
  const std::byte* data = input_of(root, count, ringsync::DType::kI32, ringsync::ReduceOp::kSum, 2, kMine);
  Buffers mem{ctx, shared, {}, {}};
  void* recv = mem.get(bytes);
  if (g_rank == root && bytes) std::memcpy(recv, data, bytes);
  const std::string name = "bc." + std::to_string(root) + "." + std::to_string(count);
  rs_request_t* req = nullptr;
  expect_ok(finish(rs_broadcast_async(ctx, name.c_str(), g_rank == root ? recv : nullptr, recv,
                                      count, RS_I32, root, &req), &req, name.c_str()),
            name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, data, bytes) == 0, "%s: wrong data", name.c_str());
}

void check_allgather(rs_context_t* ctx, bool shared, std::size_t count, bool in_place) {
  const std::size_t bytes = count * 8;
  std::byte* expected = scratch(kExpected, bytes * g_size);
  for (int r = 0; r < g_size; ++r)
    fill_input(expected + r * bytes, r, count, ringsync::DType::kF64, ringsync::ReduceOp::kSum, 3);
  Buffers mem{ctx, shared, {}, {}};
  auto* recv = static_cast<std::byte*>(mem.get(bytes * g_size));
  std::byte* send = in_place ? recv + g_rank * bytes : static_cast<std::byte*>(mem.get(bytes));
  if (bytes) std::memcpy(send, expected + g_rank * bytes, bytes);
  const std::string name = "ag." + std::to_string(count) + (in_place ? ".inplace" : "");
  rs_request_t* req = nullptr;
  expect_ok(finish(rs_allgather_async(ctx, name.c_str(), send, recv, count, RS_F64, &req), &req,
                   name.c_str()),
            name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, expected, bytes * g_size) == 0, "%s: wrong data", name.c_str());
}

// Rank g's output is block g of every rank's input reduced; odd ranks run in
// place (their output is their own block of their input).
void check_reduce_scatter(rs_context_t* ctx, bool shared, std::size_t count, ringsync::DType dtype,
                          ringsync::ReduceOp op) {
  const std::size_t elem = ringsync::dtype_size(dtype);
  const std::size_t bytes = count * elem;
  std::vector<const void*> srcs;
  const std::byte* mine = nullptr;
  for (int r = 0; r < g_size; ++r) {
    const std::byte* all = input_of(r, count * g_size, dtype, op, 4, kInputs + r);
    if (r == g_rank) mine = all;
    srcs.push_back(all + g_rank * bytes);
  }
  std::byte* expected = scratch(kExpected, bytes);
  ringsync::reduce::reduce_reference(expected, srcs.data(), srcs.size(), count, dtype, op);

  const bool in_place = g_rank % 2 == 1;
  Buffers mem{ctx, shared, {}, {}};
  auto* send = static_cast<std::byte*>(mem.get(bytes * g_size));
  std::byte* recv = in_place ? send + g_rank * bytes : static_cast<std::byte*>(mem.get(bytes));
  if (bytes) std::memcpy(send, mine, bytes * g_size);
  const std::string name = "rs." + std::string(ringsync::dtype_name(dtype)) + "." +
                           std::string(ringsync::reduce_op_name(op)) + "." + std::to_string(count) +
                           (shared ? ".shm" : ".heap");
  rs_request_t* req = nullptr;
  expect_ok(finish(rs_reduce_scatter_async(ctx, name.c_str(), send, recv, count, static_cast<rs_dtype_t>(dtype),
                                           static_cast<rs_op_t>(op), &req),
                   &req, name.c_str()),
            name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, expected, bytes) == 0, "%s: wrong result", name.c_str());
}

// Block i of rank g's output is block g of rank i's input.
void check_alltoall(rs_context_t* ctx, bool shared, std::size_t count) {
  const std::size_t bytes = count * 4;
  std::byte* expected = scratch(kExpected, bytes * g_size);
  for (int r = 0; r < g_size; ++r) {
    const std::byte* theirs = input_of(r, count * g_size, ringsync::DType::kI32, ringsync::ReduceOp::kSum, 5, kInputs);
    if (bytes) std::memcpy(expected + r * bytes, theirs + g_rank * bytes, bytes);
  }
  const std::byte* mine =
      input_of(g_rank, count * g_size, ringsync::DType::kI32, ringsync::ReduceOp::kSum, 5, kMine);
  Buffers mem{ctx, shared, {}, {}};
  void* send = mem.get(bytes * g_size);
  void* recv = mem.get(bytes * g_size);
  if (bytes) std::memcpy(send, mine, bytes * g_size);
  const std::string name = "a2a." + std::to_string(count) + (shared ? ".shm" : ".heap");
  rs_request_t* req = nullptr;
  expect_ok(finish(rs_alltoall_async(ctx, name.c_str(), send, recv, count, RS_I32, &req), &req, name.c_str()),
            name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, expected, bytes * g_size) == 0, "%s: wrong data", name.c_str());
  if (bytes == 0) return;
  // In place is refused at submission, with words that say so.
  const std::string again = name + ".inplace";
  req = nullptr;
  const rs_status_t refused = finish(rs_alltoall_async(ctx, again.c_str(), send, send, count, RS_I32, &req), &req,
                                     again.c_str());
  EXPECT(refused == RS_INVALID_ARGUMENT && std::strstr(rs_last_error(), "in place") != nullptr,
         "%s: %s: %s", again.c_str(), rs_status_string(refused), rs_last_error());
}

// Root's output is op over every rank's input; the others pass no output.
void check_reduce(rs_context_t* ctx, bool shared, std::size_t count, ringsync::DType dtype, ringsync::ReduceOp op,
                  int root) {
  const std::size_t bytes = count * ringsync::dtype_size(dtype);
  std::vector<const void*> srcs;
  for (int r = 0; r < g_size; ++r) srcs.push_back(input_of(r, count, dtype, op, 6, kInputs + r));
  std::byte* expected = scratch(kExpected, bytes);
  ringsync::reduce::reduce_reference(expected, srcs.data(), srcs.size(), count, dtype, op);
  const bool is_root = g_rank == root;
  const bool in_place = is_root && count % 2 == 1;
  Buffers mem{ctx, shared, {}, {}};
  void* send = mem.get(bytes);
  void* recv = !is_root ? nullptr : in_place ? send : mem.get(bytes);
  if (bytes) std::memcpy(send, srcs[g_rank], bytes);
  const std::string name = "reduce." + std::string(ringsync::dtype_name(dtype)) + "." +
                           std::string(ringsync::reduce_op_name(op)) + "." + std::to_string(count) + ".root" +
                           std::to_string(root) + (shared ? ".shm" : ".heap");
  rs_request_t* req = nullptr;
  expect_ok(finish(rs_reduce_async(ctx, name.c_str(), send, recv, count, static_cast<rs_dtype_t>(dtype),
                                   static_cast<rs_op_t>(op), root, &req),
                   &req, name.c_str()),
            name.c_str());
  EXPECT(!is_root || bytes == 0 || std::memcmp(recv, expected, bytes) == 0, "%s: wrong result", name.c_str());
  EXPECT(in_place || bytes == 0 || std::memcmp(send, srcs[g_rank], bytes) == 0, "%s: the input changed",
         name.c_str());
}

// Root's output holds every rank's input by rank; the others pass no output.
void check_gather(rs_context_t* ctx, bool shared, std::size_t count, int root) {
  const std::size_t bytes = count * 8;
  std::byte* expected = scratch(kExpected, bytes * g_size);
  for (int r = 0; r < g_size; ++r)
    fill_input(expected + r * bytes, r, count, ringsync::DType::kF64, ringsync::ReduceOp::kSum, 7);
  const bool is_root = g_rank == root;
  const bool in_place = is_root && count % 2 == 1;
  Buffers mem{ctx, shared, {}, {}};
  auto* recv = is_root ? static_cast<std::byte*>(mem.get(bytes * g_size)) : nullptr;
  std::byte* send = in_place ? recv + g_rank * bytes : static_cast<std::byte*>(mem.get(bytes));
  if (bytes) std::memcpy(send, expected + g_rank * bytes, bytes);
  const std::string name = "gather." + std::to_string(count) + ".root" + std::to_string(root) +
                           (shared ? ".shm" : ".heap");
  rs_request_t* req = nullptr;
  expect_ok(finish(rs_gather_async(ctx, name.c_str(), send, recv, count, RS_F64, root, &req), &req, name.c_str()),
            name.c_str());
  EXPECT(!is_root || bytes == 0 || std::memcmp(recv, expected, bytes * g_size) == 0, "%s: wrong data",
         name.c_str());
}

// Rank g's output is block g of root's input; only root passes an input.
void check_scatter(rs_context_t* ctx, bool shared, std::size_t count, int root) {
  const std::size_t bytes = count * 4;
  const std::byte* all =
      input_of(root, count * g_size, ringsync::DType::kI32, ringsync::ReduceOp::kSum, 8, kMine);
  const bool is_root = g_rank == root;
  const bool in_place = is_root && count % 2 == 1;  // root's output is its own block of its input
  Buffers mem{ctx, shared, {}, {}};
  auto* send = is_root ? static_cast<std::byte*>(mem.get(bytes * g_size)) : nullptr;
  if (send && bytes) std::memcpy(send, all, bytes * g_size);
  std::byte* recv = in_place ? send + g_rank * bytes : static_cast<std::byte*>(mem.get(bytes));
  const std::string name = "scatter." + std::to_string(count) + ".root" + std::to_string(root) +
                           (shared ? ".shm" : ".heap");
  rs_request_t* req = nullptr;
  expect_ok(finish(rs_scatter_async(ctx, name.c_str(), send, recv, count, RS_I32, root, &req), &req, name.c_str()),
            name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, all + g_rank * bytes, bytes) == 0, "%s: wrong data", name.c_str());
  EXPECT(!is_root || bytes == 0 || std::memcmp(send, all, bytes * g_size) == 0, "%s: root's input changed",
         name.c_str());
}

}  // namespace ringsync::test::rank
