#include "common/half.h"

#include <doctest/doctest.h>
#include <immintrin.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ringsync {
namespace {

std::string hex(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "0x%llx", static_cast<unsigned long long>(value));
  return text;
}

std::uint32_t bits_of(float f) { return std::bit_cast<std::uint32_t>(f); }
float float_of(std::uint32_t bits) { return std::bit_cast<float>(bits); }

bool is_f16_nan(std::uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x03FFu) != 0; }
bool is_bf16_nan(std::uint16_t b) { return (b & 0x7F80u) == 0x7F80u && (b & 0x007Fu) != 0; }

// Value of an f16 pattern from its definition, computed independently in double.
double f16_value(std::uint16_t h) {
  const int exponent = (h >> 10) & 0x1F;
  const int mantissa = h & 0x3FF;
  const double magnitude = exponent == 0 ? std::ldexp(mantissa, -24)
                                         : std::ldexp(1024 + mantissa, exponent - 25);
  return (h & 0x8000u) != 0 ? -magnitude : magnitude;
}

// Magnitudes of non-negative narrow patterns in double; the first pattern past the
// largest finite one stands for the next power of two, where IEEE rounding puts the
// overflow threshold.
double f16_magnitude(std::uint16_t h) { return h >= 0x7C00u ? 65536.0 : f16_value(h); }
double bf16_magnitude(std::uint16_t b) {
  return b >= 0x7F80u ? std::ldexp(1.0, 128) : static_cast<double>(std::bit_cast<float>(
                                                   static_cast<std::uint32_t>(b) << 16));
}

// Round-to-nearest-even of a finite magnitude to a narrow format, decided by comparing
// the distances to the two neighbouring narrow values (independent of half.h).
template <class Magnitude>
std::uint16_t round_by_distance(double x, std::uint16_t below, Magnitude magnitude) {
  const auto above = static_cast<std::uint16_t>(below + 1);
  const double lo = magnitude(below);
  const double hi = magnitude(above);
  if (x - lo < hi - x) return below;
  if (hi - x < x - lo) return above;
  return (below & 1u) == 0 ? below : above;
}

TEST_CASE("f16_to_f32 is exact for every f16 pattern and quiets NaNs") {
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    const float f = f16_to_f32(half);
    if (is_f16_nan(half)) {
      INFO("pattern " << hex(h));
      REQUIRE(std::isnan(f));
      const std::uint32_t expected = (static_cast<std::uint32_t>(h & 0x8000u) << 16) |
                                     0x7FC00000u | ((h & 0x3FFu) << 13);
      REQUIRE(bits_of(f) == expected);
    } else if ((h & 0x7FFFu) == 0x7C00u) {
      REQUIRE(std::isinf(f));
      REQUIRE(std::signbit(f) == ((h & 0x8000u) != 0));
    } else {
      INFO("pattern " << hex(h));
      REQUIRE(static_cast<double>(f) == f16_value(half));
      REQUIRE(std::signbit(f) == ((h & 0x8000u) != 0));  // -0 stays -0
    }
  }
}

TEST_CASE("every f16 pattern round-trips through f32") {
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    const std::uint16_t back = f32_to_f16(f16_to_f32(half));
    INFO("pattern " << hex(h));
    if (is_f16_nan(half)) {
      REQUIRE(back == (half | 0x0200u));  // same sign and payload, quiet bit set
    } else {
      REQUIRE(back == half);
    }
  }
}

TEST_CASE("every bf16 pattern round-trips through f32") {
  for (std::uint32_t b = 0; b <= 0xFFFF; ++b) {
    const auto bf = static_cast<std::uint16_t>(b);
    const float f = bf16_to_f32(bf);
    INFO("pattern " << hex(b));
    if (is_bf16_nan(bf)) {
      REQUIRE(bits_of(f) == ((b << 16) | 0x00400000u));
      REQUIRE(f32_to_bf16(f) == (bf | 0x0040u));
    } else {
      REQUIRE(bits_of(f) == (b << 16));
      REQUIRE(f32_to_bf16(f) == bf);
    }
  }
}

TEST_CASE("f32_to_f16 rounds hand-picked ties to even") {
  struct Case {
    float value;
    std::uint16_t expected;
  };
  const Case cases[] = {
      {1.0f, 0x3C00},
      {1.0f + 0x1p-11f, 0x3C00},          // halfway 1 / 1+2^-10: even is 1
      {1.0f + 3 * 0x1p-11f, 0x3C02},      // halfway 1+2^-10 / 1+2^-9: even is 1+2^-9
      {1.0f + 0x1p-11f + 0x1p-20f, 0x3C01},  // just above halfway rounds up
      {-(1.0f + 0x1p-11f), 0xBC00},
      {65504.0f, 0x7BFF},                 // largest finite f16
      {65519.0f, 0x7BFF},                 // below halfway to 2^16 stays finite
      {65520.0f, 0x7C00},                 // halfway, 0x7BFF is odd: rounds to inf
      {1e10f, 0x7C00},
      {-1e10f, 0xFC00},
      {0x1p-24f, 0x0001},                 // smallest subnormal
      {0x1p-25f, 0x0000},                 // halfway 0 / 2^-24: even is 0
      {0x1.8p-25f, 0x0001},               // above halfway
      {1.5f * 0x1p-24f, 0x0002},          // halfway 1 / 2 units: even is 2
      {2.5f * 0x1p-24f, 0x0002},          // halfway 2 / 3 units: even is 2
      {1023.5f * 0x1p-24f, 0x0400},       // halfway 0x3FF / 0x400: carries into the normals
      {0x1p-14f, 0x0400},                 // smallest normal
      {float_of(0x00000001u), 0x0000},    // f32 subnormal
      {float_of(0x80000000u), 0x8000},    // -0
      {float_of(0x7F800000u), 0x7C00},
      {float_of(0x7F800001u), 0x7E00},    // signalling NaN comes out quiet
      {float_of(0xFFC00000u), 0xFE00},
      {float_of(0x7FFFFFFFu), 0x7FFF},
  };
  for (const Case& c : cases) {
    INFO("value bits " << hex(bits_of(c.value)));
    CHECK(f32_to_f16(c.value) == c.expected);
  }
}

