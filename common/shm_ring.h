// A single-producer single-consumer ring of wire frames in shared memory: the
// trainer <-> daemon channel's two directions (common/shm_channel.h).
//
// Each side keeps its own position privately and only publishes it; the
// other's position is read from shared memory and checked, so a peer that
// scribbles over the ring gets kCorrupt, never an out-of-bounds access.
// Records are the wire frame (4-byte length, body) padded to 8 bytes and never
// split: a frame that does not fit before the end, or any frame once the ring
// is empty past kLowWater, starts over at offset 0 behind a wrap marker, so a
// ring of small frames touches only its first pages.
//
// Sleeping without losing a wake-up (both flags are Dekker-style: store, full
// fence, load): a consumer about to block sets `sleeping`, then checks the ring
// once more; a producer publishes, then rings the doorbell (a byte on the
// socket) only when it sees `sleeping`. A producer facing a full ring sets
// `waiting` the same way and the consumer rings for it after making room.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>

#include "common/status.h"

namespace ringsync::shm {

// The shared part of one ring; each field on its own cache line.
struct RingControl {
  alignas(64) std::uint64_t tail;      // producer's position (bytes ever written)
  alignas(64) std::uint64_t head;      // consumer's position
  alignas(64) std::uint32_t sleeping;  // the consumer is about to block on the socket
  alignas(64) std::uint32_t waiting;   // the producer waits for room
};

class ShmRing {
 public:
  // Data bytes of a ring: room for a largest frame (wire::kMaxFrameBytes) and kLowWater.
  static constexpr std::size_t kCapacity = std::size_t{2} << 20;
  // An empty ring past this offset starts over at 0 (keeps the touched pages few).
  static constexpr std::size_t kLowWater = 64 * 1024;

  ShmRing() = default;
  // `data` holds kCapacity bytes; both live as long as this object.
  ShmRing(RingControl* control, std::byte* data) : control_(control), data_(data) {}

  enum class Push { kDone, kFull, kTooLarge, kCorrupt };
  // Producer: appends one whole frame (header included). kFull: no room now,
  // try again after the consumer moved; kTooLarge: no ring takes a frame this
  // large (above wire::kMaxFrameBytes); kCorrupt: the consumer's position
  // makes no sense.
  Push push(std::span<const std::uint8_t> frame);
  // Producer: after a push, whether the consumer sleeps (ring its doorbell).
  bool consumer_sleeping() const;
  // Producer with a full ring: announce the wait, then check once more for room.
  void set_waiting(bool waiting);

  // Consumer: the next frame (header and body, in shared memory: copy before
  // trusting it), an empty span when there is none, or an error. A frame above
  // `max_frame_bytes` that lies whole in the ring is the producer's mistake
  // (an error, corrupt() false); anything else wrong is corruption (corrupt()
  // true from then on).
  Result<std::span<const std::uint8_t>> peek(std::size_t max_frame_bytes);
  bool corrupt() const { return corrupt_; }
  // Consumer: releases the frame peek() returned. True when the producer
  // waits for room (ring its doorbell).
  bool pop();
  // Consumer: whether a frame (or a wrap marker) is there; never fails.
  bool readable() const;
  // Consumer: about to block (true) or awake (false). After setting it, check
  // readable() once more before blocking.
  void set_sleeping(bool sleeping);

  bool attached() const { return control_ != nullptr; }

 private:
  RingControl* control_ = nullptr;
  std::byte* data_ = nullptr;
  std::uint64_t position_ = 0;  // ours: tail as producer, head as consumer
  std::size_t peeked_ = 0;      // record bytes of the frame peek() returned
  bool corrupt_ = false;
};

}  // namespace ringsync::shm
