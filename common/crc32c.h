// CRC-32C (Castagnoli; the checksum of iSCSI, ext4 and RFC 3720): a cheap
// check that memory holds the bytes it should. SSE4.2's crc32 instruction
// where the CPU has it (chosen once, at run time), a lookup table elsewhere;
// both give the same value.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringsync {

// The CRC-32C of `bytes` bytes at `data`, continuing from `crc`, the CRC-32C of
// the bytes before them (0 to start): crc32c(b, crc32c(a)) == crc32c(a + b).
std::uint32_t crc32c(const void* data, std::size_t bytes, std::uint32_t crc = 0);

// The same by lookup table alone (what CPUs without SSE4.2 run), for tests.
std::uint32_t crc32c_portable(const void* data, std::size_t bytes, std::uint32_t crc = 0);

// A checksum of large buffers about three times as fast as crc32c() (the
// instruction's latency, not its throughput, bounds one CRC): the buffer is
// cut into kStripes stripes of equal whole 8-byte words (the last takes the
// rest), each stripe's CRC-32C is computed in one interleaved pass, and the
// result is the CRC-32C of those CRCs (4 bytes each, little-endian, in
// order), continuing from `crc`. Buffers under kStripedMinBytes: crc32c().
inline constexpr std::size_t kStripes = 3;
inline constexpr std::size_t kStripedMinBytes = 4096;
std::uint32_t crc32c_striped(const void* data, std::size_t bytes, std::uint32_t crc = 0);

}  // namespace ringsync
