// This node's GPU buffer staged through a host buffer as long as it, while a ring
// allreduce runs over that host buffer in place (the ring::StageGate of a
// StagedAllreduce): the copies overlap the ring instead of preceding and
// following it.
//
// In: the device input comes to the host buffer segment by segment in the order
// the reduce-scatter uses them (segment r-1, which node r sends at step 0; then
// r-2, which it reduces into at step 0; r-3, ...; r last), each segment in
// staging chunks by a cuda::StagingPipeline (device -> host) whose slots are the
// segment's own place in the host buffer. filled() answers from what has landed,
// so the ring sends chunk k while chunk k+1 is still being copied.
// Out: each segment's chunks go back to the device output (host -> device, one
// StagingPipeline per segment) as soon as the allgather reports them final
// (finished()): this node's own segment at once, the others as they arrive.
//
// All copies go through one copy engine in the order they were asked for
// (cuda::CopierLanes). Not thread safe: the ring engine's thread calls
// everything. The engine's wakeup (set by the owner) should wake that thread.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "cuda/chunk_copier.h"
#include "cuda/copier_lanes.h"
#include "cuda/staging_buffers.h"
#include "cuda/staging_pipeline.h"
#include "service/ring/partition.h"
#include "service/ring/stage_gate.h"

namespace ringsync::service::execution {

struct StagedBuffers {
  std::byte* host = nullptr;             // the ring runs over it; pinned for speed
  const std::byte* device_in = nullptr;  // this node's input (device memory)
  std::byte* device_out = nullptr;       // where the result goes (may equal device_in)
};

class RingStaging final : public ring::StageGate {
 public:
  // `count` elements of `dtype` on a ring of `nodes`, this node `rank`;
  // `chunk_bytes`: one staging copy at most (whole elements, at least one).
  RingStaging(cuda::ChunkCopier& engine, StagedBuffers buffers, std::size_t count, DType dtype,
              int nodes, int rank, std::size_t chunk_bytes);
  RingStaging(const RingStaging&) = delete;
  RingStaging& operator=(const RingStaging&) = delete;
  // Blocks until the copies already started are over (teardown only).
  ~RingStaging() override;

  bool filled(const std::byte* at, std::size_t bytes) override;
  void finished(const std::byte* at, std::size_t bytes) override;

  // Collects finished copies, starts the next ones. Never blocks.
  void progress();
  // Fails the staging: no copy starts from now on (idle() says when the started
  // ones are over). No effect once failed.
  void abort(const Status& why);

  bool all_filled() const;  // the whole input is in the host buffer
  bool drained() const;     // the whole result is back on the device
  bool idle() const { return lanes_.in_flight() == 0; }
  const Status& status() const { return failure_; }  // ok, or the first failure

 private:
  struct Segment {
    std::size_t begin = 0, bytes = 0;                // in the buffer
    std::size_t filled = 0;                          // bytes from `begin` in the host buffer (a prefix)
    std::size_t final = 0;                           // bytes from `begin` final (a prefix)
    std::map<std::size_t, std::size_t> final_later;  // final ranges past the prefix: begin -> end
    std::optional<cuda::StagingBuffers> slots;       // a view over the segment's host bytes
    std::unique_ptr<cuda::StagingPipeline> fill;     // device -> host (the pipeline's kOut)
    std::unique_ptr<cuda::StagingPipeline> drain;    // host -> device (its kIn)
    std::vector<cuda::StagingChunk> offered;         // drain's slots waiting for final data
  };

  // Calls fn(segment, from, to) for every segment [at, at+bytes) overlaps, with
  // the overlap in bytes from the segment's start.
  template <typename Fn>
  void each_overlap(const std::byte* at, std::size_t bytes, Fn&& fn);
  void release_final(Segment& segment);
  void fail(const Status& why);

  cuda::CopierLanes lanes_;
  StagedBuffers buffers_;
  std::size_t chunk_bytes_;
  std::vector<Segment> segments_;  // by segment number
  std::vector<int> fill_order_;    // r-1, r-2, ..., r
  std::vector<int> drain_order_;   // r, r-1, ..., r+1 (the allgather's)
  Status failure_;
};

}  // namespace ringsync::service::execution
