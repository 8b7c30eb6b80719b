// ringsync-test-rank's checks (rank_checks.h).
#include "rank_checks.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>

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

// Rank r's deterministic input for a tensor: random bytes turned into values
// small enough that sums and products stay finite, and such that every partial
// sum or product is exact in the element type: a ring that rounds at each step
// (f16, bf16) then matches the one-shot reference bit for bit. Half types get
// k/8 with k in [-16, 16), so sums over up to 16 ranks are j/8 with |j| <= 256,
// exact in bf16's 8 significant bits; their products multiply 1s and 2s.
std::vector<std::byte> input(int rank, std::size_t count, ringsync::DType dtype,
                             ringsync::ReduceOp op, std::uint32_t salt) {
  using ringsync::DType;
  std::mt19937 rng(static_cast<std::uint32_t>(rank * 7919 + count * 31 + salt));
  std::vector<std::byte> out(count * ringsync::dtype_size(dtype));
  const bool prod = op == ringsync::ReduceOp::kProd;
  const bool half = dtype == DType::kF16 || dtype == DType::kBF16;
  for (std::size_t i = 0; i < count; ++i) {
    const int small = prod   ? static_cast<int>(rng() % (half ? 2 : 3)) + 1
                      : half ? static_cast<int>(rng() % 32) - 16
                             : static_cast<int>(rng() % 200) - 100;
    const float f = prod ? static_cast<float>(small) : static_cast<float>(small) / 8.0f;
    std::byte* p = out.data() + i * ringsync::dtype_size(dtype);
    switch (dtype) {
      case DType::kF32: std::memcpy(p, &f, 4); break;
      case DType::kF64: { double d = f; std::memcpy(p, &d, 8); break; }
      case DType::kF16:
      case DType::kBF16: {
        // Small multiples of 1/8 are exact in both types.
        const std::uint16_t h =
            dtype == DType::kBF16 ? ringsync::f32_to_bf16(f) : ringsync::f32_to_f16(f);
        std::memcpy(p, &h, 2);
        break;
      }
      case DType::kI32: { std::int32_t v = small; std::memcpy(p, &v, 4); break; }
      case DType::kI64: { std::int64_t v = small * 1000003LL; std::memcpy(p, &v, 8); break; }
      case DType::kU8: { std::uint8_t v = static_cast<std::uint8_t>(small); std::memcpy(p, &v, 1); break; }
    }
  }
  return out;
}

void* Buffers::get(std::size_t bytes) {
  if (!shared) {
    heap.emplace_back(std::max<std::size_t>(bytes, 1));
    return heap.back().data();
  }
  void* p = nullptr;
  expect_ok(rs_alloc(ctx, std::max<std::size_t>(bytes, 1), &p), "rs_alloc");
  owned.push_back(p);
  return p;
}

Buffers::~Buffers() {
  for (void* p : owned) rs_free(ctx, p);
}

void check_allreduce(rs_context_t* ctx, bool shared, std::size_t count, ringsync::DType dtype,
                     ringsync::ReduceOp op, bool in_place) {
  const std::size_t bytes = count * ringsync::dtype_size(dtype);
  std::vector<std::vector<std::byte>> all;
  std::vector<const void*> srcs;
  for (int r = 0; r < g_size; ++r) all.push_back(input(r, count, dtype, op, 1));
  for (auto& a : all) srcs.push_back(a.data());
  std::vector<std::byte> expected(bytes);
  ringsync::reduce::reduce_reference(expected.data(), srcs.data(), srcs.size(), count, dtype, op);

  Buffers mem{ctx, shared, {}, {}};
  void* send = mem.get(bytes);
  void* recv = in_place ? send : mem.get(bytes);
  if (bytes) std::memcpy(send, all[g_rank].data(), bytes);
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
  EXPECT(bytes == 0 || std::memcmp(recv, expected.data(), bytes) == 0, "%s: wrong result",
         name.c_str());
  EXPECT(in_place || bytes == 0 || std::memcmp(send, all[g_rank].data(), bytes) == 0, "%s: the input changed",
         name.c_str());
}

void check_broadcast(rs_context_t* ctx, bool shared, std::size_t count, int root) {
  const std::size_t bytes = count * 4;
  auto data = input(root, count, ringsync::DType::kI32, ringsync::ReduceOp::kSum, 2);
  Buffers mem{ctx, shared, {}, {}};
  void* recv = mem.get(bytes);
  if (g_rank == root && bytes) std::memcpy(recv, data.data(), bytes);
  const std::string name = "bc." + std::to_string(root) + "." + std::to_string(count);
  rs_request_t* req = nullptr;
  expect_ok(finish(rs_broadcast_async(ctx, name.c_str(), g_rank == root ? recv : nullptr, recv,
                                      count, RS_I32, root, &req), &req, name.c_str()),
            name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, data.data(), bytes) == 0, "%s: wrong data", name.c_str());
}

