#include <doctest/doctest.h>

#include <cstdint>
#include <numeric>
#include <random>
#include <string_view>
#include <vector>

#include "common/crc32c.h"

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
