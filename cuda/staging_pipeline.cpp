#include "cuda/staging_pipeline.h"

#include <algorithm>
#include <string>

namespace ringsync::cuda {

StagingPipeline::StagingPipeline(ChunkCopier& copier, const StagingBuffers& buffers,
                                 Direction direction, void* device, std::size_t bytes,
                                 ChunkFn on_chunk)
    : copier_(copier),
      buffers_(buffers),
      direction_(direction),
      device_(static_cast<std::byte*>(device)),
      bytes_(bytes),
      chunk_bytes_(buffers.chunk_bytes()),
      chunks_((bytes + buffers.chunk_bytes() - 1) / buffers.chunk_bytes()),
      on_chunk_(std::move(on_chunk)),
      slots_(std::min(buffers.depth(), std::max<std::size_t>(chunks_, 1))) {}

StagingChunk StagingPipeline::chunk(std::size_t index) const {
  StagingChunk c;
  c.index = index;
  c.offset = index * chunk_bytes_;
  c.bytes = std::min(chunk_bytes_, bytes_ - c.offset);
  c.host = buffers_.slot(index % slots_.size());
  return c;
}

StagingPipeline::State StagingPipeline::state() const {
  if (failed_) return copying_ == 0 ? State::kFailed : State::kRunning;
  return finished_ == chunks_ ? State::kDone : State::kRunning;
}

StagingPipeline::State StagingPipeline::progress() {
  collect();
  if (!failed_ && direction_ == Direction::kOut) issue_out_copies();
  if (!failed_) deliver();
  return state();
}

void StagingPipeline::collect() {
  done_.clear();
  copier_.poll(done_);
  for (const auto& done : done_) {
    const std::size_t index = done.ticket;
    Slot& slot = slot_of(index);
    --copying_;
    if (!done.status.ok()) {
      slot.state = SlotState::kFree;
      fail(index, done.status);
      continue;
    }
    if (direction_ == Direction::kOut) {
      slot.state = SlotState::kLanded;
    } else {
      slot.state = SlotState::kFree;
      ++finished_;
    }
  }
}

// Out: every free slot takes the next chunk, in order.
void StagingPipeline::issue_out_copies() {
  while (!failed_ && next_issue_ < chunks_ && slot_of(next_issue_).state == SlotState::kFree) {
    const std::size_t index = next_issue_++;
    Status started = start_copy(index, ChunkCopier::Direction::kToHost);
    if (!started.ok()) fail(index, started);
  }
}

// Hands chunks to the caller in order: landed ones (out), free slots (in).
void StagingPipeline::deliver() {
  for (;;) {
    if (failed_) return;
    std::size_t index = 0;
    if (direction_ == Direction::kOut) {
      if (next_deliver_ >= chunks_) return;
      Slot& slot = slot_of(next_deliver_);
      if (slot.state != SlotState::kLanded || slot.chunk != next_deliver_) return;
      index = next_deliver_++;
      slot.state = SlotState::kWithCaller;
    } else {
      if (next_issue_ >= chunks_) return;
      Slot& slot = slot_of(next_issue_);
      if (slot.state != SlotState::kFree) return;
      index = next_issue_++;
      slot.state = SlotState::kWithCaller;
      slot.chunk = index;
    }
    on_chunk_(chunk(index));  // may call release() or abort()
  }
}

Status StagingPipeline::start_copy(std::size_t index, ChunkCopier::Direction direction) {
  Slot& slot = slot_of(index);
  const StagingChunk c = chunk(index);
  slot.state = SlotState::kCopying;
  slot.chunk = index;
  Status started = direction == ChunkCopier::Direction::kToHost
                       ? copier_.submit(index, direction, c.host, device_ + c.offset, c.bytes)
                       : copier_.submit(index, direction, device_ + c.offset, c.host, c.bytes);
  if (!started.ok()) {
    slot.state = SlotState::kFree;
    return started;
  }
  ++copying_;
  return Status::Ok();
}

Status StagingPipeline::release(std::size_t index) {
  if (failed_) return status_;
  if (index >= chunks_ || slot_of(index).chunk != index ||
      slot_of(index).state != SlotState::kWithCaller)
    return Status::InvalidArgument("staging: chunk " + std::to_string(index) +
                                   " is not held by the caller");
  if (direction_ == Direction::kOut) {
    slot_of(index).state = SlotState::kFree;
    ++finished_;
    issue_out_copies();  // the slot takes its next chunk now, not at the next progress()
    return failed_ ? status_ : Status::Ok();
  }
  Status started = start_copy(index, ChunkCopier::Direction::kToDevice);
  if (!started.ok()) fail(index, started);
  return failed_ ? status_ : Status::Ok();
}

void StagingPipeline::abort(Status why) {
  if (failed_ || finished_ == chunks_) return;
  failed_ = true;
  status_ = Status(why.ok() ? StatusCode::kClosed : why.code(),
                   "staging aborted: " + (why.ok() ? std::string("by its owner") : why.message()));
}

void StagingPipeline::fail(std::size_t index, const Status& why) {
  if (failed_) return;
  failed_ = true;
  const StagingChunk c = chunk(index);
  status_ = Status(why.code(), "staging chunk " + std::to_string(index) + " of " +
                                   std::to_string(chunks_) + " (" + std::to_string(c.bytes) +
                                   " bytes at offset " + std::to_string(c.offset) + ", " +
                                   (direction_ == Direction::kOut ? "device to host" : "host to device") +
                                   "): " + why.message());
}

}  // namespace ringsync::cuda
