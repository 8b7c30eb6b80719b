#include <doctest/doctest.h>

#include <cstring>
#include <vector>

#include "common/shm_channel.h"
#include "common/wire.h"

namespace test_common_shm_ring {

using namespace ringsync;
using shm::ShmRing;

namespace {

std::vector<std::uint8_t> frame_of_size(std::size_t body, std::uint8_t fill) {
  std::vector<std::uint8_t> body_bytes(body, fill);
  return wire::frame_of(body_bytes.data(), body_bytes.size());
}

struct Rings {
  Rings() : channel(std::move(shm::Channel::create("test").value())) {
    // Producer and consumer are two views of the same ring, as in two processes.
    auto* controls = reinterpret_cast<shm::RingControl*>(channel.region()->data());
    std::byte* data = channel.region()->data() + shm::Channel::kControlBytes;
    producer = ShmRing(&controls[0], data);
    consumer = ShmRing(&controls[0], data);
    control = &controls[0];
  }
  shm::Channel channel;
  ShmRing producer;
  ShmRing consumer;
  shm::RingControl* control;
};

// Pops one frame; its body must be `body` bytes of `fill`.
void expect_frame(ShmRing& consumer, std::size_t body, std::uint8_t fill) {
  auto frame = consumer.peek(wire::kMaxFrameBytes);
  REQUIRE(frame.ok());
  REQUIRE(frame->size() == wire::kFrameHeaderBytes + body);
  for (std::size_t i = wire::kFrameHeaderBytes; i < frame->size(); ++i) REQUIRE((*frame)[i] == fill);
  consumer.pop();
}

}  // namespace

TEST_CASE("frames come out in order, whole, across many wraps of the ring") {
  Rings r;
  CHECK_FALSE(r.consumer.readable());
  CHECK(r.consumer.peek(wire::kMaxFrameBytes)->empty());
  // Sizes that do not divide the capacity: frames land on the end and wrap.
  std::size_t pushed = 0, popped = 0;
  for (int round = 0; round < 4000; ++round) {
    const std::size_t body = 1 + (round * 7919) % 3000;
    while (r.producer.push(frame_of_size(body, static_cast<std::uint8_t>(round))) == ShmRing::Push::kFull) {
      expect_frame(r.consumer, 1 + (popped * 7919) % 3000, static_cast<std::uint8_t>(popped));
      ++popped;
    }
    ++pushed;
  }
  while (popped < pushed) {
    expect_frame(r.consumer, 1 + (popped * 7919) % 3000, static_cast<std::uint8_t>(popped));
    ++popped;
  }
  CHECK_FALSE(r.consumer.readable());
}

TEST_CASE("a full ring says so; room comes back as the consumer pops, and the producer's wait is reported") {
  Rings r;
  const auto big = frame_of_size(wire::kMaxFrameBytes, 1);
  int fitted = 0;
  while (r.producer.push(big) == ShmRing::Push::kDone) ++fitted;
  CHECK(fitted >= 1);
  CHECK(r.producer.push(big) == ShmRing::Push::kFull);
  r.producer.set_waiting(true);
  auto frame = r.consumer.peek(wire::kMaxFrameBytes);
  REQUIRE(frame.ok());
  CHECK(r.consumer.pop());  // the producer waited: ring its doorbell
  if (fitted > 1) {
    REQUIRE(r.consumer.peek(wire::kMaxFrameBytes).ok());
    CHECK_FALSE(r.consumer.pop());  // once: the flag was cleared
  }
  CHECK(r.producer.push(big) == ShmRing::Push::kDone);
}

TEST_CASE("small frames on an empty ring start over at the front, past the low water mark") {
  Rings r;
  const auto small = frame_of_size(100, 3);
  for (int i = 0; i < 2000; ++i) {
    REQUIRE(r.producer.push(small) == ShmRing::Push::kDone);
    expect_frame(r.consumer, 100, 3);
    // Never further than the low water mark and one frame into the ring.
    REQUIRE((r.control->tail & (ShmRing::kCapacity - 1)) <= ShmRing::kLowWater + small.size() + 8);
  }
}

TEST_CASE("no ring takes a frame above wire::kMaxFrameBytes") {
  Rings r;
  CHECK(r.producer.push(std::vector<std::uint8_t>(ShmRing::kCapacity, 1)) == ShmRing::Push::kTooLarge);
  CHECK(r.producer.push(std::vector<std::uint8_t>(wire::kFrameHeaderBytes + wire::kMaxFrameBytes + 1, 1)) ==
        ShmRing::Push::kTooLarge);
  CHECK(r.producer.push(frame_of_size(wire::kMaxFrameBytes, 1)) == ShmRing::Push::kDone);
}

TEST_CASE("the sleeping flag: set, seen by the producer, cleared") {
  Rings r;
  CHECK_FALSE(r.producer.consumer_sleeping());
  r.consumer.set_sleeping(true);
  CHECK(r.producer.consumer_sleeping());
  r.consumer.set_sleeping(false);
  CHECK_FALSE(r.producer.consumer_sleeping());
}

TEST_CASE("positions and lengths a peer scribbled are errors, never reads out of bounds") {
  Rings r;
  SUBCASE("a producer position beyond the capacity") {
    r.control->tail = ShmRing::kCapacity + 8;
    CHECK(r.consumer.peek(wire::kMaxFrameBytes).status().code() == StatusCode::kProtocolError);
    CHECK(r.consumer.corrupt());
  }
  SUBCASE("a producer position off the record grid") {
    r.control->tail = 12;
    CHECK_FALSE(r.consumer.peek(wire::kMaxFrameBytes).ok());
  }
  SUBCASE("a length past what was written") {
    const std::uint32_t length = 4000;
    std::memcpy(r.channel.region()->data() + shm::Channel::kControlBytes, &length, sizeof length);
    r.control->tail = 16;
    CHECK_FALSE(r.consumer.peek(wire::kMaxFrameBytes).ok());
  }
  SUBCASE("a length above the consumer's limit: the producer's mistake, not corruption") {
    REQUIRE(r.producer.push(frame_of_size(2000, 1)) == ShmRing::Push::kDone);
    CHECK_FALSE(r.consumer.peek(1000).ok());
    CHECK_FALSE(r.consumer.corrupt());
  }
  SUBCASE("a wrap marker at the start, or one after another") {
    const std::uint32_t marker = 0xffffffffu;
    std::memcpy(r.channel.region()->data() + shm::Channel::kControlBytes, &marker, sizeof marker);
    r.control->tail = ShmRing::kCapacity;
    CHECK_FALSE(r.consumer.peek(wire::kMaxFrameBytes).ok());
    CHECK(r.consumer.corrupt());
    CHECK_FALSE(r.consumer.peek(wire::kMaxFrameBytes).ok());  // and stays so
  }
  SUBCASE("a zero length") {
    r.control->tail = 8;
    CHECK_FALSE(r.consumer.peek(wire::kMaxFrameBytes).ok());
  }
  SUBCASE("a consumer position ahead of the producer's") {
    r.control->head = 4096;
    CHECK(r.producer.push(frame_of_size(10, 1)) == ShmRing::Push::kCorrupt);
  }
}

}  // namespace test_common_shm_ring
