// ringsync-test-rank: one trainer rank for the integration tests, driven by a
// scenario name. Rank, size, socket and job come from the environment, as for
// any trainer. Exit code 0 means every check passed; failures are printed.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/dtype.h"
#include "common/half.h"
#include "common/reduce.h"
#include "ringsync/ringsync.h"

namespace {

int g_failures = 0;
int g_rank = 0;
int g_size = 1;

#define EXPECT(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      ++g_failures;                                                \
      std::fprintf(stderr, "rank %d: check failed: %s: ", g_rank, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                           \
      std::fprintf(stderr, "\n");                                  \
    }                                                              \
  } while (0)

void expect_ok(rs_status_t s, const char* what) {
  EXPECT(s == RS_SUCCESS, "%s: %s: %s", what, rs_status_string(s), rs_last_error());
}

// Touches RINGSYNC_TEST_MARK_DIR/<name>.<rank> so the test knows where we are.
void mark(const char* name) {
  const char* dir = std::getenv("RINGSYNC_TEST_MARK_DIR");
  if (!dir) return;
  const std::string path = std::string(dir) + "/" + name + "." + std::to_string(g_rank);
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
}

// Rank r's deterministic input for a tensor: random bytes turned into values
// small enough that sums and products stay finite.
std::vector<std::byte> input(int rank, std::size_t count, ringsync::DType dtype,
                             ringsync::ReduceOp op, std::uint32_t salt) {
  using ringsync::DType;
  std::mt19937 rng(static_cast<std::uint32_t>(rank * 7919 + count * 31 + salt));
  std::vector<std::byte> out(count * ringsync::dtype_size(dtype));
  const bool prod = op == ringsync::ReduceOp::kProd;
  for (std::size_t i = 0; i < count; ++i) {
    const int small = prod ? static_cast<int>(rng() % 3) + 1 : static_cast<int>(rng() % 200) - 100;
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

struct Buffers {
  rs_context_t* ctx;
  bool shared;
  std::vector<void*> owned;
  std::vector<std::vector<std::byte>> heap;
  void* get(std::size_t bytes) {
    if (!shared) {
      heap.emplace_back(std::max<std::size_t>(bytes, 1));
      return heap.back().data();
    }
    void* p = nullptr;
    expect_ok(rs_alloc(ctx, std::max<std::size_t>(bytes, 1), &p), "rs_alloc");
    owned.push_back(p);
    return p;
  }
  ~Buffers() {
    for (void* p : owned) rs_free(ctx, p);
  }
};

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
  rs_status_t s = rs_allreduce(ctx, name.c_str(), send, recv, count,
                               static_cast<rs_dtype_t>(dtype), static_cast<rs_op_t>(op));
  expect_ok(s, name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, expected.data(), bytes) == 0, "%s: wrong result",
         name.c_str());
}

