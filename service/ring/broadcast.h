// Pipelined chain broadcast, in place: `root`'s buffer of `count` elements
// reaches every node. The nodes form a chain along the ring starting at the
// root (root, root+1, ..., root-1); the buffer moves chunk by chunk, and each
// node forwards chunk k to the next as soon as it has it, while chunk k+1 is
// still arriving. The last node only receives. Every node sends the buffer
// at most once, and the time is about (chunks + N - 2) chunk transfers.
// N = 1 or count = 0: no messages.
#pragma once

#include <cstddef>

#include "common/dtype.h"
#include "service/ring/chunk_pipeline.h"
#include "service/ring/partition.h"

namespace ringsync::service::ring {

class Broadcast : public ChunkPipeline {
 public:
  Broadcast(transport::Transport& transport, void* data, std::size_t count, DType dtype, int root,
            const RingOptions& options);

 private:
  Status plan() override;
  std::byte* data_;
  DType dtype_;
  int root_;
  RingOptions options_;
  Partition chunks_;  // one segment: the whole buffer
};

}  // namespace ringsync::service::ring
