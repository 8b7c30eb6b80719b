// Allgather: every rank ends with every rank's input, ordered by global rank
// (count elements each). Gather: the root alone (a global rank) ends with it;
// no other rank's output is written (they may pass none).
//
// One node alone: piece i copies chunk (i % chunks) of rank (i / chunks)'s
// input into that rank's slot of every receive buffer.
// One node of several: the ring buffer holds N*L*count elements by global
// rank; this node fills its L slots, which form ring segment n; the whole
// result goes to every rank.
// Between nodes: the ring allgather; a gather's too, so every node ends with
// every slot: N-1 times the traffic a gather to one node needs.
#include "service/collective/copies.h"
#include "service/collective/kind.h"
#include "service/collective/kinds.h"
#include "service/collective/node_operation.h"
#include "service/device/backend.h"
#include "service/ring/allgather.h"

namespace ringsync::service::collective {
namespace {

// The allgather, or with `to_root` the gather.
class Allgather final : public Kind {
 public:
  explicit Allgather(bool to_root) : to_root_(to_root) {}

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
    for (const auto& rank : plan.ranks)
      if (rank.recv != nullptr) copy_unless_same(rank.recv + slot, src, grid.length(chunk) * grid.elem_bytes);
  }

  Status on_device(const LocalPlan& plan, std::size_t bytes, device::DeviceQueue& queue) const override {
    // Source s lands in slot s of every output; an in-place source already sits there.
    for (std::size_t s = 0; s < plan.ranks.size(); ++s)
      for (const auto& rank : plan.ranks)
        if (rank.recv != nullptr)
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
    // (A gather's non-roots pass no output.)
    for (const auto& c : ranks)
      if (c.recv != nullptr && c.recv != base) layout.scatter(c.recv, {base}, layout.buffer_count());
  }

  // A gather's GPU buffers: refused at submission for now (Daemon::prepare).
  Staging staging() const override { return to_root_ ? Staging::kUnserved : Staging::kSlots; }

  std::unique_ptr<ring::Task> task(const TaskArgs& a) const override {
    return std::make_unique<ring::Allgather>(a.transport, a.work.buffer(), a.work.buffer_count(), a.work.shape().dtype,
                                             a.options);
  }

  const char* data_phase(route::Path) const override { return to_root_ ? "GATHER" : "ALLGATHER"; }

 private:
  bool to_root_;
};

}  // namespace

const Kind& allgather_kind() {
  static const Allgather kind(false);
  return kind;
}

const Kind& gather_kind() {
  static const Allgather kind(true);
  return kind;
}

}  // namespace ringsync::service::collective
