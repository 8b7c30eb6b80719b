// The staging pipeline's logic over host memory: the real memcpy-on-a-thread copier
// for data and ordering, a hand-driven copier for overlap, depth, errors and abort.
#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <algorithm>
#include <functional>
#include <mutex>
#include <random>
#include <vector>

#include "cuda/copy_waker.h"
#include "cuda/host_chunk_copier.h"
#include "cuda/staging_buffers.h"
#include "cuda/staging_pipeline.h"
#include "manual_copier.h"

namespace ringsync::cuda {
namespace {

using State = StagingPipeline::State;
using Direction = StagingPipeline::Direction;
using test::ManualCopier;

std::vector<std::byte> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xFF);
  return v;
}

// Runs until done or failed; `between` may release chunks and says whether it did.
State drive(StagingPipeline& pipeline, CopyWaker& waker, const std::function<bool()>& between = {}) {
  for (int i = 0; i < 100000; ++i) {
    const State state = pipeline.progress();
    if (state != State::kRunning) return state;
    if (between && between()) continue;
    waker.wait();
  }
  return State::kRunning;
}

struct Shape {
  std::size_t bytes;
  std::size_t chunk;
  std::size_t depth;
};

const Shape kShapes[] = {{1, 64, 1},   {7, 64, 2},    {63, 64, 3},  {64, 64, 2},
                         {65, 64, 2},  {643, 64, 1},  {643, 64, 3}, {4096, 100, 4},
                         {1000, 7, 5}, {100000, 4096, 3}};

TEST_CASE("out: every chunk arrives in order, with the right size, and the bytes survive") {
  for (const Shape& shape : kShapes) {
    for (bool release_at_once : {true, false}) {
      CAPTURE(shape.bytes);
      CAPTURE(shape.chunk);
      CAPTURE(shape.depth);
      CAPTURE(release_at_once);
      HostChunkCopier copier;
      CopyWaker waker;
      copier.set_wakeup(waker.callback());
      auto buffers = StagingBuffers::create(copier, shape.chunk, shape.depth);
      REQUIRE(buffers.ok());
      auto device = random_bytes(shape.bytes, static_cast<unsigned>(shape.bytes));
      std::vector<std::byte> received;
      std::vector<std::size_t> order;
      std::deque<StagingChunk> held;
      StagingPipeline* self = nullptr;
      StagingPipeline pipeline(copier, *buffers, Direction::kOut, device.data(), device.size(),
                               [&](const StagingChunk& c) {
                                 order.push_back(c.index);
                                 CHECK(c.offset == c.index * shape.chunk);
                                 CHECK(c.bytes == std::min(shape.chunk, shape.bytes - c.offset));
                                 received.insert(received.end(), c.host, c.host + c.bytes);
                                 if (release_at_once) {
                                   CHECK(self->release(c.index).ok());
                                 } else {
                                   held.push_back(c);
                                 }
                               });
      self = &pipeline;
      const auto release_held = [&] {
        if (held.empty()) return false;
        for (const auto& c : held) CHECK(pipeline.release(c.index).ok());
        held.clear();
        return true;
      };
      REQUIRE(drive(pipeline, waker, release_held) == State::kDone);
      const std::size_t chunks = (shape.bytes + shape.chunk - 1) / shape.chunk;
      CHECK(pipeline.chunk_count() == chunks);
      REQUIRE(order.size() == chunks);
      for (std::size_t i = 0; i < chunks; ++i) CHECK(order[i] == i);
      CHECK(received == device);
    }
  }
}

TEST_CASE("in: slots are offered in order and the device buffer ends up with the data") {
  for (const Shape& shape : kShapes) {
    CAPTURE(shape.bytes);
    CAPTURE(shape.chunk);
    CAPTURE(shape.depth);
    HostChunkCopier copier;
    CopyWaker waker;
    copier.set_wakeup(waker.callback());
    auto buffers = StagingBuffers::create(copier, shape.chunk, shape.depth);
    REQUIRE(buffers.ok());
    const auto source = random_bytes(shape.bytes, static_cast<unsigned>(shape.bytes) + 1);
    std::vector<std::byte> device(shape.bytes, std::byte{0});
    std::vector<std::size_t> order;
    StagingPipeline* self = nullptr;
    StagingPipeline pipeline(copier, *buffers, Direction::kIn, device.data(), device.size(),
                             [&](const StagingChunk& c) {
                               order.push_back(c.index);
                               std::copy(source.begin() + c.offset,
                                         source.begin() + c.offset + c.bytes, c.host);
                               CHECK(self->release(c.index).ok());
                             });
    self = &pipeline;
    REQUIRE(drive(pipeline, waker) == State::kDone);
    for (std::size_t i = 0; i < order.size(); ++i) CHECK(order[i] == i);
    CHECK(order.size() == pipeline.chunk_count());
    CHECK(device == source);
  }
}

