#include "service/ring/chunk_pipeline.h"

#include <algorithm>
#include <utility>

namespace ringsync::service::ring {

// What the transport's callbacks write and the task reads. Shared, so that a
// callback that runs after the task is gone still writes to live memory
// (including the scratch slots receives land in).
struct ChunkPipeline::Ledger {
  std::string algorithm;
  Status failure;
  std::vector<std::uint8_t> arrived;  // per receive slot: its data is in
  std::vector<std::byte> scratch;     // receive slots of slot_bytes_ each
  std::size_t sends_in_flight = 0;
  std::size_t recvs_in_flight = 0;

  void fail(const char* what, int peer, std::uint64_t tag, const Status& why) {
    if (!failure.ok()) return;  // the first error is the one to report
    failure =
        Status(why.code(), "ring " + algorithm + ": " + what + " node " + std::to_string(peer) +
                               " (collective " + std::to_string(tag >> 32) + ", step " +
                               std::to_string((tag >> 16) & 0xFFFF) + ", chunk " +
                               std::to_string(tag & 0xFFFF) + ") failed: " + why.message());
  }
};

ChunkPipeline::ChunkPipeline(transport::Transport& transport, std::string algorithm,
                             std::size_t window, StageGate* gate)
    : transport_(transport),
      algorithm_(std::move(algorithm)),
      gate_(gate),
      ledger_(std::make_shared<Ledger>()),
      window_(std::max<std::size_t>(window, 1)) {
  ledger_->algorithm = algorithm_;
}

const Status& ChunkPipeline::status() const { return ledger_->failure; }

void ChunkPipeline::plan_send(const Send& send) { sends_.push_back(send); }

void ChunkPipeline::plan_send(Send send, PlannedRecv forwards) {
  send.after_landed = forwards.index + 1;
  sends_.push_back(send);
}

PlannedRecv ChunkPipeline::plan_recv(const Recv& recv) {
  recvs_.push_back(recv);
  return PlannedRecv{recvs_.size() - 1};
}

void ChunkPipeline::land(std::size_t, const Recv&, const std::byte*) {}

Status ChunkPipeline::post() {
  if (started_) {
    return Status::InvalidArgument("ring " + algorithm_ +
                                   ": post() was called twice; a task runs once");
  }
  if (state_ != TaskState::kInProgress) return ledger_->failure;  // aborted or refused before
  Status planned = plan();
  if (!planned.ok()) {
    ledger_->failure = planned;
    state_ = TaskState::kError;
    return planned;
  }
  start();
  return Status::Ok();
}

void ChunkPipeline::abort(const Status& why) {
  if (state_ != TaskState::kInProgress || !ledger_->failure.ok()) return;
  ledger_->failure = Status(why.code(), "ring " + algorithm_ + ": aborted: " + why.message());
  if (!started_) state_ = TaskState::kError;  // nothing was posted
}

void ChunkPipeline::start() {
  started_ = true;
  slots_ = std::min(window_, recvs_.size());
  std::size_t slot_bytes = 0;
  for (const Recv& r : recvs_) {
    if (r.via_scratch) slot_bytes = std::max(slot_bytes, r.bytes);
  }
  slot_bytes_ = slot_bytes;
  ledger_->arrived.assign(slots_, 0);
  ledger_->scratch.resize(slots_ * slot_bytes_);
  post_ready();
}

TaskState ChunkPipeline::progress() {
  if (state_ != TaskState::kInProgress) return state_;
  Ledger& ledger = *ledger_;
  if (!started_) {
    ledger.failure = Status::Internal("ring " + algorithm_ +
                                      ": progress() was called before post(); post the task first");
    state_ = TaskState::kError;
    return state_;
  }
  post_ready();
  if (!ledger.failure.ok()) {
    // Finished only when nothing posted can still write into the buffers.
    if (ledger.sends_in_flight == 0 && ledger.recvs_in_flight == 0) state_ = TaskState::kError;
  } else if (recvs_landed_ == recvs_.size() && sends_posted_ == sends_.size() &&
             ledger.sends_in_flight == 0) {
    state_ = TaskState::kDone;
  }
  return state_;
}

void ChunkPipeline::post_ready() {
  Ledger& ledger = *ledger_;
  // Land what has arrived, in plan order.
  while (ledger.failure.ok() && recvs_landed_ < recvs_posted_) {
    const std::size_t slot = recvs_landed_ % slots_;
    if (ledger.arrived[slot] == 0) break;
    const Recv& recv = recvs_[recvs_landed_];
    // Reduced into this node's data: that data must be here first.
    if (recv.via_scratch && gate_ != nullptr && !gate_->filled(recv.place, recv.bytes)) break;
    ledger.arrived[slot] = 0;
    land(recvs_landed_, recv,
         recv.via_scratch ? ledger.scratch.data() + slot * slot_bytes_ : nullptr);
    if (recv.final && gate_ != nullptr) gate_->finished(recv.place, recv.bytes);
    ++recvs_landed_;
  }
  // Receive into the free slots.
  while (ledger.failure.ok() && recvs_posted_ < recvs_.size() &&
         recvs_posted_ - recvs_landed_ < slots_) {
    post_recv(recvs_posted_++);
  }
  // Send the chunks whose data is in place.
  while (ledger.failure.ok() && sends_posted_ < sends_.size() && ledger.sends_in_flight < window_ &&
         sends_[sends_posted_].after_landed <= recvs_landed_) {
    const Send& send = sends_[sends_posted_];
    if (send.own_input && gate_ != nullptr && !gate_->filled(send.data, send.bytes)) break;
    post_send(send);
    ++sends_posted_;
  }
}

void ChunkPipeline::post_send(const Send& send) {
  ++ledger_->sends_in_flight;
  transport_.send(send.peer, send.tag, send.data, send.bytes,
                  [ledger = ledger_, peer = send.peer, tag = send.tag](const Status& s) {
                    --ledger->sends_in_flight;
                    if (!s.ok()) ledger->fail("send to", peer, tag, s);
                  });
}

void ChunkPipeline::post_recv(std::size_t index) {
  const Recv& recv = recvs_[index];
  const std::size_t slot = index % slots_;
  std::byte* target = recv.via_scratch ? ledger_->scratch.data() + slot * slot_bytes_ : recv.place;
  ++ledger_->recvs_in_flight;
  transport_.recv(recv.peer, recv.tag, target, recv.bytes,
                  [ledger = ledger_, slot, peer = recv.peer, tag = recv.tag](const Status& s) {
                    --ledger->recvs_in_flight;
                    if (s.ok()) {
                      ledger->arrived[slot] = 1;
                    } else {
                      ledger->fail("receive from", peer, tag, s);
                    }
                  });
}

}  // namespace ringsync::service::ring
