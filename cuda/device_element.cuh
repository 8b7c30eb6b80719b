// Element-level semantics of the device reduction kernels: the rules of
// common/reduce_scalar.h (see common/reduce.h) as device functions, one scalar at a
// time, so that the kernels match reduce_reference bit for bit:
// - floats use the _rn intrinsics (no FMA contraction, IEEE division, subnormals kept);
// - a NaN result follows x86, where the reference runs: an input NaN comes out quieted
//   with its payload, and an invalid operation (inf - inf, 0 * inf) gives the x86
//   default NaN (sign set), where the GPU alone would give its canonical 0x7FFFFFFF;
// - f16 converts in hardware (exact widening, round-to-nearest-even narrowing with
//   overflow to inf), except NaNs, which take common/half.h's path so that their
//   payload and quieting match the host's;
// - bf16 narrows with common/half.h's integer rounding (a few instructions);
// - integers wrap through unsigned arithmetic; avg truncates the magnitude.
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "common/dtype.h"

namespace ringsync::cuda::device {

// ---- f16 / bf16 <-> f32, bit-identical to common/half.h ----

__device__ __forceinline__ float f16_to_f32(std::uint16_t h) {
  if ((h & 0x7FFFu) > 0x7C00u) {  // NaN: quieted, payload kept
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    return __uint_as_float(sign | 0x7FC00000u | (static_cast<std::uint32_t>(h & 0x3FFu) << 13));
  }
  return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ std::uint16_t f32_to_f16(float f) {
  const std::uint32_t bits = __float_as_uint(f);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {  // NaN: quiet, top 9 payload bits kept
    return static_cast<std::uint16_t>(((bits >> 16) & 0x8000u) | 0x7E00u |
                                      ((magnitude >> 13) & 0x3FFu));
  }
  return __half_as_ushort(__float2half_rn(f));
}

__device__ __forceinline__ float bf16_to_f32(std::uint16_t b) {
  std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) bits |= 0x00400000u;  // quiet a signalling NaN
  return __uint_as_float(bits);
}

__device__ __forceinline__ std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t bits = __float_as_uint(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

// ---- Element types: Stored in memory, Acc for the fold ----

template <DType D>
struct Element;

template <>
struct Element<DType::kF32> {
  using Stored = float;
  using Acc = float;
  __device__ static Acc widen(Stored v) { return v; }
  __device__ static Stored narrow(Acc a) { return a; }
};
template <>
struct Element<DType::kF64> {
  using Stored = double;
  using Acc = double;
  __device__ static Acc widen(Stored v) { return v; }
  __device__ static Stored narrow(Acc a) { return a; }
};
template <>
struct Element<DType::kF16> {
  using Stored = std::uint16_t;
  using Acc = float;
  __device__ static Acc widen(Stored v) { return f16_to_f32(v); }
  __device__ static Stored narrow(Acc a) { return f32_to_f16(a); }
};
template <>
struct Element<DType::kBF16> {
  using Stored = std::uint16_t;
  using Acc = float;
  __device__ static Acc widen(Stored v) { return bf16_to_f32(v); }
  __device__ static Stored narrow(Acc a) { return f32_to_bf16(a); }
};
template <>
struct Element<DType::kI32> {
  using Stored = std::int32_t;
  using Acc = std::int32_t;
  __device__ static Acc widen(Stored v) { return v; }
  __device__ static Stored narrow(Acc a) { return a; }
};
template <>
struct Element<DType::kI64> {
  using Stored = std::int64_t;
  using Acc = std::int64_t;
  __device__ static Acc widen(Stored v) { return v; }
  __device__ static Stored narrow(Acc a) { return a; }
};
template <>
struct Element<DType::kU8> {
  using Stored = std::uint8_t;
  using Acc = std::uint8_t;
  __device__ static Acc widen(Stored v) { return v; }
  __device__ static Stored narrow(Acc a) { return a; }
};

// ---- Bits of floats, for min/max of signed zeros ----

__device__ __forceinline__ float or_bits(float a, float b) {
  return __uint_as_float(__float_as_uint(a) | __float_as_uint(b));
}
__device__ __forceinline__ double or_bits(double a, double b) {
  return __longlong_as_double(__double_as_longlong(a) | __double_as_longlong(b));
}
__device__ __forceinline__ float and_bits(float a, float b) {
  return __uint_as_float(__float_as_uint(a) & __float_as_uint(b));
}
__device__ __forceinline__ double and_bits(double a, double b) {
  return __longlong_as_double(__double_as_longlong(a) & __double_as_longlong(b));
}

// ---- NaN results as x86 makes them ----

__device__ __forceinline__ float quiet(float a) {
  return __uint_as_float(__float_as_uint(a) | 0x00400000u);
}
__device__ __forceinline__ double quiet(double a) {
  return __longlong_as_double(__double_as_longlong(a) | 0x0008000000000000ll);
}
__device__ __forceinline__ float default_nan(float) { return __uint_as_float(0xFFC00000u); }
__device__ __forceinline__ double default_nan(double) {
  return __longlong_as_double(static_cast<long long>(0xFFF8000000000000ull));
}
// r = a op b came out NaN: the NaN x86 would have produced.
template <class F>
__device__ __forceinline__ F x86_nan(F a, F b) {
  if (a != a) return quiet(a);
  if (b != b) return quiet(b);
  return default_nan(a);
}
template <class F>
__device__ __forceinline__ F x86_result(F r, F a, F b) {
  return r == r ? r : x86_nan(a, b);
}

// ---- The operators over Acc ----

struct AddOp {
  __device__ float operator()(float a, float b) const { return x86_result(__fadd_rn(a, b), a, b); }
  __device__ double operator()(double a, double b) const {
    return x86_result(__dadd_rn(a, b), a, b);
  }
  template <class A>
  __device__ A operator()(A a, A b) const {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
};

struct MultiplyOp {
  __device__ float operator()(float a, float b) const { return x86_result(__fmul_rn(a, b), a, b); }
  __device__ double operator()(double a, double b) const {
    return x86_result(__dmul_rn(a, b), a, b);
  }
  template <class A>
  __device__ A operator()(A a, A b) const {
    using U = std::conditional_t<sizeof(A) < sizeof(unsigned), unsigned, std::make_unsigned_t<A>>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  }
};

// First NaN wins; -0 orders below +0.
struct MinOp {
  template <class A>
  __device__ A operator()(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (a != a) return a;
      if (b != b) return b;
      if (a < b) return a;
      if (b < a) return b;
      return or_bits(a, b);
    } else {
      return b < a ? b : a;
    }
  }
};

struct MaxOp {
  template <class A>
  __device__ A operator()(A a, A b) const {
    if constexpr (std::is_floating_point_v<A>) {
      if (a != a) return a;
      if (b != b) return b;
      if (a > b) return a;
      if (b > a) return b;
      return and_bits(a, b);
    } else {
      return a < b ? b : a;
    }
  }
};

// avg's finishing step, a / n for n >= 1 (common/reduce_scalar.h's divide_by).
template <class A>
__device__ __forceinline__ A divide_by(A a, std::size_t n) {
  if constexpr (std::is_same_v<A, float>) {
    return a == a ? __fdiv_rn(a, static_cast<float>(n)) : quiet(a);
  } else if constexpr (std::is_same_v<A, double>) {
    return a == a ? __ddiv_rn(a, static_cast<double>(n)) : quiet(a);
  } else if constexpr (std::is_unsigned_v<A>) {
    return static_cast<A>(static_cast<std::size_t>(a) / n);
  } else {
    using U = std::make_unsigned_t<A>;
    const bool negative = a < 0;
    const U magnitude = negative ? static_cast<U>(U{0} - static_cast<U>(a)) : static_cast<U>(a);
    const auto quotient = static_cast<U>(static_cast<std::uint64_t>(magnitude) / n);
    return static_cast<A>(negative ? static_cast<U>(U{0} - quotient) : quotient);
  }
}

}  // namespace ringsync::cuda::device
