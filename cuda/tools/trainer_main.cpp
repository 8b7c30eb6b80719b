// ringsync-cuda-trainer: one trainer rank that keeps its gradients on the GPU.
// Each iteration: a busy kernel (stands in for the backward pass and keeps the GPU
// loaded), a fill of the gradient buffer on the device, an in-place allreduce of the
// device pointer through libringsync, and a check of every element on the host.
// Then, with --timed N, N allreduces back to back, timed as nccl-tests times them
// (the checks above are not in the way: a rank's time per allreduce would include
// the slowest rank's check of the previous one).
// Runs under a daemon like any trainer (RINGSYNC_SOCKET, RINGSYNC_LOCAL_RANK,
// RINGSYNC_LOCAL_SIZE, e.g. via `ringsync launch`). Exit 0 when every result was
// right, 1 otherwise, 2 on bad usage, 77 without a CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/half.h"
#include "cuda/device_api.h"
#include "cuda/tools/trainer_kernels.h"
#include "ringsync/ringsync.h"

namespace ringsync::cuda::tools {
namespace {

struct Options {
  std::size_t count = std::size_t{1} << 24;  // 64 MiB of f32
  int iterations = 20;
  int timed = 0;  // back-to-back allreduces after the checked ones
  double busy_ms = 20;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
};

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (value == nullptr) return false;
    ++i;
    if (arg == "--count") {
      o.count = std::strtoull(value, nullptr, 10);
    } else if (arg == "--iterations") {
      o.iterations = std::atoi(value);
    } else if (arg == "--timed") {
      o.timed = std::atoi(value);
    } else if (arg == "--busy-ms") {
      o.busy_ms = std::atof(value);
    } else if (arg == "--dtype") {
      auto d = parse_dtype(value);
      if (!d) return false;
      o.dtype = *d;
    } else if (arg == "--op") {
      auto op = parse_reduce_op(value);
      if (!op || *op == ReduceOp::kProd) return false;
      o.op = *op;
    } else {
      return false;
    }
  }
  return o.count > 0 && o.iterations > 0 && o.timed >= 0;
}

double element(const std::vector<std::byte>& host, std::size_t i, DType dtype) {
  const std::byte* p = host.data() + i * dtype_size(dtype);
  switch (dtype) {
    case DType::kF32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::kF64: { double v; std::memcpy(&v, p, 8); return v; }
    case DType::kF16: { std::uint16_t v; std::memcpy(&v, p, 2); return f16_to_f32(v); }
    case DType::kBF16: { std::uint16_t v; std::memcpy(&v, p, 2); return bf16_to_f32(v); }
    case DType::kI32: { std::int32_t v; std::memcpy(&v, p, 4); return v; }
    case DType::kI64: { std::int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
    case DType::kU8: { std::uint8_t v; std::memcpy(&v, p, 1); return v; }
  }
  return 0;
}

// What every element must be after the allreduce over `n` ranks (see fill_gradient).
double expected(std::size_t i, int iteration, int n, DType dtype, ReduceOp op) {
  const long long k = static_cast<long long>((i + iteration) % 13);
  const long long sum = k * n * (n + 1) / 2;
  switch (op) {
    case ReduceOp::kSum: return static_cast<double>(sum);
    case ReduceOp::kMin: return static_cast<double>(k);
    case ReduceOp::kMax: return static_cast<double>(k * n);
    case ReduceOp::kAvg: {
      const bool integer = dtype == DType::kI32 || dtype == DType::kI64 || dtype == DType::kU8;
      return integer ? static_cast<double>(sum / n) : static_cast<double>(sum) / n;
    }
    case ReduceOp::kProd: break;
  }
  return 0;
}

#define CHECK_CUDA(call)                                                \
  do {                                                                  \
    cudaError_t e_ = (call);                                            \
    if (e_ != cudaSuccess) {                                            \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); \
      return 1;                                                         \
    }                                                                   \
  } while (0)

