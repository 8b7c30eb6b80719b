// IEEE binary16 (f16) and bfloat16 (bf16) <-> f32 conversions, bit-exact and portable.
//
// Both directions follow what x86 F16C hardware (vcvtph2ps / vcvtps2ph with
// round-to-nearest-even) does, so scalar and vector kernels agree bit for bit:
// - narrowing rounds to nearest, ties to even; finite values too large for the
//   narrow type become +-inf; subnormals are produced and consumed exactly
//   (no flush to zero);
// - a NaN stays a NaN of the same sign, quieted (the quiet bit is set), keeping
//   as many leading payload bits as the target type holds.
#pragma once

#include <bit>
#include <cstdint>

namespace ringsync {

// f16 -> f32; exact for every non-NaN value.
inline float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  const std::uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F) {  // inf or NaN
    const std::uint32_t nan_bits = mantissa != 0 ? (0x00400000u | (mantissa << 13)) : 0u;
    return std::bit_cast<float>(sign | 0x7F800000u | nan_bits);
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in f32
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// f32 -> f16, round to nearest even.
inline std::uint16_t f32_to_f16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) {  // NaN: quiet, top 9 payload bits kept
    return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
  }
  if (magnitude >= 0x477FF000u) {  // >= 65520 (halfway past the largest f16) or inf
    return static_cast<std::uint16_t>(sign | 0x7C00u);
  }
  if (magnitude >= 0x38800000u) {  // f16 normal range (>= 2^-14): rebias, round 13 bits away
    const std::uint32_t rebased = magnitude - 0x38000000u;
    const std::uint32_t rounded = (rebased + 0x0FFFu + ((rebased >> 13) & 1u)) >> 13;
    return static_cast<std::uint16_t>(sign | rounded);
  }
  // f16 subnormal range: the result counts units of 2^-24.
  const std::uint32_t exponent = magnitude >> 23;
  if (exponent < 102) {  // below 2^-25: rounds to zero (2^-25 itself ties to the even 0)
    return sign;
  }
  const std::uint32_t significand = (magnitude & 0x7FFFFFu) | 0x800000u;
  const std::uint32_t shift = 126u - exponent;  // 14..24
  std::uint32_t units = significand >> shift;
  const std::uint32_t remainder = significand & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1u);
  if (remainder > half || (remainder == half && (units & 1u) != 0)) {
    ++units;  // may carry into the smallest normal, which is the right encoding
  }
  return static_cast<std::uint16_t>(sign | units);
}

// bf16 -> f32; exact for every non-NaN value.
inline float bf16_to_f32(std::uint16_t b) {
  std::uint32_t bits = static_cast<std::uint32_t>(b) << 16;
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    bits |= 0x00400000u;  // quiet a signalling NaN
  }
  return std::bit_cast<float>(bits);
}

// f32 -> bf16, round to nearest even.
inline std::uint16_t f32_to_bf16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {  // NaN: quiet, top payload bits kept
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest even; a carry out of the
  // largest finite value lands on inf, which is the right overflow result.
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace ringsync
