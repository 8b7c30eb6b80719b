// Device reduction kernels: every input read once, one pass, one kernel per (dtype,
// op). Where dst and all inputs sit at the same offset modulo 16 bytes, the body moves
// 16-byte vectors (a few scalar elements before and after); otherwise every element
// is scalar (byte-wise where an input is not even element-aligned). Grid-stride, so
// any count runs on a grid sized to the GPU.
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "cuda/device_api.h"
#include "cuda/device_element.cuh"
#include "cuda/reduce_kernels.h"

namespace ringsync::cuda {
namespace {

using device::Element;

// The inputs travel as a kernel argument (no device allocation, no copy per call).
struct Sources {
  const void* ptr[kMaxReduceSources];
};

struct Layout {
  std::size_t count;  // elements
  std::size_t head;   // scalar elements before the first vector (vector path only)
  std::size_t nvec;   // 16-byte vectors after `head`
  int nsrc;
  bool element_aligned;  // every pointer is a multiple of the element size
};

constexpr int kThreads = 256;
// Vectors in flight per thread and input: 4 (64 bytes) keeps HBM busy at moderate
// occupancy; u8's 16 lanes each take a register, so it holds 2.
__host__ __device__ constexpr int unroll_for(std::size_t element) { return element == 1 ? 2 : 4; }

template <class T>
__device__ __forceinline__ T load_scalar(const void* base, std::size_t i, bool aligned) {
  if (aligned) return static_cast<const T*>(base)[i];
  // Unaligned: assemble byte by byte (rare; only buffers at odd byte offsets).
  const auto* p = static_cast<const unsigned char*>(base) + i * sizeof(T);
  unsigned char bytes[sizeof(T)];
#pragma unroll
  for (int b = 0; b < static_cast<int>(sizeof(T)); ++b) bytes[b] = p[b];
  T v;
  memcpy(&v, bytes, sizeof(T));
  return v;
}

template <class T>
__device__ __forceinline__ void store_scalar(void* base, std::size_t i, T v, bool aligned) {
  if (aligned) {
    static_cast<T*>(base)[i] = v;
    return;
  }
  unsigned char bytes[sizeof(T)];
  memcpy(bytes, &v, sizeof(T));
  auto* p = static_cast<unsigned char*>(base) + i * sizeof(T);
#pragma unroll
  for (int b = 0; b < static_cast<int>(sizeof(T)); ++b) p[b] = bytes[b];
}

// One 16-byte vector of elements, unpacked from registers.
template <class Stored>
struct Pack {
  static constexpr int kLanes = 16 / static_cast<int>(sizeof(Stored));
  Stored lane[kLanes];

  __device__ static Pack load(const void* base, std::size_t head, std::size_t v) {
    const uint4 raw = reinterpret_cast<const uint4*>(static_cast<const Stored*>(base) + head)[v];
    Pack p;
    memcpy(p.lane, &raw, sizeof(raw));
    return p;
  }
  __device__ void store(void* base, std::size_t head, std::size_t v) const {
    uint4 raw;
    memcpy(&raw, lane, sizeof(raw));
    reinterpret_cast<uint4*>(static_cast<Stored*>(base) + head)[v] = raw;
  }
};

template <DType D, class Op, bool kAvg>
__global__ void __launch_bounds__(kThreads)
    reduce_kernel(void* dst, const Sources srcs, const Layout layout) {
  using E = Element<D>;
  using Stored = typename E::Stored;
  using Acc = typename E::Acc;
  using P = Pack<Stored>;
  constexpr int V = P::kLanes;
  constexpr int kUnroll = unroll_for(sizeof(Stored));
  const Op op;
  const int nsrc = layout.nsrc;
  const std::size_t threads = static_cast<std::size_t>(gridDim.x) * blockDim.x;

  // Vector body: per step a thread owns kUnroll vectors, blockDim apart (coalesced),
  // and folds the inputs in order: acc = in0; acc = acc op in1; ...
  for (std::size_t base = static_cast<std::size_t>(blockIdx.x) * blockDim.x * kUnroll + threadIdx.x;
       base < layout.nvec; base += threads * kUnroll) {
    Acc acc[kUnroll][V] = {};
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::size_t v = base + static_cast<std::size_t>(u) * blockDim.x;
      if (v < layout.nvec) {
        const P in = P::load(srcs.ptr[0], layout.head, v);
#pragma unroll
        for (int l = 0; l < V; ++l) acc[u][l] = E::widen(in.lane[l]);
      }
    }
    for (int k = 1; k < nsrc; ++k) {
      P in[kUnroll] = {};
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const std::size_t v = base + static_cast<std::size_t>(u) * blockDim.x;
        if (v < layout.nvec) in[u] = P::load(srcs.ptr[k], layout.head, v);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
#pragma unroll
        for (int l = 0; l < V; ++l) acc[u][l] = op(acc[u][l], E::widen(in[u].lane[l]));
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const std::size_t v = base + static_cast<std::size_t>(u) * blockDim.x;
      if (v < layout.nvec) {
        P out;
#pragma unroll
        for (int l = 0; l < V; ++l) {
          Acc a = acc[u][l];
          if constexpr (kAvg) a = device::divide_by(a, static_cast<std::size_t>(nsrc));
          out.lane[l] = E::narrow(a);
        }
        out.store(dst, layout.head, v);
      }
    }
  }

