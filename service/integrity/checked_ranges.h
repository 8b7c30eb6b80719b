// Which bytes of a result the check reads, and their digest.
//
// all: every byte. sample: kSampleWindows windows of kSampleWindowBytes, one
// in each of kSampleWindows equal strata of the result, at an offset within
// its stratum drawn from the collective's sequence number alone. Every node
// knows the sequence and the result's size, so they all read the same bytes
// without talking, while over a training run's collectives the windows move
// across the whole buffer (a fused buffer's every tensor included): a fault
// that keeps corrupting one place is met sooner or later. A result no larger
// than the windows together is read whole.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "service/integrity/verify_results.h"

namespace ringsync::service::integrity {

inline constexpr std::size_t kSampleWindows = 16;
inline constexpr std::size_t kSampleWindowBytes = 4096;

// Bytes [begin, begin + bytes) of a result.
struct ByteRange {
  std::size_t begin = 0;
  std::size_t bytes = 0;
  bool operator==(const ByteRange&) const = default;
};

// The ranges of a result of `result_bytes` that `mode` reads for the
// collective `sequence`: ascending, disjoint; none for off or an empty result.
std::vector<ByteRange> checked_ranges(VerifyResults mode, std::size_t result_bytes, std::uint32_t sequence);

// A CRC-32C digest of the ranges' bytes, in order (crc32c_striped over each,
// each continuing from the one before).
std::uint32_t result_digest(const std::byte* result, const std::vector<ByteRange>& ranges);

}  // namespace ringsync::service::integrity
