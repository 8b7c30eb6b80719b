#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/tools/trainer_kernels.h"

namespace ringsync::cuda::tools {
namespace {

template <class T>
__device__ T from_int(int v) {
  return static_cast<T>(v);
}
template <>
__device__ __half from_int<__half>(int v) {
  return __int2half_rn(v);
}
template <>
__device__ __nv_bfloat16 from_int<__nv_bfloat16>(int v) {
  return __int2bfloat16_rn(v);
}

template <class T>
__global__ void fill_kernel(T* buffer, std::size_t count, int rank, int iteration) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride)
    buffer[i] = from_int<T>((rank + 1) * static_cast<int>((i + iteration) % 13));
}

__device__ std::uint64_t global_ns() {
  std::uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void busy_kernel(std::uint64_t nanoseconds, float* sink) {
  const std::uint64_t end = global_ns() + nanoseconds;
  float x = threadIdx.x;
  while (global_ns() < end) {
    for (int i = 0; i < 256; ++i) x = x * 0.999f + 0.5f;
  }
  if (x == -1.0f) *sink = x;  // never true; keeps the loop from being optimized away
}

template <class T>
cudaError_t fill(void* buffer, std::size_t count, int rank, int iteration, cudaStream_t stream) {
  fill_kernel<T><<<1024, 256, 0, stream>>>(static_cast<T*>(buffer), count, rank, iteration);
  return cudaGetLastError();
}

}  // namespace

cudaError_t fill_gradient(void* buffer, std::size_t count, DType dtype, int rank, int iteration,
                          cudaStream_t stream) {
  switch (dtype) {
    case DType::kF32: return fill<float>(buffer, count, rank, iteration, stream);
    case DType::kF64: return fill<double>(buffer, count, rank, iteration, stream);
    case DType::kF16: return fill<__half>(buffer, count, rank, iteration, stream);
    case DType::kBF16: return fill<__nv_bfloat16>(buffer, count, rank, iteration, stream);
    case DType::kI32: return fill<std::int32_t>(buffer, count, rank, iteration, stream);
    case DType::kI64: return fill<std::int64_t>(buffer, count, rank, iteration, stream);
    case DType::kU8: return fill<std::uint8_t>(buffer, count, rank, iteration, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t busy_wait(double milliseconds, int blocks, cudaStream_t stream) {
  if (milliseconds <= 0) return cudaSuccess;
  busy_kernel<<<blocks, 128, 0, stream>>>(static_cast<std::uint64_t>(milliseconds * 1e6), nullptr);
  return cudaGetLastError();
}

}  // namespace ringsync::cuda::tools
