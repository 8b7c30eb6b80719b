// ringsync-cuda-bench: how close the device paths come to the hardware's copies.
//  1. Kernel: a 2-input f32 sum at 256 MiB and 1 GiB per buffer against a
//     device-to-device cudaMemcpy of the same buffer, both as bytes read + written per
//     second (target: the sum at >= 85% of the copy).
//  2. Staging: a device buffer out through the staging pipeline (pinned chunks on a
//     CUDA stream) and back in, against one pinned cudaMemcpy of the whole buffer in
//     each direction (target: >= 80%).
// Exit 0 after printing (targets are reported, not enforced), 1 on a CUDA error, 77
// without a device.
#include <cuda_runtime.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/copy_waker.h"
#include "cuda/device_api.h"
#include "cuda/device_chunk_copier.h"
#include "cuda/staging_buffers.h"
#include "cuda/staging_pipeline.h"

namespace ringsync::cuda::tools {
namespace {

constexpr std::size_t kMiB = std::size_t{1} << 20;

#define CHECK_CUDA(call)                                                \
  do {                                                                  \
    cudaError_t e_ = (call);                                            \
    if (e_ != cudaSuccess) {                                            \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                     \
    }                                                                   \
  } while (0)

void check(const Status& status, const char* what) {
  if (status.ok()) return;
  std::fprintf(stderr, "%s: %s\n", what, status.message().c_str());
  std::exit(1);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// Mean seconds per call of `work` over `iterations`, timed with events after a warm-up.
template <class Work>
double time_on_stream(Stream& stream, int iterations, Work&& work) {
  auto s = static_cast<cudaStream_t>(stream.native());
  work();
  CHECK_CUDA(cudaStreamSynchronize(s));
  cudaEvent_t begin, end;
  CHECK_CUDA(cudaEventCreate(&begin));
  CHECK_CUDA(cudaEventCreate(&end));
  CHECK_CUDA(cudaEventRecord(begin, s));
  for (int i = 0; i < iterations; ++i) work();
  CHECK_CUDA(cudaEventRecord(end, s));
  CHECK_CUDA(cudaEventSynchronize(end));
  float ms = 0;
  CHECK_CUDA(cudaEventElapsedTime(&ms, begin, end));
  cudaEventDestroy(begin);
  cudaEventDestroy(end);
  return ms / 1000.0 / iterations;
}

void bench_kernel(Stream& stream, std::size_t bytes, int iterations) {
  std::byte *a, *b, *out;
  CHECK_CUDA(cudaMalloc(&a, bytes));
  CHECK_CUDA(cudaMalloc(&b, bytes));
  CHECK_CUDA(cudaMalloc(&out, bytes));
  CHECK_CUDA(cudaMemset(a, 0x3c, bytes));  // 0x3c3c3c3c: an ordinary float (~0.0115)
  CHECK_CUDA(cudaMemset(b, 0x3d, bytes));
  const void* srcs[] = {a, b};
  const std::size_t count = bytes / sizeof(float);
  const double copy = time_on_stream(stream, iterations, [&] {
    check(copy_device(out, a, bytes, stream), "copy_device");
  });
  const double sum = time_on_stream(stream, iterations, [&] {
    check(reduce(out, srcs, 2, count, DType::kF32, ReduceOp::kSum, stream), "reduce");
  });
  const double copy_gbs = 2.0 * bytes / copy / 1e9;  // read + write
  const double sum_gbs = 3.0 * bytes / sum / 1e9;    // 2 reads + write
  std::printf("kernel  f32 sum 2 inputs %5zu MiB: %7.1f GB/s   d2d copy %7.1f GB/s   %5.1f%% of copy"
              "  (target 85%%)%s\n",
              bytes / kMiB, sum_gbs, copy_gbs, 100.0 * sum_gbs / copy_gbs,
              sum_gbs >= 0.85 * copy_gbs ? "" : "  BELOW TARGET");
  cudaFree(a);
  cudaFree(b);
  cudaFree(out);
}

// One transfer through the pipeline; the "consumer" releases each chunk at once, so
// this measures the pipeline and the copy engine, not a network.
double run_pipeline(DeviceChunkCopier& copier, CopyWaker& waker, const StagingBuffers& buffers,
                    StagingPipeline::Direction direction, void* device, std::size_t bytes) {
  StagingPipeline* self = nullptr;
  StagingPipeline pipeline(copier, buffers, direction, device, bytes,
                           [&](const StagingChunk& c) { check(self->release(c.index), "release"); });
  self = &pipeline;
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const auto state = pipeline.progress();
    if (state == StagingPipeline::State::kDone) break;
    if (state == StagingPipeline::State::kFailed) check(pipeline.status(), "staging");
    waker.wait();
  }
  return seconds_since(start);
}

void bench_staging(Stream& stream, std::size_t bytes, std::size_t chunk, std::size_t depth,
                   int repeats) {
  std::byte* device = nullptr;
  std::byte* pinned = nullptr;
  CHECK_CUDA(cudaMalloc(&device, bytes));
  CHECK_CUDA(cudaMallocHost(&pinned, bytes));
  CHECK_CUDA(cudaMemset(device, 0x5a, bytes));
  auto s = static_cast<cudaStream_t>(stream.native());

  double d2h = 1e30, h2d = 1e30;  // best of `repeats`
  for (int r = 0; r < repeats + 1; ++r) {  // the first is a warm-up
    auto start = std::chrono::steady_clock::now();
    CHECK_CUDA(cudaMemcpyAsync(pinned, device, bytes, cudaMemcpyDeviceToHost, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    if (r > 0) d2h = std::min(d2h, seconds_since(start));
    start = std::chrono::steady_clock::now();
    CHECK_CUDA(cudaMemcpyAsync(device, pinned, bytes, cudaMemcpyHostToDevice, s));
    CHECK_CUDA(cudaStreamSynchronize(s));
    if (r > 0) h2d = std::min(h2d, seconds_since(start));
  }

  // Declared in this order, the buffers are unpinned before the copier goes.
  auto copier = DeviceChunkCopier::create(0);
  check(copier.status(), "DeviceChunkCopier");
  CopyWaker waker;
  (*copier)->set_wakeup(waker.callback());
  auto buffers = StagingBuffers::create(**copier, chunk, depth);
  check(buffers.status(), "StagingBuffers");
  double out = 1e30, in = 1e30;
  for (int r = 0; r < repeats + 1; ++r) {
    const double o = run_pipeline(**copier, waker, *buffers, StagingPipeline::Direction::kOut,
                                  device, bytes);
    const double i = run_pipeline(**copier, waker, *buffers, StagingPipeline::Direction::kIn,
                                  device, bytes);
    if (r > 0) out = std::min(out, o), in = std::min(in, i);
  }
  const auto gbs = [&](double seconds) { return bytes / seconds / 1e9; };
  const auto line = [&](const char* name, double pipeline, double reference) {
    const double pct = 100.0 * reference / pipeline;
    std::printf("staging %s %5zu MiB, chunk %2zu MiB x %zu: %6.1f GB/s   pinned cudaMemcpy %6.1f GB/s"
                "   %5.1f%%  (target 80%%)%s\n",
                name, bytes / kMiB, chunk / kMiB, depth, gbs(pipeline), gbs(reference), pct,
                pct >= 80.0 ? "" : "  BELOW TARGET");
  };
  line("device->host", out, d2h);
  line("host->device", in, h2d);
  cudaFree(device);
  cudaFreeHost(pinned);
}

int run(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const Status usable = available();
  if (!usable.ok()) {
    std::printf("%s\n", usable.message().c_str());
    return no_device_here() ? 77 : 1;  // a GPU that is there but unusable fails
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s\n", prop.name);
  auto stream = Stream::create(0);
  check(stream.status(), "Stream");
  const int iterations = quick ? 5 : 20;
  bench_kernel(*stream, 256 * kMiB, iterations);
  bench_kernel(*stream, 1024 * kMiB, iterations);
  const std::size_t staged = quick ? 256 * kMiB : 1024 * kMiB;
  bench_staging(*stream, staged, 4 * kMiB, 4, quick ? 1 : 3);
  bench_staging(*stream, staged, 16 * kMiB, 3, quick ? 1 : 3);
  return 0;
}

}  // namespace
}  // namespace ringsync::cuda::tools

int main(int argc, char** argv) { return ringsync::cuda::tools::run(argc, argv); }