int run(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, o)) {
    std::fprintf(stderr,
                 "usage: ringsync-cuda-trainer [--count N] [--iterations K] [--timed N] [--busy-ms MS]\n"
                 "                             [--dtype f32|f64|f16|bf16|i32|i64|u8]"
                 " [--op sum|avg|min|max]\n");
    return 2;
  }
  if (const Status usable = available(); !usable.ok()) {
    std::printf("%s\n", usable.message().c_str());  // "no CUDA device: ..." or why CUDA fails
    return no_device_here() ? 77 : 1;
  }
  int devices = 0;
  CHECK_CUDA(cudaGetDeviceCount(&devices));
  rs_context_t* ctx = nullptr;
  if (rs_connect(nullptr, &ctx) != RS_SUCCESS) {
    std::fprintf(stderr, "rs_connect: %s\n", rs_last_error());
    return 1;
  }
  const int rank = rs_rank(ctx), size = rs_size(ctx);
  CHECK_CUDA(cudaSetDevice(rs_local_rank(ctx) % devices));
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, rs_local_rank(ctx) % devices));
  const std::size_t bytes = o.count * dtype_size(o.dtype);
  void* gradient = nullptr;
  CHECK_CUDA(cudaMalloc(&gradient, bytes));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  std::vector<std::byte> host(bytes);
  int failures = 0;
  double allreduce_seconds = 0;  // every iteration but the first (when there are more)
  double first_seconds = 0;      // the first one also maps the buffer in the daemon
  for (int it = 0; it < o.iterations && failures == 0; ++it) {
    CHECK_CUDA(busy_wait(o.busy_ms, prop.multiProcessorCount, stream));
    CHECK_CUDA(fill_gradient(gradient, o.count, o.dtype, rank, it, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    const auto start = std::chrono::steady_clock::now();
    const std::string name = "grad." + std::to_string(it % 4);
    const rs_status_t s = rs_allreduce(ctx, name.c_str(), gradient, gradient, o.count,
                                       static_cast<rs_dtype_t>(o.dtype), static_cast<rs_op_t>(o.op));
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (it == 0) first_seconds = took;
    if (it > 0 || o.iterations == 1) allreduce_seconds += took;
    if (s != RS_SUCCESS) {
      std::fprintf(stderr, "rank %d: rs_allreduce: %s: %s\n", rank, rs_status_string(s),
                   rs_last_error());
      ++failures;
      break;
    }
    CHECK_CUDA(cudaMemcpy(host.data(), gradient, bytes, cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < o.count; ++i) {
      const double want = expected(i, it, size, o.dtype, o.op);
      const double got = element(host, i, o.dtype);
      if (got != want) {
        if (failures < 5)
          std::fprintf(stderr, "rank %d iteration %d: element %zu is %g, expected %g\n", rank, it,
                       i, got, want);
        ++failures;
      }
    }
  }
  // Back to back: the first lines the ranks up, the next `timed` are measured.
  double timed_seconds = 0;
  for (int it = 0; it <= o.timed && o.timed > 0 && failures == 0; ++it) {
    const auto start = std::chrono::steady_clock::now();
    const rs_status_t s = rs_allreduce(ctx, "timed", gradient, gradient, o.count, static_cast<rs_dtype_t>(o.dtype),
                                       static_cast<rs_op_t>(o.op));
    if (s != RS_SUCCESS) {
      std::fprintf(stderr, "rank %d: timed rs_allreduce: %s: %s\n", rank, rs_status_string(s), rs_last_error());
      ++failures;
    }
    if (it > 0) timed_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  if (failures == 0) {
    const auto busbw = [&](double seconds) { return bytes / seconds * 2.0 * (size - 1) / size / 1e9; };
    const double per = allreduce_seconds / std::max(1, o.iterations - 1);
    std::printf("rank %d/%d on %s: %d allreduces of %zu %s (%s) on device memory verified; "
                "the first %.2f ms, then %.3f ms each (mean)",
                rank, size, prop.name, o.iterations, o.count,
                std::string(dtype_name(o.dtype)).c_str(), std::string(reduce_op_name(o.op)).c_str(),
                first_seconds * 1e3, per * 1e3);
    if (o.timed > 0) {
      const double timed = timed_seconds / o.timed;
      std::printf("; %d back to back: %.3f ms each, busbw %.2f GB/s", o.timed, timed * 1e3, busbw(timed));
    }
    std::printf("\n");
  }
  cudaFree(gradient);
  cudaStreamDestroy(stream);
  rs_disconnect(ctx);
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace ringsync::cuda::tools

int main(int argc, char** argv) { return ringsync::cuda::tools::run(argc, argv); }
