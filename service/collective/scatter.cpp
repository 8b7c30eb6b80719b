// Scatter: rank g ends with block g (count elements) of the root's input
// (count elements per rank, by global rank); only the root passes an input.
//
// One node alone: piece i copies chunk (i % chunks) of the root's block
// b = i / chunks to rank b's output.
// One node of several: the ring buffer is the root's whole input, filled on
// the root's node only; each local rank's block goes to it from its global slot.
// Between nodes: the ring's pipelined broadcast from the root's node, so every
// node receives every block: N times the traffic a scatter needs (each node's
// blocks from the root's node).
#include "service/collective/copies.h"
#include "service/collective/kind.h"
#include "service/collective/kinds.h"
#include "service/collective/node_operation.h"
#include "service/device/backend.h"
#include "service/ring/broadcast.h"

namespace ringsync::service::collective {
namespace {

class Scatter final : public Kind {
 public:
  std::size_t local_pieces(const LocalGrid& grid) const override {
    return grid.chunks_per_rank * grid.plan.ranks.size();
  }

  void local_piece(const LocalGrid& grid, std::size_t i) const override {
    const LocalPlan& plan = grid.plan;
    const std::size_t block = i / grid.chunks_per_rank;
    const std::size_t chunk = i % grid.chunks_per_rank;
    const std::size_t first = grid.first(chunk);
    const std::byte* src = plan.ranks[plan.root].send + (block * plan.count + first) * grid.elem_bytes;
    copy_unless_same(plan.ranks[block].recv + first * grid.elem_bytes, src, grid.length(chunk) * grid.elem_bytes);
  }

  Status on_device(const LocalPlan& plan, std::size_t bytes, device::DeviceQueue& queue) const override {
    const std::byte* in = plan.ranks.at(plan.root).send;
    for (std::size_t b = 0; b < plan.ranks.size(); ++b)
      RINGSYNC_RETURN_IF_ERROR(copy_unless_same(queue, plan.ranks[b].recv, in + b * bytes, bytes));
    return Status::Ok();
  }

  RingBuffer ring_buffer(const OperationShape& shape, std::span<const std::size_t> counts) const override {
    const std::size_t first = counts.empty() ? 0 : counts.front();
    return {first * shape.num_nodes * shape.local_size, 0, 0};
  }

  void lay_out(NodeLayout& layout) const override {
    const OperationShape& shape = layout.shape();
    const auto& ranks = layout.tensors()[0];
    std::byte* base = layout.buffer();
    const std::size_t count = layout.first_count();
    const std::uint32_t root_node = shape.root / shape.local_size;
    const std::uint32_t root_local = shape.root % shape.local_size;
    if (root_node == shape.node_rank && ranks[root_local].send != nullptr)
      layout.gather(base, {ranks[root_local].send}, layout.buffer_count());
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const std::size_t slot = static_cast<std::size_t>(shape.node_rank) * shape.local_size + r;
      if (ranks[r].recv != nullptr) layout.scatter(ranks[r].recv, {base + slot * count * layout.element_bytes()}, count);
    }
  }

  // GPU buffers: refused at submission for now (Daemon::prepare); one node would run on_device().
  Staging staging() const override { return Staging::kUnserved; }

  std::unique_ptr<ring::Task> task(const TaskArgs& a) const override {
    return std::make_unique<ring::Broadcast>(a.transport, a.work.buffer(), a.work.buffer_count(), a.work.shape().dtype,
                                             static_cast<int>(a.root_node), a.options);
  }

  const char* data_phase(route::Path) const override { return "SCATTER (RING BROADCAST)"; }
};

}  // namespace

const Kind& scatter_kind() {
  static const Scatter kind;
  return kind;
}

}  // namespace ringsync::service::collective
