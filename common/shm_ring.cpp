#include "common/shm_ring.h"

#include <cstring>
#include <string>

#include "common/wire.h"

namespace ringsync::shm {
namespace {

constexpr std::uint32_t kWrapMarker = 0xffffffffu;
constexpr std::size_t kMask = ShmRing::kCapacity - 1;
static_assert((ShmRing::kCapacity & kMask) == 0, "the capacity is a power of two");
static_assert(ShmRing::kCapacity >= wire::kMaxFrameBytes + wire::kFrameHeaderBytes + ShmRing::kLowWater);

constexpr std::size_t record_bytes(std::size_t frame_bytes) { return (frame_bytes + 7) & ~std::size_t{7}; }

// atomic_ref needs a non-const object even to load.
std::uint64_t load(const std::uint64_t& field) {
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(field)).load(std::memory_order_acquire);
}
void store(std::uint64_t& field, std::uint64_t value) {
  std::atomic_ref<std::uint64_t>(field).store(value, std::memory_order_release);
}
std::uint32_t load_flag(const std::uint32_t& flag) {
  return std::atomic_ref<std::uint32_t>(const_cast<std::uint32_t&>(flag)).load(std::memory_order_relaxed);
}
void store_flag(std::uint32_t& flag, std::uint32_t value) {
  std::atomic_ref<std::uint32_t>(flag).store(value, std::memory_order_relaxed);
}

}  // namespace

ShmRing::Push ShmRing::push(std::span<const std::uint8_t> frame) {
  const std::uint64_t head = load(control_->head);
  if (position_ - head > kCapacity || (head & 7) != 0) return Push::kCorrupt;
  std::size_t used = position_ - head;
  std::size_t offset = position_ & kMask;
  const std::size_t record = record_bytes(frame.size());
  if (frame.size() > wire::kFrameHeaderBytes + wire::kMaxFrameBytes) return Push::kTooLarge;
  if (kCapacity - offset < record || (used == 0 && offset >= kLowWater)) {
    // Start over at 0 behind a marker; the marker's bytes count as used
    // until the consumer steps over them.
    const std::size_t skipped = kCapacity - offset;
    if (kCapacity - used < skipped) return Push::kFull;
    std::memcpy(data_ + offset, &kWrapMarker, sizeof kWrapMarker);
    position_ += skipped;
    used += skipped;
    offset = 0;
    store(control_->tail, position_);
  }
  if (kCapacity - used < record) return Push::kFull;
  std::memcpy(data_ + offset, frame.data(), frame.size());
  position_ += record;
  store(control_->tail, position_);
  return Push::kDone;
}

bool ShmRing::consumer_sleeping() const {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return load_flag(control_->sleeping) != 0;
}

void ShmRing::set_waiting(bool waiting) {
  store_flag(control_->waiting, waiting ? 1 : 0);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

Result<std::span<const std::uint8_t>> ShmRing::peek(std::size_t max_frame_bytes) {
  auto fail = [&](const std::string& what) -> Status {
    corrupt_ = true;
    return Status::ProtocolError("the shared-memory channel is corrupt: " + what);
  };
  if (corrupt_) return fail("as found before");
  // At most one wrap marker per frame: the producer never writes one at 0.
  for (int markers = 0;; ++markers) {
    const std::uint64_t tail = load(control_->tail);
    if (tail == position_) return std::span<const std::uint8_t>();
    const std::uint64_t available = tail - position_;
    if (available > kCapacity || (available & 7) != 0)
      return fail("the producer's position is " + std::to_string(tail) + ", the consumer's " +
                  std::to_string(position_));
    const std::size_t offset = position_ & kMask;
    std::uint32_t length;
    std::memcpy(&length, data_ + offset, sizeof length);  // read once: the peer may change it
    if (length == kWrapMarker) {
      const std::size_t skipped = kCapacity - offset;
      if (markers > 0 || offset == 0) return fail("a wrap marker at the start of the ring");
      if (available < skipped) return fail("a wrap marker past the producer's position");
      position_ += skipped;
      store(control_->head, position_);
      continue;
    }
    if (length == 0) return fail("a frame of 0 bytes");
    const std::size_t frame = wire::kFrameHeaderBytes + std::size_t{length};
    const std::size_t record = record_bytes(frame);
    if (record > available || record > kCapacity - offset)
      return fail("a frame of " + std::to_string(length) + " bytes runs past what was written");
    const std::uint8_t header[wire::kFrameHeaderBytes] = {
        static_cast<std::uint8_t>(length), static_cast<std::uint8_t>(length >> 8),
        static_cast<std::uint8_t>(length >> 16), static_cast<std::uint8_t>(length >> 24)};
    auto body = wire::frame_length(std::span<const std::uint8_t, wire::kFrameHeaderBytes>(header), max_frame_bytes);
    if (!body.ok()) return body.status();  // whole, but too large for this consumer
    peeked_ = record;
    return std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(data_ + offset), frame);
  }
}

bool ShmRing::pop() {
  position_ += peeked_;
  peeked_ = 0;
  store(control_->head, position_);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (load_flag(control_->waiting) == 0) return false;
  store_flag(control_->waiting, 0);
  return true;
}

bool ShmRing::readable() const { return load(control_->tail) != position_; }

void ShmRing::set_sleeping(bool sleeping) {
  store_flag(control_->sleeping, sleeping ? 1 : 0);
  std::atomic_thread_fence(std::memory_order_seq_cst);
}

}  // namespace ringsync::shm
