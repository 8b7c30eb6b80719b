// Allgather: every rank ends with every rank's input, ordered by global rank
// (count elements each).
//
// One node alone: piece i copies chunk (i % chunks) of rank (i / chunks)'s
// input into that rank's slot of every receive buffer.
// One node of several: the ring buffer holds N*L*count elements by global
// rank; this node fills its L slots, which form ring segment n; the whole
// result goes to every rank.
// Between nodes: the ring allgather.
#include "service/collective/copies.h"
#include "service/collective/kind.h"
#include "service/collective/kinds.h"
#include "service/collective/node_operation.h"
#include "service/device/backend.h"
#include "service/ring/allgather.h"

namespace ringsync::service::collective {
namespace {

class Allgather final : public Kind {
 public:
  std::size_t local_pieces(const LocalGrid& grid) const override {
    return grid.chunks_per_rank * grid.plan.ranks.size();
  }

  void local_piece(const LocalGrid& grid, std::size_t i) const override {
    const LocalPlan& plan = grid.plan;
    const std::size_t source = i / grid.chunks_per_rank;
    const std::size_t chunk = i % grid.chunks_per_rank;
    const std::size_t first = grid.first(chunk);
    const std::size_t slot = (source * plan.count + first) * grid.elem_bytes;
    const std::byte* src = plan.ranks[source].send + first * grid.elem_bytes;
    for (const auto& rank : plan.ranks) copy_unless_same(rank.recv + slot, src, grid.length(chunk) * grid.elem_bytes);
  }

  Status on_device(const LocalPlan& plan, std::size_t bytes, device::DeviceQueue& queue) const override {
    // Source s lands in slot s of every output; an in-place source already sits there.
    for (std::size_t s = 0; s < plan.ranks.size(); ++s)
      for (const auto& rank : plan.ranks)
        RINGSYNC_RETURN_IF_ERROR(copy_unless_same(queue, rank.recv + s * bytes, plan.ranks[s].send, bytes));
    return Status::Ok();
  }

  RingBuffer ring_buffer(const OperationShape& shape, std::span<const std::size_t> counts) const override {
    const std::size_t first = counts.empty() ? 0 : counts.front();
    return {first * shape.num_nodes * shape.local_size, 0, first};
  }

  void lay_out(NodeLayout& layout) const override {
    const OperationShape& shape = layout.shape();
    const auto& ranks = layout.tensors()[0];
    std::byte* base = layout.buffer();
    const std::size_t count = layout.first_count();
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const std::size_t slot = static_cast<std::size_t>(shape.node_rank) * shape.local_size + r;
      if (ranks[r].send != nullptr) layout.gather(base + slot * count * layout.element_bytes(), {ranks[r].send}, count);
    }
    for (const auto& c : ranks)
      if (c.recv != nullptr && c.recv != base) layout.scatter(c.recv, {base}, layout.buffer_count());
  }

  Staging staging() const override { return Staging::kSlots; }

  std::unique_ptr<ring::Task> task(const TaskArgs& a) const override {
    return std::make_unique<ring::Allgather>(a.transport, a.work.buffer(), a.work.buffer_count(), a.work.shape().dtype,
                                             a.options);
  }

  const char* data_phase(route::Path) const override { return "ALLGATHER"; }
};

}  // namespace

const Kind& allgather_kind() {
  static const Allgather kind;
  return kind;
}

}  // namespace ringsync::service::collective
