// Alltoall: block j (count elements) of rank i's input ends as block i of rank
// j's output. No in-place form: every output slot is another rank's input.
//
// One node alone: piece i copies chunk (i % chunks) of block `to` of rank
// `from`'s input into block `from` of rank `to`'s output.
// One node of several: the ring buffer has two halves of N*L*L*count elements
// each. The first (gathered) holds one block per destination node m: for each
// local rank i, its L blocks for node m's ranks. The second receives one block
// per source node in the same shape; scatter copies block [i][j] of node m's
// to local rank j's output slot m*L + i.
// Between nodes: the pairwise exchange of node blocks.
#include <cstring>

#include "service/collective/copies.h"
#include "service/collective/kind.h"
#include "service/collective/kinds.h"
#include "service/collective/node_operation.h"
#include "service/device/backend.h"
#include "service/ring/alltoall.h"

namespace ringsync::service::collective {
namespace {

class Alltoall final : public Kind {
 public:
  std::size_t local_pieces(const LocalGrid& grid) const override {
    return grid.chunks_per_rank * grid.plan.ranks.size() * grid.plan.ranks.size();
  }

  void local_piece(const LocalGrid& grid, std::size_t i) const override {
    const LocalPlan& plan = grid.plan;
    const std::size_t ranks = plan.ranks.size();
    const std::size_t pair = i / grid.chunks_per_rank;
    const std::size_t from = pair / ranks, to = pair % ranks;
    const std::size_t chunk = i % grid.chunks_per_rank;
    const std::size_t first = grid.first(chunk);
    std::memcpy(plan.ranks[to].recv + (from * plan.count + first) * grid.elem_bytes,
                plan.ranks[from].send + (to * plan.count + first) * grid.elem_bytes, grid.length(chunk) * grid.elem_bytes);
  }

  Status on_device(const LocalPlan& plan, std::size_t bytes, device::DeviceQueue& queue) const override {
    for (std::size_t from = 0; from < plan.ranks.size(); ++from)
      for (std::size_t to = 0; to < plan.ranks.size(); ++to)
        RINGSYNC_RETURN_IF_ERROR(
            copy_unless_same(queue, plan.ranks[to].recv + from * bytes, plan.ranks[from].send + to * bytes, bytes));
    return Status::Ok();
  }

  RingBuffer ring_buffer(const OperationShape& shape, std::span<const std::size_t> counts) const override {
    const std::size_t first = counts.empty() ? 0 : counts.front();
    const std::size_t node_block = first * shape.local_size * shape.local_size;
    return {2 * node_block * shape.num_nodes, node_block, 0};
  }

  void lay_out(NodeLayout& layout) const override {
    const OperationShape& shape = layout.shape();
    const auto& ranks = layout.tensors()[0];
    std::byte* base = layout.buffer();
    const std::size_t L = shape.local_size;
    const std::size_t count = layout.first_count();
    const std::size_t elem = layout.element_bytes();
    const std::size_t node_block = layout.node_block();
    const std::byte* received = base + shape.num_nodes * node_block * elem;
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      const Contribution& c = ranks[i];
      for (std::size_t m = 0; m < shape.num_nodes; ++m) {
        const std::size_t block = (m * node_block + i * L * count) * elem;
        if (c.send != nullptr) layout.gather(base + block, {c.send + m * L * count * elem}, L * count);
        // Local rank i of node m sent local rank j here its block for slot m*L + i.
        for (std::size_t j = 0; j < ranks.size(); ++j) {
          if (ranks[j].recv == nullptr) continue;
          const std::size_t from = (m * node_block + (i * L + j) * count) * elem;
          layout.scatter(ranks[j].recv + (m * L + i) * count * elem, {received + from}, count);
        }
      }
    }
  }

  Staging staging() const override { return Staging::kPerRank; }

  std::unique_ptr<ring::Task> task(const TaskArgs& a) const override {
    const std::size_t half = a.work.buffer_count() / 2;
    return std::make_unique<ring::Alltoall>(a.transport, a.work.buffer(),
                                            a.work.buffer() + half * dtype_size(a.work.shape().dtype),
                                            a.work.node_block_count(), a.work.shape().dtype, a.options);
  }

  const char* data_phase(route::Path) const override { return "ALLTOALL"; }
};

}  // namespace

const Kind& alltoall_kind() {
  static const Alltoall kind;
  return kind;
}

}  // namespace ringsync::service::collective
