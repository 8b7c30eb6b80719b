// Peer frames (common/peer_wire.cpp): whatever arrives on the control port,
// from a peer daemon or a stranger. A body either fails to decode, or decodes
// to a message that encodes and decodes again to the same frame.
#include "canary.h"
#include "common/peer_wire.h"
#include "frame_round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringsync;
  fuzz::crash_on_canary(data, size);
  fuzz::check_round_trip(
      data, size, [](std::span<const std::uint8_t> body) { return peer_wire::decode(body); },
      [](const peer_wire::Message& m) { return peer_wire::encode(m); });
  return 0;
}
