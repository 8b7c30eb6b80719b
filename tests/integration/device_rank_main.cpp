// ringsync-device-rank: a trainer for GPU machines. It allocates tensors with
// cudaMalloc, fills them with values every rank can predict, runs
// allreduce / broadcast / allgather on them through ringsyncd (device pointers
// straight into the C ABI) and checks every result on the host. Started once
// per rank, e.g. by `ringsync launch --nodes 1 --slots 2 -- ringsync-device-rank`
// (RINGSYNC_SOCKET, RINGSYNC_LOCAL_RANK, ... from the environment).
//
//   --count N        elements of the main tensors (default 1000003: odd on purpose)
//   --iterations K   rounds of the whole check (default 3; later rounds reuse registrations)
//   --device D       CUDA device (default: local rank modulo the device count)
//   --bench-mib M    afterwards, time allreduces of M MiB of f32 and print GB/s (0: skip)
//
// Exit status: 0 all checks passed, 1 a check or call failed, 77 no CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/device_api.h"
#include "ringsync/ringsync.h"

namespace {

int g_rank = 0;
int g_failures = 0;

#define CHECK_CUDA(call)                                                      \
  do {                                                                        \
    cudaError_t e_ = (call);                                                  \
    if (e_ != cudaSuccess) {                                                  \
      std::fprintf(stderr, "[device-rank %d] %s failed: %s\n", g_rank, #call, \
                   cudaGetErrorString(e_));                                   \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

bool ok(rs_status_t s, const char* what) {
  if (s == RS_SUCCESS) return true;
  std::fprintf(stderr, "[device-rank %d] %s: %s: %s\n", g_rank, what, rs_status_string(s),
               rs_last_error());
  ++g_failures;
  return false;
}

// The value rank r holds at element i of tensor `salt`: small integers, exact
// in every dtype used here and in their sums.
double value(int rank, std::size_t i, int salt) {
  return static_cast<double>(static_cast<int>((i * 7 + static_cast<std::size_t>(salt)) % 101) - 50 +
                             rank * 3);
}

template <typename T>
struct DeviceTensor {
  T* ptr = nullptr;
  std::size_t count = 0;
  explicit DeviceTensor(std::size_t n) : count(n) {
    CHECK_CUDA(cudaMalloc(&ptr, std::max<std::size_t>(n, 1) * sizeof(T)));
  }
  ~DeviceTensor() { cudaFree(ptr); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  void upload(const std::vector<T>& host, std::size_t at = 0) {
    CHECK_CUDA(cudaMemcpy(ptr + at, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  }
  std::vector<T> download(std::size_t at, std::size_t n) const {
    std::vector<T> host(n);
    CHECK_CUDA(cudaMemcpy(host.data(), ptr + at, n * sizeof(T), cudaMemcpyDeviceToHost));
    return host;
  }
};

template <typename T>
std::vector<T> filled(int rank, std::size_t n, int salt) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(value(rank, i, salt));
  return v;
}

template <typename T>
void expect(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  if (got.size() != want.size()) {
    std::fprintf(stderr, "[device-rank %d] %s: %zu elements, expected %zu\n", g_rank, what.c_str(),
                 got.size(), want.size());
    ++g_failures;
    return;
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    std::fprintf(stderr, "[device-rank %d] %s: element %zu is %.17g, expected %.17g\n", g_rank,
                 what.c_str(), i, static_cast<double>(got[i]), static_cast<double>(want[i]));
    ++g_failures;
    return;
  }
}

template <typename T>
constexpr rs_dtype_t dtype_of();
template <>
constexpr rs_dtype_t dtype_of<float>() {
  return RS_F32;
}
template <>
constexpr rs_dtype_t dtype_of<double>() {
  return RS_F64;
}
template <>
constexpr rs_dtype_t dtype_of<std::int32_t>() {
  return RS_I32;
}

// Allreduce sum out of place, in the middle of a larger allocation (non-zero offsets).
template <typename T>
void check_allreduce(rs_context_t* ctx, std::size_t count, int iteration, const char* tag) {
  const int size = rs_size(ctx);
  const std::size_t pad = 5;
  DeviceTensor<T> send(count + 2 * pad), recv(count + pad);
  send.upload(filled<T>(g_rank, count, iteration), pad);
  const std::string name = std::string("sum.") + tag + "." + std::to_string(iteration);
  if (!ok(rs_allreduce(ctx, name.c_str(), send.ptr + pad, recv.ptr + pad, count, dtype_of<T>(),
                       RS_SUM),
          name.c_str()))
    return;
  std::vector<T> want(count, T{});
  for (int r = 0; r < size; ++r) {
    const auto part = filled<T>(r, count, iteration);
    for (std::size_t i = 0; i < count; ++i) want[i] = static_cast<T>(want[i] + part[i]);
  }
  expect(recv.download(pad, count), want, name);
  expect(send.download(pad, count), filled<T>(g_rank, count, iteration), name + " (input kept)");
}

void check_in_place(rs_context_t* ctx, std::size_t count, int iteration) {
  const int size = rs_size(ctx);
  DeviceTensor<float> data(count);
  data.upload(filled<float>(g_rank, count, 1000 + iteration));
  const std::string avg = "avg." + std::to_string(iteration);
  if (ok(rs_allreduce(ctx, avg.c_str(), data.ptr, data.ptr, count, RS_F32, RS_AVG), avg.c_str())) {
    std::vector<float> want(count);
    for (std::size_t i = 0; i < count; ++i) {
      double sum = 0;
      for (int r = 0; r < size; ++r) sum += value(r, i, 1000 + iteration);
      want[i] = static_cast<float>(static_cast<float>(sum) / static_cast<float>(size));
    }
    // Floats: the sum is exact (small integers); the division is one rounding.
    const auto got = data.download(0, count);
    for (std::size_t i = 0; i < count; ++i)
      if (std::fabs(got[i] - want[i]) > 1e-6f * std::fabs(want[i]) + 1e-6f) {
        std::fprintf(stderr, "[device-rank %d] %s: element %zu is %g, expected %g\n", g_rank,
                     avg.c_str(), i, got[i], want[i]);
        ++g_failures;
        break;
      }
  }
  DeviceTensor<std::int32_t> ints(count);
  ints.upload(filled<std::int32_t>(g_rank, count, 2000 + iteration));
  const std::string max = "max." + std::to_string(iteration);
  if (ok(rs_allreduce(ctx, max.c_str(), ints.ptr, ints.ptr, count, RS_I32, RS_MAX), max.c_str())) {
    std::vector<std::int32_t> want(count);
    for (std::size_t i = 0; i < count; ++i) {
      std::int32_t m = INT32_MIN;
      for (int r = 0; r < size; ++r)
        m = std::max(m, static_cast<std::int32_t>(value(r, i, 2000 + iteration)));
      want[i] = m;
    }
    expect(ints.download(0, count), want, max);
  }
}

void check_broadcast(rs_context_t* ctx, std::size_t count, int iteration) {
  const int size = rs_size(ctx);
  const int root = (size - 1 + iteration) % size;
  DeviceTensor<double> data(count);
  data.upload(filled<double>(g_rank, count, 3000 + iteration));
  const std::string name = "bcast." + std::to_string(iteration);
  if (ok(rs_broadcast(ctx, name.c_str(), data.ptr, data.ptr, count, RS_F64, root), name.c_str()))
    expect(data.download(0, count), filled<double>(root, count, 3000 + iteration), name);
}

void check_allgather(rs_context_t* ctx, std::size_t count, int iteration) {
  const int size = rs_size(ctx);
  std::vector<float> want;
  for (int r = 0; r < size; ++r) {
    const auto part = filled<float>(r, count, 4000 + iteration);
    want.insert(want.end(), part.begin(), part.end());
  }
  DeviceTensor<float> send(count), recv(count * static_cast<std::size_t>(size));
  send.upload(filled<float>(g_rank, count, 4000 + iteration));
  const std::string name = "gather." + std::to_string(iteration);
  if (ok(rs_allgather(ctx, name.c_str(), send.ptr, recv.ptr, count, RS_F32), name.c_str()))
    expect(recv.download(0, want.size()), want, name);
  // In place: this rank's part already sits in its slot.
  DeviceTensor<float> all(count * static_cast<std::size_t>(size));
  all.upload(filled<float>(g_rank, count, 4000 + iteration),
             count * static_cast<std::size_t>(g_rank));
  const std::string in_place = "gather.in_place." + std::to_string(iteration);
  if (ok(rs_allgather(ctx, in_place.c_str(), all.ptr + count * static_cast<std::size_t>(g_rank),
                      all.ptr, count, RS_F32),
         in_place.c_str()))
    expect(all.download(0, want.size()), want, in_place);
}

void bench(rs_context_t* ctx, std::size_t mib) {
  const std::size_t count = mib * (1 << 20) / sizeof(float);
  DeviceTensor<float> data(count);
  data.upload(filled<float>(g_rank, count, 5));
  if (!ok(rs_register_device(ctx, data.ptr, count * sizeof(float)), "register")) return;
  const int rounds = 10;
  ok(rs_allreduce(ctx, "bench.warmup", data.ptr, data.ptr, count, RS_F32, RS_SUM), "warmup");
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < rounds; ++i)
    if (!ok(rs_allreduce(ctx, "bench", data.ptr, data.ptr, count, RS_F32, RS_SUM), "bench")) return;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (g_rank == 0)
    std::printf(
        "[device-rank 0] allreduce %zu MiB f32 x %d ranks: %.3f ms each, %.2f GB/s algorithm "
        "bandwidth\n",
        mib, rs_size(ctx), 1e3 * seconds / rounds,
        static_cast<double>(count * sizeof(float)) * rounds / seconds / 1e9);
}

std::size_t flag(int argc, char** argv, const char* name, std::size_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::strtoull(argv[i + 1], nullptr, 10);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], "--help") == 0) {
      std::printf("usage: %s [--count N] [--iterations K] [--device D] [--bench-mib M]\n", argv[0]);
      return 0;
    }
  const std::size_t count = flag(argc, argv, "--count", 1000003);
  const int iterations = static_cast<int>(flag(argc, argv, "--iterations", 3));
  const std::size_t bench_mib = flag(argc, argv, "--bench-mib", 0);

  if (const ringsync::Status usable = ringsync::cuda::available(); !usable.ok()) {
    std::fprintf(stderr, "[device-rank] %s\n", usable.message().c_str());
    return ringsync::cuda::no_device_here() ? 77 : 1;  // a GPU that is there but unusable fails
  }
  int devices = 0;
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  const char* local = std::getenv("RINGSYNC_LOCAL_RANK");
  const int device = static_cast<int>(flag(
      argc, argv, "--device", static_cast<std::size_t>(local ? std::atoi(local) : 0) % devices));
  CHECK_CUDA(cudaSetDevice(device));
  CHECK_CUDA(cudaFree(nullptr));  // creates the context, so the driver is loaded before connecting

  rs_context_t* ctx = nullptr;
  if (!ok(rs_connect(nullptr, &ctx), "rs_connect")) return 1;
  g_rank = rs_rank(ctx);
  {
    DeviceTensor<float> probe(16);
    if (rs_is_device_pointer(probe.ptr) != 1) {
      std::fprintf(stderr, "[device-rank %d] cudaMalloc memory is not seen as GPU memory\n",
                   g_rank);
      return 1;
    }
  }
  for (int it = 0; it < iterations; ++it) {
    check_allreduce<float>(ctx, count, it, "f32");
    check_allreduce<double>(ctx, count / 3 + 1, it, "f64");
    check_allreduce<std::int32_t>(ctx, 7, it, "i32");
    check_in_place(ctx, count, it);
    check_broadcast(ctx, count / 2 + 1, it);
    check_allgather(ctx, count / 5 + 3, it);
  }
  if (bench_mib > 0) bench(ctx, bench_mib);
  rs_disconnect(ctx);
  if (g_failures > 0) {
    std::fprintf(stderr, "[device-rank %d] %d check(s) failed\n", g_rank, g_failures);
    return 1;
  }
  std::printf("[device-rank %d] OK: %d iteration(s) of allreduce/broadcast/allgather on GPU %d\n",
              g_rank, iterations, device);
  return 0;
}
