// Ring allgather, in place: every node holds a buffer of `count` elements and
// owns segment r of Partition(count, N, chunk) (node r's contribution, already
// in place); afterwards every node holds every segment.
//
// N-1 steps. At step s node r sends segment r-s to the node on its right and
// receives segment r-s-1 from the node on its left, straight into place; that
// is the segment it forwards at step s+1. Chunked and pipelined like every
// ring task (ChunkPipeline). N = 1: no messages.
#pragma once

#include <cstddef>

#include "common/dtype.h"
#include "service/ring/chunk_pipeline.h"
#include "service/ring/partition.h"

namespace ringsync::service::ring {

class Allgather : public ChunkPipeline {
 public:
  Allgather(transport::Transport& transport, void* data, std::size_t count, DType dtype,
            const RingOptions& options);

  // This node's contribution is partition().segment(rank).
  const Partition& partition() const { return partition_; }

 private:
  Status plan() override;
  std::byte* data_;
  DType dtype_;
  RingOptions options_;
  Partition partition_;
};

}  // namespace ringsync::service::ring
