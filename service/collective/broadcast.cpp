// Broadcast: every rank ends with the root's input (the root a global rank;
// global rank g lives on node g / L).
//
// One node alone: the root's chunk copied to every other rank.
// One node of several: the ring buffer is the root's buffer, filled on the
// root's node only; the result goes to every rank.
// Between nodes: the ring's pipelined broadcast from the root's node.
#include "service/collective/copies.h"
#include "service/collective/kind.h"
#include "service/collective/kinds.h"
#include "service/collective/node_operation.h"
#include "service/device/backend.h"
#include "service/ring/broadcast.h"

namespace ringsync::service::collective {
namespace {

class Broadcast final : public Kind {
 public:
  std::size_t local_pieces(const LocalGrid& grid) const override { return grid.chunks_per_rank; }

  void local_piece(const LocalGrid& grid, std::size_t i) const override {
    const std::size_t offset = grid.first(i) * grid.elem_bytes;
    const std::byte* src = grid.plan.ranks[grid.plan.root].send + offset;
    for (const auto& rank : grid.plan.ranks) copy_unless_same(rank.recv + offset, src, grid.length(i) * grid.elem_bytes);
  }

  Status on_device(const LocalPlan& plan, std::size_t bytes, device::DeviceQueue& queue) const override {
    const std::byte* src = plan.ranks.at(plan.root).send;
    for (const auto& rank : plan.ranks) RINGSYNC_RETURN_IF_ERROR(copy_unless_same(queue, rank.recv, src, bytes));
    return Status::Ok();
  }

  RingBuffer ring_buffer(const OperationShape&, std::span<const std::size_t> counts) const override {
    const std::size_t count = counts.empty() ? 0 : counts.front();
    return {count, 0, count};
  }

  void lay_out(NodeLayout& layout) const override {
    const OperationShape& shape = layout.shape();
    const auto& ranks = layout.tensors()[0];
    std::byte* base = layout.buffer();
    const std::uint32_t root_node = shape.root / shape.local_size;
    const std::uint32_t root_local = shape.root % shape.local_size;
    if (root_node == shape.node_rank && ranks[root_local].send != nullptr)
      layout.gather(base, {ranks[root_local].send}, layout.first_count());
    for (const auto& c : ranks)
      if (c.recv != nullptr && c.recv != base) layout.scatter(c.recv, {base}, layout.first_count());
  }

  Staging staging() const override { return Staging::kRootInput; }

  std::unique_ptr<ring::Task> task(const TaskArgs& a) const override {
    return std::make_unique<ring::Broadcast>(a.transport, a.work.buffer(), a.work.buffer_count(), a.work.shape().dtype,
                                             static_cast<int>(a.root_node), a.options);
  }

  const char* data_phase(route::Path) const override { return "BROADCAST"; }
};

}  // namespace

const Kind& broadcast_kind() {
  static const Broadcast kind;
  return kind;
}

}  // namespace ringsync::service::collective