void check_broadcast(rs_context_t* ctx, bool shared, std::size_t count, int root) {
  const std::size_t bytes = count * 4;
  auto data = input(root, count, ringsync::DType::kI32, ringsync::ReduceOp::kSum, 2);
  Buffers mem{ctx, shared, {}, {}};
  void* recv = mem.get(bytes);
  if (g_rank == root && bytes) std::memcpy(recv, data.data(), bytes);
  const std::string name = "bc." + std::to_string(root) + "." + std::to_string(count);
  expect_ok(rs_broadcast(ctx, name.c_str(), g_rank == root ? recv : nullptr, recv, count, RS_I32,
                         root),
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
  expect_ok(rs_allgather(ctx, name.c_str(), send, recv, count, RS_F64), name.c_str());
  EXPECT(bytes == 0 || std::memcmp(recv, expected.data(), expected.size()) == 0, "%s: wrong data",
         name.c_str());
}

rs_context_t* connect_or_die() {
  rs_config_t cfg;
  rs_config_init(&cfg);
  rs_context_t* ctx = nullptr;
  rs_status_t s = rs_connect(&cfg, &ctx);
  if (s != RS_SUCCESS) {
    std::fprintf(stderr, "rank %d: connect failed: %s: %s\n", g_rank, rs_status_string(s),
                 rs_last_error());
    std::exit(3);
  }
  return ctx;
}

// Every collective, every dtype x op, zero-copy and staged, for the given counts.
void scenario_collectives(rs_context_t* ctx, const std::vector<std::size_t>& counts) {
  for (std::size_t count : counts) {
    for (bool shared : {true, false}) {
      for (int t = 0; t < ringsync::kNumDTypes; ++t)
        for (int o = 0; o < ringsync::kNumReduceOps; ++o)
          check_allreduce(ctx, shared, count, static_cast<ringsync::DType>(t),
                          static_cast<ringsync::ReduceOp>(o), (t + o) % 2 == 0);
      for (int root = 0; root < g_size; root += std::max(1, g_size / 3))
        check_broadcast(ctx, shared, count, root);
      check_allgather(ctx, shared, count, false);
      check_allgather(ctx, shared, count, true);
    }
    expect_ok(rs_barrier(ctx, ("barrier." + std::to_string(count)).c_str()), "barrier");
  }
}

// Async submission of several tensors in rank-dependent order, waited out of order.
void scenario_async(rs_context_t* ctx) {
  constexpr int kTensors = 6;
  std::vector<std::vector<float>> data(kTensors);
  std::vector<rs_request_t*> requests(kTensors, nullptr);
  for (int k = 0; k < kTensors; ++k) data[k].assign(1000 + k * 37, static_cast<float>(g_rank + k));
  for (int i = 0; i < kTensors; ++i) {
    const int k = (i + g_rank) % kTensors;  // every rank submits in another order
    const std::string name = "async." + std::to_string(k);
    expect_ok(rs_allreduce_async(ctx, name.c_str(), data[k].data(), data[k].data(), data[k].size(),
                                 RS_F32, RS_SUM, &requests[k]),
              name.c_str());
  }
  for (int k = kTensors - 1; k >= 0; --k) {
    rs_status_t s;
    while ((s = rs_test(requests[k])) == RS_IN_PROGRESS)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    expect_ok(s, "rs_test");
    float expected = 0;
    for (int r = 0; r < g_size; ++r) expected += static_cast<float>(r + k);
    EXPECT(data[k].front() == expected && data[k].back() == expected, "async tensor %d", k);
  }
}

int expect_status(rs_status_t got, const char* want_name, const char* want_text) {
  const std::string text = rs_last_error();
  EXPECT(std::string(rs_status_string(got)) == want_name, "got %s (%s), wanted %s",
         rs_status_string(got), text.c_str(), want_name);
  EXPECT(text.find(want_text) != std::string::npos, "message '%s' lacks '%s'", text.c_str(),
         want_text);
  std::printf("rank %d: %s: %s\n", g_rank, rs_status_string(got), text.c_str());
  return g_failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ringsync-test-rank SCENARIO [ARGS]\n");
    return 2;
  }
  const std::string scenario = argv[1];
  g_rank = std::atoi(std::getenv("RINGSYNC_LOCAL_RANK") ? std::getenv("RINGSYNC_LOCAL_RANK") : "0");
  g_size = std::atoi(std::getenv("RINGSYNC_LOCAL_SIZE") ? std::getenv("RINGSYNC_LOCAL_SIZE") : "1");

  if (scenario == "hang") {  // connect, then wait to be killed
    rs_context_t* ctx = connect_or_die();
    mark("connected");
    std::this_thread::sleep_for(std::chrono::seconds(120));
    rs_disconnect(ctx);
    return 4;
  }
  rs_context_t* ctx = connect_or_die();
  mark("connected");
  if (scenario == "collectives") {
    std::vector<std::size_t> counts;
    for (int i = 2; i < argc; ++i) counts.push_back(std::strtoull(argv[i], nullptr, 10));
    scenario_collectives(ctx, counts);
  } else if (scenario == "large") {  // one 64 MiB f32 sum allreduce, zero copy and staged
    const std::size_t count = (64u << 20) / 4;
    check_allreduce(ctx, true, count, ringsync::DType::kF32, ringsync::ReduceOp::kSum, false);
    check_allreduce(ctx, false, count, ringsync::DType::kF32, ringsync::ReduceOp::kSum, true);
  } else if (scenario == "async") {
    scenario_async(ctx);
  } else if (scenario == "mismatch") {
    std::vector<double> buf(16, 1.0);
    rs_status_t s = rs_allreduce(ctx, "mixed", buf.data(), buf.data(), g_rank == 0 ? 16 : 8,
                                 g_rank == 0 ? RS_F32 : RS_F64, RS_SUM);
    expect_status(s, "mismatch", "tensor 'mixed'");
    EXPECT(std::string(rs_last_error()).find("count") != std::string::npos, "no field named");
    // The job keeps working after a mismatch.
    check_allreduce(ctx, false, 5, ringsync::DType::kI32, ringsync::ReduceOp::kSum, false);
  } else if (scenario == "expect-error") {  // expect-error STATUS TEXT: one allreduce fails so
    std::vector<float> buf(1024, 1.0f);
    rs_request_t* req = nullptr;
    expect_ok(rs_allreduce_async(ctx, "doomed", buf.data(), buf.data(), buf.size(), RS_F32, RS_SUM,
                                 &req),
              "submit");
    mark("submitted");
    expect_status(rs_wait(req), argc > 2 ? argv[2] : "", argc > 3 ? argv[3] : "");
  } else {
    std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return 2;
  }
  rs_disconnect(ctx);
  if (g_failures) std::fprintf(stderr, "rank %d: %d check(s) failed\n", g_rank, g_failures);
  return g_failures ? 1 : 0;
}
