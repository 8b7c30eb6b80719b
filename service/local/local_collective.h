// The data movement of one collective among the local ranks of a node, split
// into independent pieces that the WorkPool runs in parallel. Pure memory
// work: no sockets, no state; tested with plain buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/dtype.h"
#include "common/wire.h"

namespace ringsync::service::local {

// One local rank's buffers, already resolved to this process's mappings.
struct Contribution {
  const std::byte* send = nullptr;  // may equal recv (in place)
  std::byte* recv = nullptr;
};

struct LocalPlan {
  wire::CollectiveKind kind = wire::CollectiveKind::kAllreduce;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  std::size_t count = 0;  // elements per rank: the count of the ranks' calls
  std::uint32_t root = 0;
  std::vector<Contribution> ranks;  // index = local rank
};

class LocalCollective {
 public:
  LocalCollective(LocalPlan plan, std::size_t chunk_bytes);

  std::size_t pieces() const { return pieces_; }
  // Safe to call concurrently for different i.
  void run_piece(std::size_t i) const;

 private:
  void allreduce_piece(std::size_t i) const;
  void broadcast_piece(std::size_t i) const;
  void allgather_piece(std::size_t i) const;
  void reduce_scatter_piece(std::size_t i) const;
  void alltoall_piece(std::size_t i) const;

  LocalPlan plan_;
  std::size_t elem_bytes_ = 1;
  std::size_t chunk_elems_ = 1;
  std::size_t chunks_per_rank_ = 0;  // chunks covering `count` elements
  std::size_t pieces_ = 0;
};

}  // namespace ringsync::service::local
