#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <string_view>
#include <vector>

#include "common/crc32c.h"

namespace test_common_crc32c {

using ringsync::crc32c;
using ringsync::crc32c_portable;

namespace {

std::vector<unsigned char> bytes_of(std::size_t n, unsigned char value) { return std::vector<unsigned char>(n, value); }

}  // namespace

TEST_CASE("integrity: crc32c matches the published check values") {
  const std::string_view digits = "123456789";
  CHECK(crc32c(digits.data(), digits.size()) == 0xE3069283u);  // the CRC catalogue's check value
  CHECK(crc32c(nullptr, 0) == 0u);
  // RFC 3720, B.4.
  CHECK(crc32c(bytes_of(32, 0x00).data(), 32) == 0x8A9136AAu);
  CHECK(crc32c(bytes_of(32, 0xFF).data(), 32) == 0x62A8AB43u);
  std::vector<unsigned char> up(32), down(32);
  std::iota(up.begin(), up.end(), 0);
  for (std::size_t i = 0; i < 32; ++i) down[i] = static_cast<unsigned char>(31 - i);
  CHECK(crc32c(up.data(), 32) == 0x46DD794Eu);
  CHECK(crc32c(down.data(), 32) == 0x113FDB5Cu);
}

TEST_CASE("integrity: crc32c continues across pieces and agrees with the table at every length") {
  std::mt19937 gen(7);
  std::vector<unsigned char> data(4099);
  for (auto& b : data) b = static_cast<unsigned char>(gen());
  for (std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{9},
                        std::size_t{63}, std::size_t{4099}}) {
    CAPTURE(n);
    CHECK(crc32c(data.data(), n) == crc32c_portable(data.data(), n));
    for (std::size_t cut : {std::size_t{0}, n / 3, n}) {
      CAPTURE(cut);
      CHECK(crc32c(data.data() + cut, n - cut, crc32c(data.data(), cut)) == crc32c(data.data(), n));
    }
  }
}

TEST_CASE("integrity: crc32c sees a single flipped bit anywhere") {
  std::vector<unsigned char> data(1000, 0x5A);
  const std::uint32_t clean = crc32c(data.data(), data.size());
  for (std::size_t byte : {std::size_t{0}, std::size_t{499}, std::size_t{999}}) {
    for (int bit = 0; bit < 8; bit += 3) {
      data[byte] ^= static_cast<unsigned char>(1u << bit);
      CHECK(crc32c(data.data(), data.size()) != clean);
      data[byte] ^= static_cast<unsigned char>(1u << bit);
    }
  }
}

TEST_CASE("integrity: crc32c_striped is the CRC of its stripes' CRCs, and sees a flipped bit in any stripe") {
  using ringsync::crc32c_striped;
  using ringsync::kStripedMinBytes;
  std::mt19937 gen(11);
  for (std::size_t n : {std::size_t{0}, std::size_t{100}, kStripedMinBytes - 1, kStripedMinBytes,
                        kStripedMinBytes + 5, std::size_t{1000003}}) {
    CAPTURE(n);
    std::vector<unsigned char> data(n);
    for (auto& b : data) b = static_cast<unsigned char>(gen());
    const std::uint32_t seed = 0x1234u;
    std::uint32_t want = crc32c_portable(data.data(), n, seed);
    if (n >= kStripedMinBytes) {
      const std::size_t stripe = n / 3 / 8 * 8;
      const std::uint32_t parts[3] = {crc32c_portable(data.data(), stripe),
                                      crc32c_portable(data.data() + stripe, stripe),
                                      crc32c_portable(data.data() + 2 * stripe, n - 2 * stripe)};
      unsigned char packed[12];
      for (int s = 0; s < 3; ++s)
        for (int b = 0; b < 4; ++b) packed[4 * s + b] = static_cast<unsigned char>(parts[s] >> (8 * b));
      want = crc32c_portable(packed, sizeof packed, seed);
    }
    CHECK(crc32c_striped(data.data(), n, seed) == want);
    if (n == 0) continue;
    for (std::size_t at : {std::size_t{0}, n / 2, n - 1}) {
      data[at] ^= 0x40;
      CHECK(crc32c_striped(data.data(), n, seed) != want);
      data[at] ^= 0x40;
    }
  }
}

}  // namespace test_common_crc32c
