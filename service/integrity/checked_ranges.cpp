#include "service/integrity/checked_ranges.h"

#include "common/crc32c.h"

namespace ringsync::service::integrity {

namespace {

// SplitMix64's finalizer: well-mixed offsets from consecutive inputs.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

}  // namespace

std::vector<ByteRange> checked_ranges(VerifyResults mode, std::size_t result_bytes, std::uint32_t sequence) {
  if (mode == VerifyResults::kOff || result_bytes == 0) return {};
  if (mode == VerifyResults::kAll || result_bytes <= kSampleWindows * kSampleWindowBytes)
    return {{0, result_bytes}};
  std::vector<ByteRange> ranges;
  ranges.reserve(kSampleWindows);
  for (std::size_t i = 0; i < kSampleWindows; ++i) {
    // Stratum i is [i*B/W, (i+1)*B/W): at least one window long, since B > W * window.
    const std::size_t begin = i * result_bytes / kSampleWindows;
    const std::size_t end = (i + 1) * result_bytes / kSampleWindows;
    const std::size_t slack = end - begin - kSampleWindowBytes;
    const std::uint64_t draw = mix((static_cast<std::uint64_t>(sequence) << 8) | i);
    ranges.push_back({begin + static_cast<std::size_t>(draw % (slack + 1)), kSampleWindowBytes});
  }
  return ranges;
}

std::uint32_t result_digest(const std::byte* result, const std::vector<ByteRange>& ranges) {
  std::uint32_t crc = 0;
  for (const ByteRange& r : ranges) crc = crc32c_striped(result + r.begin, r.bytes, crc);
  return crc;
}

}  // namespace ringsync::service::integrity
