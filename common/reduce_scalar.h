// Element-level semantics of the reduction kernels (see common/reduce.h), one scalar
// at a time. The reference loops, the portable kernel and the vector kernels' tails
// are built from these functions, so there is one definition of every rule.
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "common/dtype.h"
#include "common/half.h"

namespace ringsync::reduce::detail {

// Stored: the element type in memory. Acc: the type the fold runs in.
template <DType D>
struct Element;

template <>
struct Element<DType::kF32> {
  using Stored = float;
  using Acc = float;
  static Acc widen(Stored v) { return v; }
  static Stored narrow(Acc a) { return a; }
};
template <>
struct Element<DType::kF64> {
  using Stored = double;
  using Acc = double;
  static Acc widen(Stored v) { return v; }
  static Stored narrow(Acc a) { return a; }
};
template <>
struct Element<DType::kF16> {
  using Stored = std::uint16_t;
  using Acc = float;
  static Acc widen(Stored v) { return f16_to_f32(v); }
  static Stored narrow(Acc a) { return f32_to_f16(a); }
};
template <>
struct Element<DType::kBF16> {
  using Stored = std::uint16_t;
  using Acc = float;
  static Acc widen(Stored v) { return bf16_to_f32(v); }
  static Stored narrow(Acc a) { return f32_to_bf16(a); }
};
template <>
struct Element<DType::kI32> {
  using Stored = std::int32_t;
  using Acc = std::int32_t;
  static Acc widen(Stored v) { return v; }
  static Stored narrow(Acc a) { return a; }
};
template <>
struct Element<DType::kI64> {
  using Stored = std::int64_t;
  using Acc = std::int64_t;
  static Acc widen(Stored v) { return v; }
  static Stored narrow(Acc a) { return a; }
};
template <>
struct Element<DType::kU8> {
  using Stored = std::uint8_t;
  using Acc = std::uint8_t;
  static Acc widen(Stored v) { return v; }
  static Stored narrow(Acc a) { return a; }
};

// Unaligned element access: buffers carry no alignment promise.
template <class T>
inline T load_element(const void* base, std::size_t i) {
  T v;
  std::memcpy(&v, static_cast<const unsigned char*>(base) + i * sizeof(T), sizeof(T));
  return v;
}
template <class T>
inline void store_element(void* base, std::size_t i, T v) {
  std::memcpy(static_cast<unsigned char*>(base) + i * sizeof(T), &v, sizeof(T));
}

// ---- sum and prod: IEEE for floats, wrapping for integers ----
template <class A>
inline A add(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    return a + b;
  } else {
    using U = std::make_unsigned_t<A>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b)));
  }
}
template <class A>
inline A multiply(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    return a * b;
  } else {
    // uint8_t would promote to int (255 * 255 still fits); wider types multiply unsigned.
    using U = std::conditional_t<sizeof(A) < sizeof(unsigned), unsigned, std::make_unsigned_t<A>>;
    return static_cast<A>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b)));
  }
}

// ---- min and max: first NaN wins; -0 orders below +0 ----
template <class F>
using FloatBits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;

template <class A>
inline A minimum(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a < b) return a;
    if (b < a) return b;
    // Equal: identical bits, or +0 and -0, whose OR is -0.
    return std::bit_cast<A>(std::bit_cast<FloatBits<A>>(a) | std::bit_cast<FloatBits<A>>(b));
  } else {
    return b < a ? b : a;
  }
}
template <class A>
inline A maximum(A a, A b) {
  if constexpr (std::is_floating_point_v<A>) {
    if (std::isnan(a)) return a;
    if (std::isnan(b)) return b;
    if (a > b) return a;
    if (b > a) return b;
    // Equal: identical bits, or +0 and -0, whose AND is +0.
    return std::bit_cast<A>(std::bit_cast<FloatBits<A>>(a) & std::bit_cast<FloatBits<A>>(b));
  } else {
    return a < b ? b : a;
  }
}

// ---- avg's finishing step: a / n with divisor n >= 1 ----
// Floats divide in their own type by n converted to it. Integers truncate toward zero;
// signed values divide their magnitude, so INT_MIN and divisors past INT_MAX are exact.
template <class A>
inline A divide_by(A a, std::size_t n) {
  if constexpr (std::is_floating_point_v<A>) {
    return a / static_cast<A>(n);
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

// The op as a function object over the accumulation type; avg folds like sum.
struct AddOp {
  template <class A>
  A operator()(A a, A b) const { return add(a, b); }
};
struct MultiplyOp {
  template <class A>
  A operator()(A a, A b) const { return multiply(a, b); }
};
struct MinOp {
  template <class A>
  A operator()(A a, A b) const { return minimum(a, b); }
};
struct MaxOp {
  template <class A>
  A operator()(A a, A b) const { return maximum(a, b); }
};

// Calls fn(Element<D>{}) for the runtime dtype (valid dtypes only).
template <class Fn>
inline void visit_dtype(DType dtype, Fn&& fn) {
  switch (dtype) {
    case DType::kF32: fn(Element<DType::kF32>{}); return;
    case DType::kF64: fn(Element<DType::kF64>{}); return;
    case DType::kF16: fn(Element<DType::kF16>{}); return;
    case DType::kBF16: fn(Element<DType::kBF16>{}); return;
    case DType::kI32: fn(Element<DType::kI32>{}); return;
    case DType::kI64: fn(Element<DType::kI64>{}); return;
    case DType::kU8: fn(Element<DType::kU8>{}); return;
  }
}

// Calls fn(op_object, is_avg) for the runtime op (valid ops only).
template <class Fn>
inline void visit_op(ReduceOp op, Fn&& fn) {
  switch (op) {
    case ReduceOp::kSum: fn(AddOp{}, false); return;
    case ReduceOp::kAvg: fn(AddOp{}, true); return;
    case ReduceOp::kMin: fn(MinOp{}, false); return;
    case ReduceOp::kMax: fn(MaxOp{}, false); return;
    case ReduceOp::kProd: fn(MultiplyOp{}, false); return;
  }
}

}  // namespace ringsync::reduce::detail