TEST_CASE("zero bytes: done at once, nothing offered, nothing copied") {
  ManualCopier copier;
  auto buffers = StagingBuffers::create(copier, 64, 2);
  REQUIRE(buffers.ok());
  for (Direction direction : {Direction::kOut, Direction::kIn}) {
    int offered = 0;
    StagingPipeline pipeline(copier, *buffers, direction, nullptr, 0,
                             [&](const StagingChunk&) { ++offered; });
    CHECK(pipeline.chunk_count() == 0);
    CHECK(pipeline.progress() == State::kDone);
    CHECK(offered == 0);
    CHECK(copier.submitted.empty());
  }
}

TEST_CASE("out: copies run ahead of the consumer, never more than depth slots in use") {
  ManualCopier copier;
  auto buffers = StagingBuffers::create(copier, 16, 3);
  REQUIRE(buffers.ok());
  auto device = random_bytes(16 * 10, 7);
  std::vector<std::size_t> delivered;
  StagingPipeline pipeline(copier, *buffers, Direction::kOut, device.data(), device.size(),
                           [&](const StagingChunk& c) { delivered.push_back(c.index); });

  CHECK(pipeline.progress() == State::kRunning);
  CHECK(copier.submitted == std::vector<std::uint64_t>{0, 1, 2});  // depth copies at once
  CHECK(delivered.empty());

  copier.complete_next();
  pipeline.progress();
  CHECK(delivered == std::vector<std::size_t>{0});
  CHECK(copier.submitted.size() == 3);  // chunk 0 holds its slot: nothing new yet
  CHECK(copier.pending.size() == 2);    // chunks 1 and 2 copy while chunk 0 is consumed

  copier.complete_next();
  pipeline.progress();
  CHECK(delivered == std::vector<std::size_t>{0, 1});
  CHECK(pipeline.release(0).ok());  // the slot takes chunk 3 right away
  CHECK(copier.submitted == std::vector<std::uint64_t>{0, 1, 2, 3});

  // The rest, in a scrambled order of copies and releases. Every chunk copied and not
  // yet released holds a slot: never more than depth of them.
  std::size_t released = 1;
  std::mt19937 rng(3);
  for (int step = 0; step < 1000 && pipeline.progress() == State::kRunning; ++step) {
    CHECK(copier.submitted.size() - released <= 3);
    if (!copier.pending.empty() && rng() % 2 == 0) {
      copier.complete_next();
      continue;
    }
    // Release one delivered chunk still held (the pipeline refuses the others).
    std::vector<std::size_t> order(delivered);
    std::shuffle(order.begin(), order.end(), rng);
    for (std::size_t index : order) {
      if (pipeline.release(index).ok()) {
        ++released;
        break;
      }
    }
  }
  CHECK(pipeline.progress() == State::kDone);
  REQUIRE(delivered.size() == 10);
  for (std::size_t i = 0; i < delivered.size(); ++i) CHECK(delivered[i] == i);
}

TEST_CASE("in: a slot is offered again only after its copy to the device finished") {
  ManualCopier copier;
  auto buffers = StagingBuffers::create(copier, 8, 2);
  REQUIRE(buffers.ok());
  std::vector<std::byte> device(8 * 5, std::byte{0});
  std::vector<std::size_t> offered;
  StagingPipeline pipeline(copier, *buffers, Direction::kIn, device.data(), device.size(),
                           [&](const StagingChunk& c) {
                             offered.push_back(c.index);
                             std::fill(c.host, c.host + c.bytes, std::byte(c.index + 1));
                           });
  pipeline.progress();
  CHECK(offered == std::vector<std::size_t>{0, 1});
  CHECK(copier.submitted.empty());  // nothing to copy until a slot is filled

  CHECK(pipeline.release(1).ok());  // filled out of order: copies in the order filled
  CHECK(pipeline.release(0).ok());
  CHECK(copier.submitted == std::vector<std::uint64_t>{1, 0});

  copier.complete_next();  // chunk 1's slot is free, but chunk 2 belongs in slot 0
  pipeline.progress();
  CHECK(offered == std::vector<std::size_t>{0, 1});
  copier.complete_next();
  pipeline.progress();
  CHECK(offered == std::vector<std::size_t>{0, 1, 2, 3});

  for (int step = 0; step < 100 && pipeline.progress() == State::kRunning; ++step) {
    for (std::size_t index : offered) (void)pipeline.release(index);
    CHECK(copier.drain().ok());
  }
  REQUIRE(pipeline.progress() == State::kDone);
  for (std::size_t i = 0; i < device.size(); ++i) CHECK(device[i] == std::byte(i / 8 + 1));
}

