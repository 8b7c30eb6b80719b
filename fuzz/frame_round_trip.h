// The property both frame harnesses check: a body either fails to decode, or
// decodes to a message that encodes and decodes again to the same frame.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "canary.h"
#include "common/wire.h"

namespace ringsync::fuzz {

// Decode: Result<Message>(std::span<const std::uint8_t>); Encode: frame of a Message.
template <typename Decode, typename Encode>
void check_round_trip(const std::uint8_t* data, std::size_t size, Decode decode, Encode encode) {
  std::vector<std::uint64_t> storage;
  auto message = decode(wire::aligned(std::span<const std::uint8_t>(data, size), storage));
  if (!message.ok()) return;
  const std::vector<std::uint8_t> frame = encode(*message);
  require(frame.size() >= wire::kFrameHeaderBytes);
  std::span<const std::uint8_t> body(frame.data() + wire::kFrameHeaderBytes, frame.size() - wire::kFrameHeaderBytes);
  std::vector<std::uint64_t> again_storage;
  auto again = decode(wire::aligned(body, again_storage));
  require(again.ok());
  require(encode(*again) == frame);
}

}  // namespace ringsync::fuzz
