#include "service/collective/node_operation.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/reduce.h"

namespace ringsync::service::collective {

NodeOperation::NodeOperation(const OperationShape& shape, std::vector<std::size_t> counts,
                             std::vector<std::vector<Contribution>> tensors, std::size_t chunk_bytes,
                             RingBufferPool* buffers)
    : shape_(shape),
      elem_(dtype_size(shape.dtype)),
      chunk_elems_(std::max<std::size_t>(1, chunk_bytes / dtype_size(shape.dtype))),
      local_op_(shape.op == ReduceOp::kAvg ? ReduceOp::kSum : shape.op) {
  const Kind& kind = kind_of(shape.kind);
  const RingBuffer ring = kind.ring_buffer(shape, counts);
  buffer_count_ = ring.count;
  node_block_ = ring.node_block;
  // A local rank whose output can carry the ring (see the header): one tensor,
  // output out of place and not overlapping its own input.
  std::size_t carrier = SIZE_MAX;
  if (ring.carrier_send > 0 && tensors.size() == 1 && buffer_count_ > 0) {
    const std::size_t recv_bytes = buffer_count_ * elem_;
    const std::size_t send_bytes = ring.carrier_send * elem_;
    for (std::size_t r = 0; r < tensors[0].size() && carrier == SIZE_MAX; ++r) {
      const auto& c = tensors[0][r];
      const auto recv = reinterpret_cast<std::uintptr_t>(c.recv);
      const auto send = reinterpret_cast<std::uintptr_t>(c.send);
      const bool disjoint = recv + recv_bytes <= send || send + send_bytes <= recv;
      if (c.recv != nullptr && c.send != nullptr && disjoint) carrier = r;
    }
  }
  if (carrier != SIZE_MAX) {
    buffer_ = tensors[0][carrier].recv;
  } else if (buffer_count_ > 0) {
    owned_ = buffers ? buffers->acquire(buffer_count_ * elem_)
                     : std::shared_ptr<std::byte[]>(new std::byte[buffer_count_ * elem_]);
    buffer_ = owned_.get();
  }
  if (tensors.empty()) return;
  NodeLayout layout(*this, counts, tensors);
  kind.lay_out(layout);
}

std::size_t NodeOperation::gather_bytes() const {
  std::size_t bytes = 0;
  for (const Piece& p : gather_) bytes += p.count * elem_;
  return bytes;
}

void NodeOperation::add(std::vector<Piece>& into, std::byte* dst,
                        std::vector<const std::byte*> srcs, std::size_t count) {
  for (std::size_t done = 0; done < count; done += chunk_elems_) {
    Piece p;
    p.count = std::min(chunk_elems_, count - done);
    p.dst = dst + done * elem_;
    for (const std::byte* s : srcs) p.srcs.push_back(s + done * elem_);
    into.push_back(std::move(p));
  }
}

void NodeOperation::run(const Piece& p) const {
  if (p.srcs.size() == 1) {
    if (p.dst != p.srcs[0]) std::memcpy(p.dst, p.srcs[0], p.count * elem_);
    return;
  }
  reduce::reduce(p.dst, reinterpret_cast<const void* const*>(p.srcs.data()), p.srcs.size(),
                 p.count, shape_.dtype, local_op_);
}

}  // namespace ringsync::service::collective
