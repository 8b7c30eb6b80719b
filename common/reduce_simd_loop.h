// The vector fold shared by the instruction-set files (reduce_avx2.cpp,
// reduce_avx512.cpp). Each includes this header after its `#pragma GCC target` and
// instantiates it with vector types from its own anonymous namespace, so every
// instantiation is compiled for, and private to, that instruction set.
//
// A vector type V describes one dtype on one instruction set:
//   Acc                      the register the fold runs in (f16/bf16: f32 lanes)
//   Divisor                  what avg's divide needs, made by V::divisor(n)
//   kLanes, kElementSize     elements per Acc, bytes per stored element
//   load(p) / store(p, a)    unaligned, widening / narrowing
//   stream(p, a)             non-temporal store; p is aligned to kStreamAlignment
//   add, multiply, minimum, maximum (Acc, Acc) and divide(Acc, Divisor)
// with exactly the per-element rules of common/reduce_scalar.h.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "common/dtype.h"
#include "common/reduce_kernels.h"

namespace ringsync::reduce::detail::simd {
// Internal linkage on purpose: each including file must get its own copy of every
// function here, compiled for its own instruction set, never a shared inline one.
namespace {

constexpr std::size_t kStreamAlignment = 64;
constexpr std::size_t kUnroll = 4;  // independent accumulators per step

template <class V, ReduceOp kOp>
inline typename V::Acc combine(typename V::Acc a, typename V::Acc b) {
  if constexpr (kOp == ReduceOp::kSum || kOp == ReduceOp::kAvg) {
    return V::add(a, b);
  } else if constexpr (kOp == ReduceOp::kProd) {
    return V::multiply(a, b);
  } else if constexpr (kOp == ReduceOp::kMin) {
    return V::minimum(a, b);
  } else {
    return V::maximum(a, b);
  }
}

template <class V, bool kStream>
inline void put(unsigned char* p, typename V::Acc a) {
  if constexpr (kStream) {
    V::stream(p, a);
  } else {
    V::store(p, a);
  }
}

inline const unsigned char* bytes_of(const void* p) { return static_cast<const unsigned char*>(p); }

// Folds nvec whole vectors starting byte_offset into every buffer. Per element the
// order is the reference's: acc = in0, then acc op in1, ..., then avg's divide.
// All inputs of a step are read before its outputs are written (dst may be an input).
template <class V, ReduceOp kOp, bool kStream>
void fold_vectors(unsigned char* dst, const void* const* srcs, std::size_t nsrc,
                  std::size_t byte_offset, std::size_t nvec, typename V::Divisor divisor) {
  using Acc = typename V::Acc;
  constexpr std::size_t kBytes = V::kLanes * V::kElementSize;
  std::size_t v = 0;
  for (; v + kUnroll <= nvec; v += kUnroll) {
    const std::size_t offset = byte_offset + v * kBytes;
    const unsigned char* first = bytes_of(srcs[0]) + offset;
    Acc a0 = V::load(first);
    Acc a1 = V::load(first + kBytes);
    Acc a2 = V::load(first + 2 * kBytes);
    Acc a3 = V::load(first + 3 * kBytes);
    for (std::size_t k = 1; k < nsrc; ++k) {
      const unsigned char* src = bytes_of(srcs[k]) + offset;
      a0 = combine<V, kOp>(a0, V::load(src));
      a1 = combine<V, kOp>(a1, V::load(src + kBytes));
      a2 = combine<V, kOp>(a2, V::load(src + 2 * kBytes));
      a3 = combine<V, kOp>(a3, V::load(src + 3 * kBytes));
    }
    if constexpr (kOp == ReduceOp::kAvg) {
      a0 = V::divide(a0, divisor);
      a1 = V::divide(a1, divisor);
      a2 = V::divide(a2, divisor);
      a3 = V::divide(a3, divisor);
    }
    put<V, kStream>(dst + offset, a0);
    put<V, kStream>(dst + offset + kBytes, a1);
    put<V, kStream>(dst + offset + 2 * kBytes, a2);
    put<V, kStream>(dst + offset + 3 * kBytes, a3);
  }
  for (; v < nvec; ++v) {
    const std::size_t offset = byte_offset + v * kBytes;
    Acc a = V::load(bytes_of(srcs[0]) + offset);
    for (std::size_t k = 1; k < nsrc; ++k) {
      a = combine<V, kOp>(a, V::load(bytes_of(srcs[k]) + offset));
    }
    if constexpr (kOp == ReduceOp::kAvg) {
      a = V::divide(a, divisor);
    }
    put<V, kStream>(dst + offset, a);
  }
}

template <class V, bool kStream>
void fold_vectors_for_op(ReduceOp op, unsigned char* dst, const void* const* srcs,
                         std::size_t nsrc, std::size_t byte_offset, std::size_t nvec) {
  const typename V::Divisor divisor = V::divisor(nsrc);  // used by avg only
  switch (op) {
    case ReduceOp::kSum:
      return fold_vectors<V, ReduceOp::kSum, kStream>(dst, srcs, nsrc, byte_offset, nvec, divisor);
    case ReduceOp::kAvg:
      return fold_vectors<V, ReduceOp::kAvg, kStream>(dst, srcs, nsrc, byte_offset, nvec, divisor);
    case ReduceOp::kMin:
      return fold_vectors<V, ReduceOp::kMin, kStream>(dst, srcs, nsrc, byte_offset, nvec, divisor);
    case ReduceOp::kMax:
      return fold_vectors<V, ReduceOp::kMax, kStream>(dst, srcs, nsrc, byte_offset, nvec, divisor);
    case ReduceOp::kProd:
      return fold_vectors<V, ReduceOp::kProd, kStream>(dst, srcs, nsrc, byte_offset, nvec, divisor);
  }
}

// reduce() for one dtype: a scalar head until dst is aligned for streaming stores (only
// when streaming pays off), whole vectors, then a scalar tail.
template <class V>
void reduce_with(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count,
                 DType dtype, ReduceOp op) {
  const auto address = reinterpret_cast<std::uintptr_t>(dst);
  const bool stream = address % V::kElementSize == 0 &&
                      prefer_streaming_stores(count * V::kElementSize, nsrc);
  std::size_t head = 0;
  if (stream && address % kStreamAlignment != 0) {
    head = (kStreamAlignment - address % kStreamAlignment) / V::kElementSize;
    head = head < count ? head : count;
  }
  reduce_reference_range(dst, srcs, nsrc, 0, head, dtype, op);
  const std::size_t nvec = (count - head) / V::kLanes;
  auto* out = static_cast<unsigned char*>(dst);
  if (stream) {
    fold_vectors_for_op<V, true>(op, out, srcs, nsrc, head * V::kElementSize, nvec);
    _mm_sfence();  // order the streaming stores before whatever the caller does next
  } else {
    fold_vectors_for_op<V, false>(op, out, srcs, nsrc, head * V::kElementSize, nvec);
  }
  reduce_reference_range(dst, srcs, nsrc, head + nvec * V::kLanes, count, dtype, op);
}

// divide() for one dtype: avg's finishing step over one buffer, in place.
template <class V>
void divide_with(void* data, std::size_t count, DType dtype, std::size_t divisor) {
  const void* const srcs[1] = {data};
  const std::size_t nvec = count / V::kLanes;
  fold_vectors<V, ReduceOp::kAvg, false>(static_cast<unsigned char*>(data), srcs, 1, 0, nvec,
                                         V::divisor(divisor));
  divide_reference_range(data, nvec * V::kLanes, count, dtype, divisor);
}

}  // namespace
}  // namespace ringsync::reduce::detail::simd
