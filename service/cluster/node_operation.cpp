#include "service/cluster/node_operation.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>

#include "common/reduce.h"

namespace ringsync::service::cluster {

NodeOperation::NodeOperation(const OperationShape& shape, std::vector<std::size_t> counts,
                             std::vector<std::vector<local::Contribution>> tensors,
                             std::size_t chunk_bytes, RingBufferPool* buffers)
    : shape_(shape),
      elem_(dtype_size(shape.dtype)),
      chunk_elems_(std::max<std::size_t>(1, chunk_bytes / dtype_size(shape.dtype))),
      local_op_(shape.op == ReduceOp::kAvg ? ReduceOp::kSum : shape.op) {
  const std::size_t L = shape.local_size;
  const std::size_t ranks = static_cast<std::size_t>(shape.num_nodes) * L;
  const std::size_t first_count = counts.empty() ? 0 : counts.front();
  switch (shape.kind) {
    case wire::CollectiveKind::kAllreduce:
      buffer_count_ = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
      break;
    case wire::CollectiveKind::kBroadcast: buffer_count_ = first_count; break;
    case wire::CollectiveKind::kAllgather: buffer_count_ = first_count * ranks; break;
    case wire::CollectiveKind::kBarrier: buffer_count_ = 0; break;
    case wire::CollectiveKind::kReduceScatter: buffer_count_ = first_count * ranks; break;
    case wire::CollectiveKind::kAlltoall:
      node_block_ = first_count * L * L;
      buffer_count_ = 2 * node_block_ * shape.num_nodes;
      break;
  }
  // A local rank whose output can carry the ring (see the header): one tensor,
  // output out of place and not overlapping its own input.
  std::size_t carrier = SIZE_MAX;
  const bool one_layout = (shape.kind == wire::CollectiveKind::kAllreduce ||
                           shape.kind == wire::CollectiveKind::kBroadcast ||
                           shape.kind == wire::CollectiveKind::kAllgather) &&
                          tensors.size() == 1 && buffer_count_ > 0;
  if (one_layout) {
    const std::size_t recv_bytes = buffer_count_ * elem_;
    const std::size_t send_bytes =
        (shape.kind == wire::CollectiveKind::kAllgather ? first_count : buffer_count_) * elem_;
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
  std::byte* base = buffer_;

  switch (shape.kind) {
    case wire::CollectiveKind::kAllreduce: {
      std::size_t offset = 0;
      for (std::size_t t = 0; t < tensors.size(); ++t) {
        std::vector<const std::byte*> srcs;
        for (const auto& c : tensors[t])
          if (c.send != nullptr) srcs.push_back(c.send);
        if (!srcs.empty()) add(gather_, base + offset * elem_, srcs, counts[t]);
        // Disjoint from the buffer: the one sender's own output when that is
        // apart from its input (the carrier above), a buffer of our own otherwise.
        if (tensors.size() == 1 && srcs.size() == 1 && buffer_count_ > 0) ring_input_ = srcs[0];
        for (const auto& c : tensors[t])
          if (c.recv != nullptr && c.recv != base + offset * elem_)
            add(scatter_, c.recv, {base + offset * elem_}, counts[t]);
        offset += counts[t];
      }
      break;
    }
    case wire::CollectiveKind::kBroadcast: {
      if (tensors.empty()) break;
      const std::uint32_t root_node = shape.root / shape.local_size;
      const std::uint32_t root_local = shape.root % shape.local_size;
      if (root_node == shape.node_rank && tensors[0][root_local].send != nullptr)
        add(gather_, base, {tensors[0][root_local].send}, first_count);
      for (const auto& c : tensors[0])
        if (c.recv != nullptr && c.recv != base) add(scatter_, c.recv, {base}, first_count);
      break;
    }
    case wire::CollectiveKind::kAllgather: {
      if (tensors.empty()) break;
      for (std::size_t r = 0; r < tensors[0].size(); ++r) {
        const std::size_t slot = static_cast<std::size_t>(shape.node_rank) * L + r;
        if (tensors[0][r].send != nullptr)
          add(gather_, base + slot * first_count * elem_, {tensors[0][r].send}, first_count);
      }
      for (const auto& c : tensors[0])
        if (c.recv != nullptr && c.recv != base) add(scatter_, c.recv, {base}, buffer_count_);
      break;
    }
    case wire::CollectiveKind::kReduceScatter: {
      if (tensors.empty()) break;
      std::vector<const std::byte*> srcs;
      for (const auto& c : tensors[0])
        if (c.send != nullptr) srcs.push_back(c.send);
      if (!srcs.empty()) add(gather_, base, srcs, buffer_count_);
      for (std::size_t r = 0; r < tensors[0].size(); ++r) {
        const std::size_t slot = static_cast<std::size_t>(shape.node_rank) * L + r;
        if (tensors[0][r].recv != nullptr)
          add(scatter_, tensors[0][r].recv, {base + slot * first_count * elem_}, first_count);
      }
      break;
    }
    case wire::CollectiveKind::kAlltoall: {
      if (tensors.empty()) break;
      const std::size_t nodes = shape.num_nodes;
      const std::byte* received = base + nodes * node_block_ * elem_;
      for (std::size_t i = 0; i < tensors[0].size(); ++i) {
        const local::Contribution& c = tensors[0][i];
        for (std::size_t m = 0; m < nodes; ++m) {
          const std::size_t block = (m * node_block_ + i * L * first_count) * elem_;
          if (c.send != nullptr) add(gather_, base + block, {c.send + m * L * first_count * elem_}, L * first_count);
          // Local rank i of node m sent local rank j here its block for slot m*L + i.
          for (std::size_t j = 0; j < tensors[0].size(); ++j) {
            if (tensors[0][j].recv == nullptr) continue;
            const std::size_t from = (m * node_block_ + (i * L + j) * first_count) * elem_;
            add(scatter_, tensors[0][j].recv + (m * L + i) * first_count * elem_, {received + from}, first_count);
          }
        }
      }
      break;
    }
    case wire::CollectiveKind::kBarrier: break;
  }
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

}  // namespace ringsync::service::cluster
