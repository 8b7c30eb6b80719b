// Peer frames (common/peer_wire.cpp): whatever arrives on the control port,
// from a peer daemon or a stranger. A body either fails to decode, or decodes
// to a message that encodes and decodes again to the same frame.
#include <span>

#include "canary.h"
#include "common/peer_wire.h"
#include "common/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringsync;
  fuzz::crash_on_canary(data, size);
  std::vector<std::uint64_t> storage;
  auto message = peer_wire::decode(wire::aligned(std::span<const std::uint8_t>(data, size), storage));
  if (!message.ok()) return 0;
  const std::vector<std::uint8_t> frame = peer_wire::encode(*message);
  fuzz::require(frame.size() >= wire::kFrameHeaderBytes);
  std::span<const std::uint8_t> body(frame.data() + wire::kFrameHeaderBytes, frame.size() - wire::kFrameHeaderBytes);
  std::vector<std::uint64_t> again_storage;
  auto again = peer_wire::decode(wire::aligned(body, again_storage));
  fuzz::require(again.ok());
  fuzz::require(peer_wire::encode(*again) == frame);
  return 0;
}
