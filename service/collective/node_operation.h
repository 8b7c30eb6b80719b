// One planned operation as this node of several runs it: the ring buffer the
// data task moves (a fusion buffer for fused allreduces), filled from the local
// ranks' buffers before the data task ("gather": local reduce or copies) and
// copied back to every local rank after it ("scatter"). Both phases are split
// into independent pieces for the WorkPool. Each kind lays out its buffer and
// pieces (kind.h, the kind's file says its layout); this class holds them. Pure
// memory work, tested with plain buffers.
//
// Out of place: an allreduce whose gather is one copy (see ring_input()).
//
// Zero copy: when the ring buffer has the layout of one rank's output (one
// allreduce tensor, a broadcast, an allgather: RingBuffer::carrier_send) and
// some local rank's output is out of place, that output is the ring buffer:
// gather writes into it, the data task runs on it, scatter copies it to the
// other ranks only. In-place outputs are never used: a failed ring would leave
// partial results over the rank's input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/dtype.h"
#include "service/collective/kind.h"
#include "service/collective/plan.h"
#include "service/collective/ring_buffer_pool.h"

namespace ringsync::service::collective {

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
                std::vector<std::vector<Contribution>> tensors, std::size_t chunk_bytes,
                RingBufferPool* buffers = nullptr);

  const OperationShape& shape() const { return shape_; }
  // The buffer the data task runs over, and its length in elements.
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
  friend class NodeLayout;
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

// What a kind's lay_out() reads, and the pieces it adds (NodeOperation makes one).
class NodeLayout {
 public:
  NodeLayout(NodeOperation& op, const std::vector<std::size_t>& counts,
             const std::vector<std::vector<Contribution>>& tensors)
      : op_(op), counts_(counts), tensors_(tensors) {}

  const OperationShape& shape() const { return op_.shape_; }
  const std::vector<std::size_t>& counts() const { return counts_; }
  // tensors()[t][r]: local rank r's buffers for tensor t.
  const std::vector<std::vector<Contribution>>& tensors() const { return tensors_; }
  std::size_t first_count() const { return counts_.empty() ? 0 : counts_.front(); }
  std::size_t element_bytes() const { return op_.elem_; }
  std::byte* buffer() const { return op_.buffer_; }
  std::size_t buffer_count() const { return op_.buffer_count_; }
  std::size_t node_block() const { return op_.node_block_; }

  // `count` elements into dst before the data task (one source copies,
  // several reduce), or out of the buffer after it.
  void gather(std::byte* dst, std::vector<const std::byte*> srcs, std::size_t count) {
    op_.add(op_.gather_, dst, std::move(srcs), count);
  }
  void scatter(std::byte* dst, std::vector<const std::byte*> srcs, std::size_t count) {
    op_.add(op_.scatter_, dst, std::move(srcs), count);
  }
  // The data task reads this input where it lies (NodeOperation::ring_input()).
  void read_input(const std::byte* input) { op_.ring_input_ = input; }

 private:
  NodeOperation& op_;
  const std::vector<std::size_t>& counts_;
  const std::vector<std::vector<Contribution>>& tensors_;
};

}  // namespace ringsync::service::collective
