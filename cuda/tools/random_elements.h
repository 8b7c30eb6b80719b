// Random element data for the device checks: mostly ordinary values, with the
// special ones (NaN with payloads, signalling NaN, infinities, signed zeros,
// subnormals, values whose sum overflows the type) sprinkled in, because those are
// where a kernel and the reference part ways. Integers cover the full range, so sums
// and products wrap.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/dtype.h"
#include "common/half.h"

namespace ringsync::cuda::tools {

class RandomElements {
 public:
  explicit RandomElements(std::uint64_t seed) : rng_(seed) {}

  // `count` elements of `dtype` as bytes. For prod, ordinary values stay near 1 in
  // magnitude so that long products neither vanish nor overflow everywhere.
  std::vector<std::byte> fill(DType dtype, std::size_t count, ReduceOp op) {
    std::vector<std::byte> out(count * dtype_size(dtype));
    for (std::size_t i = 0; i < count; ++i) {
      std::byte* at = out.data() + i * dtype_size(dtype);
      switch (dtype) {
        case DType::kF32: store(at, real<float>(op)); break;
        case DType::kF64: store(at, real<double>(op)); break;
        case DType::kF16: store(at, half(op)); break;
        case DType::kBF16: store(at, bfloat(op)); break;
        case DType::kI32: store(at, static_cast<std::int32_t>(rng_())); break;
        case DType::kI64: store(at, static_cast<std::int64_t>(rng_())); break;
        case DType::kU8: store(at, static_cast<std::uint8_t>(rng_())); break;
      }
    }
    return out;
  }

 private:
  template <class T>
  static void store(std::byte* at, T v) {
    std::memcpy(at, &v, sizeof(T));
  }

  bool special() { return rng_() % 64 == 0; }  // ~1.5% of elements

  double ordinary(ReduceOp op) {
    std::uniform_real_distribution<double> any(-2.0, 2.0);
    std::uniform_real_distribution<double> near_one(0.5, 2.0);
    if (op != ReduceOp::kProd) return any(rng_);
    return (rng_() & 1 ? -1.0 : 1.0) * near_one(rng_);
  }

  template <class F>
  F real(ReduceOp op) {
    if (!special()) return static_cast<F>(ordinary(op));
    using Bits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
    constexpr int kMantissa = std::numeric_limits<F>::digits - 1;
    const Bits exponent_all = ((Bits{1} << (sizeof(F) * 8 - 1 - kMantissa)) - 1) << kMantissa;
    const Bits sign = (rng_() & 1) ? Bits{1} << (sizeof(F) * 8 - 1) : 0;
    const Bits payload = static_cast<Bits>(rng_()) & ((Bits{1} << (kMantissa - 1)) - 1);
    switch (rng_() % 7) {
      case 0: return std::bit_cast<F>(sign | exponent_all | (Bits{1} << (kMantissa - 1)) | payload);
      case 1: return std::bit_cast<F>(sign | exponent_all | (payload | 1));  // signalling NaN
      case 2: return std::bit_cast<F>(sign | exponent_all);                  // +-inf
      case 3: return std::bit_cast<F>(sign);                                 // +-0
      case 4: return std::bit_cast<F>(sign | (payload | 1));                 // subnormal
      case 5: return std::bit_cast<F>(sign | (exponent_all - (Bits{1} << kMantissa)));  // huge
      default: return std::numeric_limits<F>::denorm_min();
    }
  }

  std::uint16_t half(ReduceOp op) {
    if (!special()) return f32_to_f16(static_cast<float>(ordinary(op)));
    const std::uint16_t sign = (rng_() & 1) ? 0x8000 : 0;
    const auto payload = static_cast<std::uint16_t>(rng_() & 0x1FF);
    switch (rng_() % 6) {
      case 0: return sign | 0x7E00 | payload;        // quiet NaN
      case 1: return sign | 0x7C00 | (payload | 1);  // signalling NaN
      case 2: return sign | 0x7C00;                  // +-inf
      case 3: return sign;                           // +-0
      case 4: return sign | (payload | 1);           // subnormal
      default: return sign | 0x7BFF;                 // 65504: two of them overflow
    }
  }

  std::uint16_t bfloat(ReduceOp op) {
    if (!special()) return f32_to_bf16(static_cast<float>(ordinary(op)));
    const std::uint16_t sign = (rng_() & 1) ? 0x8000 : 0;
    const auto payload = static_cast<std::uint16_t>(rng_() & 0x3F);
    switch (rng_() % 6) {
      case 0: return sign | 0x7FC0 | payload;        // quiet NaN
      case 1: return sign | 0x7F80 | (payload | 1);  // signalling NaN
      case 2: return sign | 0x7F80;                  // +-inf
      case 3: return sign;                           // +-0
      case 4: return sign | (payload | 1);           // subnormal
      default: return sign | 0x7F7F;                 // largest finite
    }
  }

  std::mt19937_64 rng_;
};

}  // namespace ringsync::cuda::tools
