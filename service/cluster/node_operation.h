// One planned operation as this node runs it: the staging buffer the ring
// moves (a fusion buffer for fused allreduces), filled from the local ranks'
// buffers before the ring ("gather": local reduce or copies) and copied back
// to every local rank after it ("scatter"). Both phases are split into
// independent pieces for the WorkPool. Pure memory work, tested with plain
// buffers.
//
// Layouts, with N nodes of L local ranks and this node n:
// - allreduce: the tensors back to back, each the sum (or min, max, prod) of
//   the L local contributions; avg sums here and the ring divides by N*L.
// - broadcast: the root rank's buffer (global rank g lives on node g / L).
// - allgather: N*L*count elements ordered by global rank; this node fills its
//   L slots, which form ring segment n.
// - reduce-scatter: N*L*count elements, the local reduction of every rank's
//   whole input; ring segment n (the ring's reduce-scatter leaves it reduced
//   on this node) holds this node's L output blocks.
// - alltoall: two halves of N*L*L*count elements each. The first (gathered)
//   holds one block per destination node m: for each local rank i, its L
//   blocks for node m's ranks. The second receives one block per source node
//   in the same shape; scatter copies block [i][j] of node m's to local rank
//   j's output slot m*L + i.
// - barrier: no buffer.
//
// Out of place: an allreduce whose gather is one copy (see ring_input()).
//
// Zero copy: when the ring buffer has the layout of one rank's output (one
// allreduce tensor, a broadcast, an allgather) and some local rank's output is
// out of place, that output is the ring buffer: gather writes into it, the ring
// runs on it, scatter copies it to the other ranks only. In-place outputs are
// never used: a failed ring would leave partial results over the rank's input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/wire.h"
#include "service/cluster/ring_buffer_pool.h"
#include "service/local/local_collective.h"

namespace ringsync::service::cluster {

struct OperationShape {
  wire::CollectiveKind kind = wire::CollectiveKind::kAllreduce;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  std::uint32_t root = 0;  // broadcast: a global rank
  std::uint32_t node_rank = 0;
  std::uint32_t num_nodes = 1;
  std::uint32_t local_size = 1;
};

class NodeOperation {
 public:
  // tensors[t][r] is local rank r's buffers for the t-th tensor, of counts[t]
  // elements (per rank). chunk_bytes: the size of one piece of memory work.
  // buffers: where a ring buffer of its own comes from (nullptr: plain new).
  // A local rank whose Contribution has no send buffer (nullptr) adds nothing
  // to the gather, one without a receive buffer gets nothing in the scatter:
  // GPU buffers of a multi-node job arrive staged on one carrier rank per
  // node (service/device/staging.h).
  NodeOperation(const OperationShape& shape, std::vector<std::size_t> counts,
                std::vector<std::vector<local::Contribution>> tensors, std::size_t chunk_bytes,
                RingBufferPool* buffers = nullptr);

  const OperationShape& shape() const { return shape_; }
  // The buffer the ring runs over, and its length in elements.
  std::byte* buffer() { return buffer_; }
  std::size_t buffer_count() const { return buffer_count_; }
  std::size_t buffer_bytes() const { return buffer_count_ * elem_; }
  // Alltoall: elements one node sends each node (L*L*count).
  std::size_t node_block_count() const { return node_block_; }
  // Whether the ring runs in a local rank's output (no buffer of its own).
  bool zero_copy() const { return buffer_ != nullptr && !owned_; }

  // An allreduce of one tensor with one local input (one rank per node): the
  // gather would only copy that input into buffer(). A ring that reads it
  // where it lies (RingOptions::input) needs no gather and never writes it;
  // an in-place rank's buffer is not buffer(), and gets the result from the
  // scatter, after the ring. Null otherwise.
  const std::byte* ring_input() const { return ring_input_; }

  std::size_t gather_pieces() const { return gather_.size(); }
  // The bytes the whole gather writes into buffer().
  std::size_t gather_bytes() const;
  void gather_piece(std::size_t i) const { run(gather_[i]); }
  // The bytes gather piece i writes, from buffer(): [begin, begin + bytes).
  struct Span {
    std::size_t begin = 0, bytes = 0;
  };
  Span gather_span(std::size_t i) const {
    return {static_cast<std::size_t>(gather_[i].dst - buffer_), gather_[i].count * elem_};
  }
  std::size_t scatter_pieces() const { return scatter_.size(); }
  void scatter_piece(std::size_t i) const { run(scatter_[i]); }

 private:
  struct Piece {
    std::byte* dst = nullptr;
    std::vector<const std::byte*> srcs;  // one: a copy; several: a reduction
    std::size_t count = 0;               // elements
  };

  // Adds pieces moving `count` elements, cut into chunks.
  void add(std::vector<Piece>& into, std::byte* dst, std::vector<const std::byte*> srcs,
           std::size_t count);
  void run(const Piece& p) const;

  OperationShape shape_;
  std::size_t elem_;
  std::size_t chunk_elems_;
  ReduceOp local_op_;
  std::size_t buffer_count_ = 0;
  std::size_t node_block_ = 0;
  std::byte* buffer_ = nullptr;
  std::shared_ptr<std::byte[]> owned_;  // when not a rank's output
  const std::byte* ring_input_ = nullptr;
  std::vector<Piece> gather_;
  std::vector<Piece> scatter_;
};

}  // namespace ringsync::service::cluster