TEST_CASE("f32_to_bf16 rounds hand-picked ties to even") {
  struct Case {
    std::uint32_t bits;
    std::uint16_t expected;
  };
  const Case cases[] = {
      {0x3F808000u, 0x3F80},  // 1 + 2^-8, halfway: even is 1
      {0x3F818000u, 0x3F82},  // halfway above the odd 0x3F81: rounds up
      {0x3F808001u, 0x3F81},  // just above halfway
      {0x3F807FFFu, 0x3F80},  // just below halfway
      {0xBF808000u, 0xBF80},
      {0x7F7F7FFFu, 0x7F7F},  // largest finite stays finite
      {0x7F7F8000u, 0x7F80},  // halfway above the odd largest finite: inf
      {0x7F7FFFFFu, 0x7F80},  // FLT_MAX -> inf
      {0x00008000u, 0x0000},  // subnormal halfway: even is 0
      {0x00018000u, 0x0002},  // subnormal halfway above odd: rounds up
      {0x80000000u, 0x8000},
      {0x7F800000u, 0x7F80},
      {0xFF800000u, 0xFF80},
      {0x7F800001u, 0x7FC0},  // signalling NaN, payload only in low bits: still NaN
      {0xFF810000u, 0xFFC1},
  };
  for (const Case& c : cases) {
    INFO("value bits " << hex(c.bits));
    CHECK(f32_to_bf16(float_of(c.bits)) == c.expected);
  }
}

TEST_CASE("narrowing matches nearest-even by distance across sampled f32 patterns") {
  // A stride coprime with 2^32 visits every exponent and many mantissa tails.
  for (std::uint64_t n = 0; n < (1ull << 32); n += 65521) {
    const auto bits = static_cast<std::uint32_t>(n);
    const float f = float_of(bits);
    if (std::isnan(f)) continue;
    INFO("value bits " << hex(bits));
    const auto sign16 = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
    const double magnitude = std::fabs(static_cast<double>(f));
    if (std::isinf(f)) {
      REQUIRE(f32_to_bf16(f) == (sign16 | 0x7F80u));
      REQUIRE(f32_to_f16(f) == (sign16 | 0x7C00u));
      continue;
    }
    // bf16: the truncated pattern is the neighbour below.
    const auto bf_below = static_cast<std::uint16_t>((bits >> 16) & 0x7FFFu);
    REQUIRE(f32_to_bf16(f) == (sign16 | round_by_distance(magnitude, bf_below, bf16_magnitude)));
    // f16: the largest finite magnitude not above |f|, by binary search over patterns.
    std::uint16_t below = 0;
    for (int bit = 14; bit >= 0; --bit) {
      const auto candidate = static_cast<std::uint16_t>(below | (1u << bit));
      if (candidate < 0x7C00u && f16_value(candidate) <= magnitude) below = candidate;
    }
    const std::uint16_t expected =
        magnitude >= 65536.0 ? 0x7C00 : round_by_distance(magnitude, below, f16_magnitude);
    REQUIRE(f32_to_f16(f) == (sign16 | expected));
  }
}

__attribute__((target("f16c"))) std::uint16_t hardware_f32_to_f16(float f) {
  return static_cast<std::uint16_t>(
      _mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(f), _MM_FROUND_TO_NEAREST_INT), 0));
}
__attribute__((target("f16c"))) float hardware_f16_to_f32(std::uint16_t h) {
  return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h)));
}

TEST_CASE("f16 conversions agree with F16C hardware bit for bit") {
  if (!__builtin_cpu_supports("f16c")) {
    MESSAGE("this CPU has no F16C; the hardware comparison is skipped");
    return;
  }
  for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
    INFO("pattern " << hex(h));
    REQUIRE(bits_of(f16_to_f32(static_cast<std::uint16_t>(h))) ==
            bits_of(hardware_f16_to_f32(static_cast<std::uint16_t>(h))));
  }
  std::uint64_t mismatches = 0;
  std::uint32_t first_mismatch = 0;
  for (std::uint64_t n = 0; n < (1ull << 32); n += 251) {  // every exponent, many tails
    const float f = float_of(static_cast<std::uint32_t>(n));
    if (f32_to_f16(f) != hardware_f32_to_f16(f) && mismatches++ == 0) {
      first_mismatch = static_cast<std::uint32_t>(n);
    }
  }
  INFO("first mismatching f32 bits " << hex(first_mismatch));
  CHECK(mismatches == 0);
}

}  // namespace
}  // namespace ringsync
