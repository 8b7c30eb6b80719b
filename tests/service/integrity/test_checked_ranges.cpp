#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <set>
#include <vector>

#include "service/integrity/checked_ranges.h"

namespace test_service_integrity_checked_ranges {

using namespace ringsync::service::integrity;

namespace {

constexpr std::size_t MiB = 1024 * 1024;

}  // namespace

TEST_CASE("integrity: off and empty results read nothing, all and small results read everything") {
  CHECK(checked_ranges(VerifyResults::kOff, 64 * MiB, 3).empty());
  CHECK(checked_ranges(VerifyResults::kAll, 0, 3).empty());
  CHECK(checked_ranges(VerifyResults::kSample, 0, 3).empty());
  CHECK(checked_ranges(VerifyResults::kAll, 64 * MiB + 3, 3) == std::vector<ByteRange>{{0, 64 * MiB + 3}});
  const std::size_t windows = kSampleWindows * kSampleWindowBytes;
  CHECK(checked_ranges(VerifyResults::kSample, 7, 3) == std::vector<ByteRange>{{0, 7}});
  CHECK(checked_ranges(VerifyResults::kSample, windows, 3) == std::vector<ByteRange>{{0, windows}});
}

TEST_CASE("integrity: the sample is one window per stratum, the same on every node, and moves per collective") {
  for (std::size_t bytes : {kSampleWindows * kSampleWindowBytes + 1, 3 * MiB + 11, 64 * MiB}) {
    CAPTURE(bytes);
    std::set<std::size_t> first_offsets;
    for (std::uint32_t sequence : {0u, 1u, 2u, 77u, 4000000000u}) {
      CAPTURE(sequence);
      const auto ranges = checked_ranges(VerifyResults::kSample, bytes, sequence);
      // Every node computes it from (bytes, sequence) alone: the same ranges again.
      CHECK(ranges == checked_ranges(VerifyResults::kSample, bytes, sequence));
      REQUIRE(ranges.size() == kSampleWindows);
      for (std::size_t i = 0; i < ranges.size(); ++i) {
        CHECK(ranges[i].bytes == kSampleWindowBytes);
        CHECK(ranges[i].begin >= i * bytes / kSampleWindows);
        CHECK(ranges[i].begin + ranges[i].bytes <= (i + 1) * bytes / kSampleWindows);
      }
      first_offsets.insert(ranges.front().begin);
    }
    if (bytes > 2 * kSampleWindows * kSampleWindowBytes) CHECK(first_offsets.size() > 1);
  }
  // Reading 64 KiB of 64 MiB: 0.1 % of the bytes.
  std::size_t read = 0;
  for (const auto& r : checked_ranges(VerifyResults::kSample, 64 * MiB, 9)) read += r.bytes;
  CHECK(read * 1000 <= 64 * MiB);
}

TEST_CASE("integrity: over many collectives the sample reaches every part of the result") {
  const std::size_t bytes = 1 * MiB;  // strata of 64 KiB
  std::vector<bool> met(bytes / kSampleWindowBytes, false);
  for (std::uint32_t sequence = 0; sequence < 1000; ++sequence)
    for (const auto& r : checked_ranges(VerifyResults::kSample, bytes, sequence))
      for (std::size_t b = r.begin / kSampleWindowBytes; b * kSampleWindowBytes < r.begin + r.bytes; ++b) met[b] = true;
  for (std::size_t b = 0; b < met.size(); ++b) {
    CAPTURE(b);
    CHECK(met[b]);
  }
}

TEST_CASE("integrity: the digest covers the checked bytes, in order, and nothing else") {
  std::vector<std::byte> result(3 * MiB + 11);
  for (std::size_t i = 0; i < result.size(); ++i) result[i] = static_cast<std::byte>(i * 131 + 7);
  const auto ranges = checked_ranges(VerifyResults::kSample, result.size(), 5);
  const std::uint32_t digest = result_digest(result.data(), ranges);
  // Only the checked bytes count: another buffer holding them, and junk elsewhere, has the same digest.
  std::vector<std::byte> other(result.size(), std::byte{0xEE});
  for (const auto& r : ranges) std::copy(result.begin() + r.begin, result.begin() + r.begin + r.bytes, other.begin() + r.begin);
  CHECK(result_digest(other.data(), ranges) == digest);
  CHECK(result_digest(other.data(), checked_ranges(VerifyResults::kAll, other.size(), 5)) !=
        result_digest(result.data(), checked_ranges(VerifyResults::kAll, result.size(), 5)));

  result[ranges[3].begin + 100] ^= std::byte{1};  // inside a window: seen
  CHECK(result_digest(result.data(), ranges) != digest);
  result[ranges[3].begin + 100] ^= std::byte{1};
  result[ranges[3].begin - 1] ^= std::byte{1};  // between windows: sample misses it, all sees it
  CHECK(result_digest(result.data(), ranges) == digest);
  const auto everything = checked_ranges(VerifyResults::kAll, result.size(), 5);
  result[ranges[3].begin - 1] ^= std::byte{1};
  const std::uint32_t whole = result_digest(result.data(), everything);
  result[ranges[3].begin - 1] ^= std::byte{1};
  CHECK(result_digest(result.data(), everything) != whole);
}

}  // namespace test_service_integrity_checked_ranges