TEST_CASE("a copier that refuses a copy fails the transfer with a message naming the chunk") {
  ManualCopier copier;
  copier.fail_submit = 2;
  auto buffers = StagingBuffers::create(copier, 16, 4);
  REQUIRE(buffers.ok());
  auto device = random_bytes(16 * 6, 1);
  int offered = 0;
  StagingPipeline pipeline(copier, *buffers, Direction::kOut, device.data(), device.size(),
                           [&](const StagingChunk&) { ++offered; });
  // Chunks 0 and 1 were started before chunk 2 failed: the transfer waits for them.
  CHECK(pipeline.progress() == State::kRunning);
  CHECK(copier.pending.size() == 2);
  CHECK(copier.drain().ok());
  CHECK(pipeline.progress() == State::kFailed);
  CHECK(offered == 0);  // nothing is handed out after a failure
  CHECK(pipeline.status().code() == StatusCode::kInternal);
  CHECK(pipeline.status().message().find("staging chunk 2 of 6") != std::string::npos);
  CHECK(pipeline.status().message().find("injected submit failure") != std::string::npos);
  CHECK(!pipeline.release(0).ok());
}

TEST_CASE("a copy that fails on completion fails the transfer once the others finished") {
  for (Direction direction : {Direction::kOut, Direction::kIn}) {
    ManualCopier copier;
    copier.fail_copy = 1;
    auto buffers = StagingBuffers::create(copier, 16, 3);
    REQUIRE(buffers.ok());
    std::vector<std::byte> device(16 * 5, std::byte{0});
    StagingPipeline* self = nullptr;
    StagingPipeline pipeline(copier, *buffers, direction, device.data(), device.size(),
                             [&](const StagingChunk& c) { (void)self->release(c.index); });
    self = &pipeline;
    pipeline.progress();
    REQUIRE(copier.pending.size() == 3);
    copier.complete_next();  // chunk 0: fine
    copier.complete_next();  // chunk 1: fails
    CHECK(pipeline.progress() == State::kRunning);  // chunk 2 is still being copied
    CHECK(copier.drain().ok());
    CHECK(pipeline.progress() == State::kFailed);
    CHECK(pipeline.status().message().find("staging chunk 1 of 5") != std::string::npos);
    CHECK(pipeline.status().message().find("injected copy failure") != std::string::npos);
    CHECK(copier.submitted.size() <= 4);  // at most chunk 0's slot reused before chunk 1 failed
  }
}

TEST_CASE("abort stops new work and reports once the running copies finished") {
  ManualCopier copier;
  auto buffers = StagingBuffers::create(copier, 16, 2);
  REQUIRE(buffers.ok());
  auto device = random_bytes(16 * 8, 2);
  int offered = 0;
  StagingPipeline pipeline(copier, *buffers, Direction::kOut, device.data(), device.size(),
                           [&](const StagingChunk&) { ++offered; });
  pipeline.progress();
  copier.complete_next();
  pipeline.progress();
  CHECK(offered == 1);
  pipeline.abort(Status::PeerLost("the next node left"));
  CHECK(pipeline.progress() == State::kRunning);  // chunk 1 is still being copied
  CHECK(copier.drain().ok());
  CHECK(pipeline.progress() == State::kFailed);
  CHECK(offered == 1);
  CHECK(pipeline.status().code() == StatusCode::kPeerLost);
  CHECK(pipeline.status().message() == "staging aborted: the next node left");
  CHECK(copier.submitted.size() == 2);
  pipeline.abort(Status::Internal("again"));  // no effect once failed
  CHECK(pipeline.status().code() == StatusCode::kPeerLost);
}

TEST_CASE("releasing a chunk the caller does not hold is refused") {
  ManualCopier copier;
  auto buffers = StagingBuffers::create(copier, 16, 2);
  REQUIRE(buffers.ok());
  auto device = random_bytes(16 * 3, 4);
  StagingPipeline pipeline(copier, *buffers, Direction::kOut, device.data(), device.size(),
                           [](const StagingChunk&) {});
  pipeline.progress();
  CHECK(pipeline.release(0).code() == StatusCode::kInvalidArgument);  // still copying
  CHECK(pipeline.release(7).code() == StatusCode::kInvalidArgument);  // no such chunk
  copier.complete_next();
  pipeline.progress();
  CHECK(pipeline.release(0).ok());
  CHECK(pipeline.release(0).code() == StatusCode::kInvalidArgument);  // twice
}

TEST_CASE("staging buffers: pinned once, unpinned once, sizes validated") {
  ManualCopier copier;
  {
    auto buffers = StagingBuffers::create(copier, 1000, 3);
    REQUIRE(buffers.ok());
    CHECK(buffers->chunk_bytes() == 1000);
    CHECK(buffers->depth() == 3);
    CHECK(reinterpret_cast<std::uintptr_t>(buffers->slot(1)) % 4096 == 0);
    StagingBuffers moved = std::move(buffers).value();
    CHECK(copier.pins == 1);
  }
  CHECK(copier.unpins == 1);
  CHECK(!StagingBuffers::create(copier, 0, 3).ok());
  CHECK(!StagingBuffers::create(copier, 64, 0).ok());
}

}  // namespace
}  // namespace ringsync::cuda
