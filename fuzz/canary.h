// Every harness first checks for this input and crashes on it, on purpose,
// when RINGSYNC_FUZZ_CANARY=1 is set: the fuzz tests run each harness on it
// so and expect a failure, which shows that a crash inside a harness does fail
// its run (a harness that cannot fail would prove nothing). Off by default:
// libFuzzer's comparison tracing finds the string in milliseconds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace ringsync::fuzz {

inline constexpr char kCanary[] = "ringsync-fuzz-canary";

inline void crash_on_canary(const std::uint8_t* data, std::size_t size) {
  static const bool armed = [] {
    const char* v = std::getenv("RINGSYNC_FUZZ_CANARY");
    return v != nullptr && v[0] == '1';
  }();
  if (armed && size == sizeof(kCanary) - 1 && std::memcmp(data, kCanary, size) == 0) std::abort();
}

// A property the decoder promised does not hold: crash, so libFuzzer keeps the input.
inline void require(bool property) {
  if (!property) std::abort();
}

}  // namespace ringsync::fuzz
