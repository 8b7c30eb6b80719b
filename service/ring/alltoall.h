// Alltoall between the nodes of a job by pairwise exchange (Open MPI's and
// MPICH's "pairwise" alltoall for large messages): every node holds N blocks
// of `block_count` elements to send, block m for node m, and receives N
// blocks, block m from node m, into a separate buffer.
//
// N-1 steps; at step s node r sends its block r+s to node r+s and receives
// node r-s's block for it into recv block r-s (straight into place: nothing
// to reduce). Its own block is copied locally before the first step. Every
// node's steps go in the same order, so each send meets its receive at the
// same step; each message is cut into chunks (ChunkPipeline) so that the
// window bounds what is in flight.
//
// Unlike the ring, every pair of nodes exchanges directly: it needs a
// transport connected to every peer (both transports are). Tags: sequence
// options.sequence, steps options.first_step .. + N-2, chunk numbers within
// the step's message. N = 1: only the local copy.
#pragma once

#include <cstddef>

#include "common/dtype.h"
#include "service/ring/chunk_pipeline.h"

namespace ringsync::service::ring {

class Alltoall : public ChunkPipeline {
 public:
  // send and recv: N * block_count elements each, not overlapping.
  Alltoall(transport::Transport& transport, const void* send, void* recv, std::size_t block_count,
           DType dtype, const RingOptions& options);

 private:
  Status plan() override;

  const std::byte* send_;
  std::byte* recv_;
  std::size_t block_count_;
  DType dtype_;
  RingOptions options_;
};

}  // namespace ringsync::service::ring