void check_allgather(rs_context_t* ctx, bool shared, std::size_t count, bool in_place) {
  const std::size_t bytes = count * 8;
  std::vector<std::byte> expected;
  for (int r = 0; r < g_size; ++r) {
    auto part = input(r, count, ringsync::DType::kF64, ringsync::ReduceOp::kSum, 3);
    expected.insert(expected.end(), part.begin(), part.end());
  }
  Buffers mem{ctx, shared, {}, {}};
  auto* recv = static_cast<std::byte*>(mem.get(bytes * g_size));
  std::byte* send = in_place ? recv + g_rank * bytes : static_cast<std::byte*>(mem.get(bytes));
  if (bytes) std::memcpy(send, expected.data() + g_rank * bytes, bytes);
  const std::string name = "ag." + std::to_string(count) + (in_place ? ".inplace" : "");
  rs_request_t* req = nullptr;
  expect_ok(finish(rs_allgather_async(ctx, name.c_str(), send, recv, count, RS_F64, &req), &req,
                   name.c_str()),
            name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, expected.data(), expected.size()) == 0, "%s: wrong data",
         name.c_str());
}

// Rank g's output is block g of every rank's input reduced; odd ranks run in
// place (their output is their own block of their input).
void check_reduce_scatter(rs_context_t* ctx, bool shared, std::size_t count, ringsync::DType dtype,
                          ringsync::ReduceOp op) {
  const std::size_t elem = ringsync::dtype_size(dtype);
  const std::size_t bytes = count * elem;
  std::vector<std::vector<std::byte>> all;
  std::vector<const void*> srcs;
  for (int r = 0; r < g_size; ++r) all.push_back(input(r, count * g_size, dtype, op, 4));
  for (auto& a : all) srcs.push_back(a.data() + g_rank * bytes);
  std::vector<std::byte> expected(bytes);
  ringsync::reduce::reduce_reference(expected.data(), srcs.data(), srcs.size(), count, dtype, op);

  const bool in_place = g_rank % 2 == 1;
  Buffers mem{ctx, shared, {}, {}};
  auto* send = static_cast<std::byte*>(mem.get(bytes * g_size));
  std::byte* recv = in_place ? send + g_rank * bytes : static_cast<std::byte*>(mem.get(bytes));
  if (bytes) std::memcpy(send, all[g_rank].data(), bytes * g_size);
  const std::string name = "rs." + std::string(ringsync::dtype_name(dtype)) + "." +
                           std::string(ringsync::reduce_op_name(op)) + "." + std::to_string(count) +
                           (shared ? ".shm" : ".heap");
  rs_request_t* req = nullptr;
  expect_ok(finish(rs_reduce_scatter_async(ctx, name.c_str(), send, recv, count, static_cast<rs_dtype_t>(dtype),
                                           static_cast<rs_op_t>(op), &req),
                   &req, name.c_str()),
            name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, expected.data(), bytes) == 0, "%s: wrong result", name.c_str());
}

// Block i of rank g's output is block g of rank i's input.
void check_alltoall(rs_context_t* ctx, bool shared, std::size_t count) {
  const std::size_t bytes = count * 4;
  std::vector<std::byte> expected;
  for (int r = 0; r < g_size; ++r) {
    auto theirs = input(r, count * g_size, ringsync::DType::kI32, ringsync::ReduceOp::kSum, 5);
    expected.insert(expected.end(), theirs.begin() + static_cast<std::ptrdiff_t>(g_rank * bytes),
                    theirs.begin() + static_cast<std::ptrdiff_t>((g_rank + 1) * bytes));
  }
  const auto mine = input(g_rank, count * g_size, ringsync::DType::kI32, ringsync::ReduceOp::kSum, 5);
  Buffers mem{ctx, shared, {}, {}};
  void* send = mem.get(bytes * g_size);
  void* recv = mem.get(bytes * g_size);
  if (bytes) std::memcpy(send, mine.data(), mine.size());
  const std::string name = "a2a." + std::to_string(count) + (shared ? ".shm" : ".heap");
  rs_request_t* req = nullptr;
  expect_ok(finish(rs_alltoall_async(ctx, name.c_str(), send, recv, count, RS_I32, &req), &req, name.c_str()),
            name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, expected.data(), expected.size()) == 0, "%s: wrong data",
         name.c_str());
  if (bytes == 0) return;
  // In place is refused at submission, with words that say so.
  const std::string again = name + ".inplace";
  req = nullptr;
  const rs_status_t refused = finish(rs_alltoall_async(ctx, again.c_str(), send, send, count, RS_I32, &req), &req,
                                     again.c_str());
  EXPECT(refused == RS_INVALID_ARGUMENT && std::strstr(rs_last_error(), "in place") != nullptr,
         "%s: %s: %s", again.c_str(), rs_status_string(refused), rs_last_error());
}

}  // namespace ringsync::test::rank
