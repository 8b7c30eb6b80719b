#include "common/crc32c.h"

#include <array>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace ringsync {

namespace {

// The reflected Castagnoli polynomial 0x1EDC6F41.
constexpr std::uint32_t kPolynomial = 0x82F63B78u;

constexpr std::array<std::uint32_t, 256> make_table() {
  std::array<std::uint32_t, 256> table{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ kPolynomial : c >> 1;
    table[i] = c;
  }
  return table;
}

constexpr std::array<std::uint32_t, 256> kTable = make_table();

// Both take and return the register as the algorithm keeps it (inverted).
std::uint32_t by_table(const unsigned char* p, std::size_t n, std::uint32_t c) {
  while (n-- > 0) c = kTable[(c ^ *p++) & 0xffu] ^ (c >> 8);
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) std::uint32_t by_instruction(const unsigned char* p, std::size_t n,
                                                               std::uint32_t c) {
  std::uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    std::uint64_t word;
    std::memcpy(&word, p, sizeof word);
    c64 = _mm_crc32_u64(c64, word);
  }
  auto c32 = static_cast<std::uint32_t>(c64);
  while (n-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return c32;
}

// The three stripes' registers (inverted), advanced together.
__attribute__((target("sse4.2"))) void three_by_instruction(const unsigned char* p, std::size_t stripe_bytes,
                                                            std::uint32_t* c) {
  std::uint64_t c0 = c[0], c1 = c[1], c2 = c[2];
  const unsigned char* p1 = p + stripe_bytes;
  const unsigned char* p2 = p + 2 * stripe_bytes;
  for (std::size_t i = 0; i < stripe_bytes; i += 8) {
    std::uint64_t w0, w1, w2;
    std::memcpy(&w0, p + i, 8);
    std::memcpy(&w1, p1 + i, 8);
    std::memcpy(&w2, p2 + i, 8);
    c0 = _mm_crc32_u64(c0, w0);
    c1 = _mm_crc32_u64(c1, w1);
    c2 = _mm_crc32_u64(c2, w2);
  }
  c[0] = static_cast<std::uint32_t>(c0);
  c[1] = static_cast<std::uint32_t>(c1);
  c[2] = static_cast<std::uint32_t>(c2);
}

bool has_instruction() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}
#endif

}  // namespace

std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc) {
  const auto* p = static_cast<const unsigned char*>(data);
#if defined(__x86_64__)
  if (has_instruction()) return ~by_instruction(p, bytes, ~crc);
#endif
  return ~by_table(p, bytes, ~crc);
}

std::uint32_t crc32c_striped(const void* data, std::size_t bytes, std::uint32_t crc) {
  static_assert(kStripes == 3, "the interleaved pass advances three registers");
  if (bytes < kStripedMinBytes) return crc32c(data, bytes, crc);
  const auto* p = static_cast<const unsigned char*>(data);
  const std::size_t stripe = bytes / kStripes / 8 * 8;
  std::uint32_t stripes[kStripes];
#if defined(__x86_64__)
  if (has_instruction()) {
    std::uint32_t c[kStripes] = {~0u, ~0u, ~0u};
    three_by_instruction(p, stripe, c);
    c[2] = by_instruction(p + kStripes * stripe, bytes - kStripes * stripe, c[2]);  // the last stripe's rest
    for (std::size_t s = 0; s < kStripes; ++s) stripes[s] = ~c[s];
  } else
#endif
  {
    for (std::size_t s = 0; s + 1 < kStripes; ++s) stripes[s] = crc32c(p + s * stripe, stripe);
    stripes[kStripes - 1] = crc32c(p + (kStripes - 1) * stripe, bytes - (kStripes - 1) * stripe);
  }
  unsigned char packed[4 * kStripes];
  for (std::size_t s = 0; s < kStripes; ++s)
    for (std::size_t b = 0; b < 4; ++b) packed[4 * s + b] = static_cast<unsigned char>(stripes[s] >> (8 * b));
  return crc32c(packed, sizeof packed, crc);
}

std::uint32_t crc32c_portable(const void* data, std::size_t bytes, std::uint32_t crc) {
  return ~by_table(static_cast<const unsigned char*>(data), bytes, ~crc);
}

}  // namespace ringsync