  // Scalar elements: the head and tail around the vectors, or everything.
  const std::size_t vector_elements = layout.nvec * V;
  const std::size_t nscalar = layout.count - vector_elements;
  const bool aligned = layout.element_aligned;
  for (std::size_t s = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       s < nscalar; s += threads) {
    const std::size_t i = s < layout.head ? s : s + vector_elements;
    Acc acc = E::widen(load_scalar<Stored>(srcs.ptr[0], i, aligned));
    for (int k = 1; k < nsrc; ++k) acc = op(acc, E::widen(load_scalar<Stored>(srcs.ptr[k], i, aligned)));
    if constexpr (kAvg) acc = device::divide_by(acc, static_cast<std::size_t>(nsrc));
    store_scalar<Stored>(dst, i, E::narrow(acc), aligned);
  }
}

// Multiprocessors per device, asked once per device.
int multiprocessors(int device) {
  static std::atomic<int> cached[64] = {};
  if (device < 0 || device >= 64) return 132;
  int n = cached[device].load(std::memory_order_relaxed);
  if (n == 0) {
    if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || n <= 0)
      n = 132;
    cached[device].store(n, std::memory_order_relaxed);
  }
  return n;
}

Layout plan(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
            std::size_t element) {
  Layout layout{count, 0, 0, static_cast<int>(nsrc), true};
  const auto offset = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % 16; };
  const std::uintptr_t misalignment = offset(dst);
  bool same_offset = true;
  layout.element_aligned = misalignment % element == 0;
  for (std::size_t k = 0; k < nsrc; ++k) {
    same_offset = same_offset && offset(srcs[k]) == misalignment;
    layout.element_aligned = layout.element_aligned && offset(srcs[k]) % element == 0;
  }
  if (!same_offset || !layout.element_aligned) return layout;  // all scalar
  const std::size_t head = ((16 - misalignment) % 16) / element;
  if (head >= count) return layout;
  layout.head = head;
  layout.nvec = (count - head) * element / 16;
  return layout;
}

template <DType D, class Op, bool kAvg>
cudaError_t launch(void* dst, const Sources& srcs, const Layout& layout, cudaStream_t stream,
                   int device) {
  using Stored = typename Element<D>::Stored;
  constexpr int kUnroll = unroll_for(sizeof(Stored));
  const std::size_t scalar = layout.count - layout.nvec * (16 / sizeof(Stored));
  const std::size_t work = std::max((layout.nvec + kUnroll - 1) / kUnroll, scalar);
  // Enough resident blocks to fill every multiprocessor; the grid-stride loops do the rest.
  const std::size_t max_blocks = static_cast<std::size_t>(multiprocessors(device)) * 8;
  const std::size_t blocks = std::min(std::max<std::size_t>((work + kThreads - 1) / kThreads, 1),
                                      max_blocks);
  // cudaGetLastError() reports the last failure of any runtime call on this thread:
  // clear an earlier one (another client's bad IPC handle, say) so that only this
  // launch's own failure is returned.
  (void)cudaGetLastError();
  reduce_kernel<D, Op, kAvg><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(dst, srcs,
                                                                                    layout);
  return cudaGetLastError();
}

template <DType D>
cudaError_t launch_op(void* dst, const Sources& srcs, const Layout& layout, ReduceOp op,
                      cudaStream_t stream, int device) {
  switch (op) {
    case ReduceOp::kSum: return launch<D, device::AddOp, false>(dst, srcs, layout, stream, device);
    case ReduceOp::kAvg: return launch<D, device::AddOp, true>(dst, srcs, layout, stream, device);
    case ReduceOp::kMin: return launch<D, device::MinOp, false>(dst, srcs, layout, stream, device);
    case ReduceOp::kMax: return launch<D, device::MaxOp, false>(dst, srcs, layout, stream, device);
    case ReduceOp::kProd:
      return launch<D, device::MultiplyOp, false>(dst, srcs, layout, stream, device);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t launch_reduce(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
                          DType dtype, ReduceOp op, cudaStream_t stream, int device) {
  if (nsrc == 0 || nsrc > kMaxReduceSources) return cudaErrorInvalidValue;
  Sources sources{};
  for (std::size_t k = 0; k < nsrc; ++k) sources.ptr[k] = srcs[k];
  const Layout layout = plan(dst, srcs, nsrc, count, dtype_size(dtype));
  switch (dtype) {
    case DType::kF32: return launch_op<DType::kF32>(dst, sources, layout, op, stream, device);
    case DType::kF64: return launch_op<DType::kF64>(dst, sources, layout, op, stream, device);
    case DType::kF16: return launch_op<DType::kF16>(dst, sources, layout, op, stream, device);
    case DType::kBF16: return launch_op<DType::kBF16>(dst, sources, layout, op, stream, device);
    case DType::kI32: return launch_op<DType::kI32>(dst, sources, layout, op, stream, device);
    case DType::kI64: return launch_op<DType::kI64>(dst, sources, layout, op, stream, device);
    case DType::kU8: return launch_op<DType::kU8>(dst, sources, layout, op, stream, device);
  }
  return cudaErrorInvalidValue;
}

}  // namespace ringsync::cuda
