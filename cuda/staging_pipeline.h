// One transfer of a device buffer through pinned host slots, as a non-blocking task
// (post / progress / done), for UCX builds that cannot touch device memory.
//
// Out (device -> host): chunk k is copied into a free slot; once it has landed,
// on_chunk(k) hands the slot to the caller (who sends it, say) and the caller calls
// release(k) when done with it; the slot then takes chunk k + depth. While the caller
// handles chunk k, chunks k+1 .. k+depth-1 are already being copied.
// In (host -> device): on_chunk(k) offers a free slot for chunk k; the caller fills it
// (a receive, say) and calls release(k); the slot is copied to the device at chunk k's
// offset and offered again for chunk k + depth once that copy has finished.
//
// Chunks are offered in order 0, 1, 2, ... (all chunk_bytes long but the last); at
// most depth of them hold a slot at any time. progress() collects finished copies,
// starts the next ones and calls on_chunk; it never blocks. Call it after the
// copier's wakeup and after release(). on_chunk runs inside progress() and may call
// release() or abort() itself. All calls come from one thread (the owner's loop).
//
// A failed copy, or abort(), fails the transfer: no new copies or offers, and
// progress() answers kFailed once the copies already started have finished (so
// neither the device buffer nor the slots are in use by the copier any more). Slots
// the caller still holds are the caller's to finish with before reusing the buffers.
#pragma once

#include <cstddef>
#include <functional>
#include <vector>

#include "common/status.h"
#include "cuda/chunk_copier.h"
#include "cuda/staging_buffers.h"

namespace ringsync::cuda {

struct StagingChunk {
  std::size_t index = 0;   // 0, 1, 2, ... in buffer order
  std::size_t offset = 0;  // bytes from the start of the device buffer
  std::size_t bytes = 0;   // chunk_bytes, or less for the last chunk
  std::byte* host = nullptr;  // the slot: holds the chunk (out) or receives it (in)
};

class StagingPipeline {
 public:
  enum class Direction { kOut, kIn };
  enum class State { kRunning, kDone, kFailed };
  using ChunkFn = std::function<void(const StagingChunk&)>;

  // `device` holds `bytes` (device memory for a DeviceChunkCopier). The copier and the
  // buffers outlive the pipeline; the buffers serve one pipeline at a time.
  StagingPipeline(ChunkCopier& copier, const StagingBuffers& buffers, Direction direction,
                  void* device, std::size_t bytes, ChunkFn on_chunk);
  StagingPipeline(const StagingPipeline&) = delete;
  StagingPipeline& operator=(const StagingPipeline&) = delete;

  State progress();
  // The caller is done with chunk `index`'s slot (out: consumed; in: filled).
  Status release(std::size_t index);
  // Fails the transfer with `why` (no effect once done or failed).
  void abort(Status why);

  State state() const;
  const Status& status() const { return status_; }  // why it failed
  std::size_t chunk_count() const { return chunks_; }

 private:
  enum class SlotState { kFree, kCopying, kLanded, kWithCaller };
  struct Slot {
    SlotState state = SlotState::kFree;
    std::size_t chunk = 0;
  };

  StagingChunk chunk(std::size_t index) const;
  Slot& slot_of(std::size_t index) { return slots_[index % slots_.size()]; }
  void collect();
  void issue_out_copies();
  void deliver();
  Status start_copy(std::size_t index, ChunkCopier::Direction direction);
  void fail(std::size_t index, const Status& why);

  ChunkCopier& copier_;
  const StagingBuffers& buffers_;
  Direction direction_;
  std::byte* device_;
  std::size_t bytes_;
  std::size_t chunk_bytes_;
  std::size_t chunks_;
  ChunkFn on_chunk_;
  std::vector<Slot> slots_;
  std::vector<ChunkCopier::Done> done_;  // reused by collect()
  std::size_t next_issue_ = 0;    // out: next chunk to copy; in: next chunk to offer
  std::size_t next_deliver_ = 0;  // out: next chunk to hand over
  std::size_t finished_ = 0;      // chunks whose slot came back for good
  std::size_t copying_ = 0;       // copies started and not yet collected
  bool failed_ = false;
  Status status_;
};

}  // namespace ringsync::cuda
