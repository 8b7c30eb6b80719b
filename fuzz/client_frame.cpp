// Client frames (common/wire.cpp): whatever a trainer's socket or channel
// delivers. A body either fails to decode, or decodes to a message that
// encodes and decodes again to the same frame.
#include "canary.h"
#include "common/wire.h"
#include "frame_round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringsync;
  fuzz::crash_on_canary(data, size);
  fuzz::check_round_trip(
      data, size, [](std::span<const std::uint8_t> body) { return wire::decode(body); },
      [](const wire::Message& m) { return wire::encode(m); });
  return 0;
}
