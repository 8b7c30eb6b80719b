// Reduce-scatter: rank g ends with block g (count elements) of the reduction
// of every rank's input (count elements per rank).
//
// One node alone: piece i reduces chunk (i % chunks) of block b = i / chunks
// of every rank's input into rank b's output. In place, rank b's output is
// block b of its own input, which only this piece reads and writes.
// One node of several: the ring buffer holds N*L*count elements, the local
// reduction of every rank's whole input; ring segment n (the ring's
// reduce-scatter leaves it reduced on this node) holds this node's L output
// blocks, copied to their ranks.
// Between nodes: the ring's first phase alone.
#include "common/reduce.h"
#include "service/collective/copies.h"
#include "service/collective/kind.h"
#include "service/collective/kinds.h"
#include "service/collective/node_operation.h"
#include "service/device/backend.h"
#include "service/ring/reduce_scatter.h"

namespace ringsync::service::collective {
namespace {

class ReduceScatter final : public Kind {
 public:
  std::size_t local_pieces(const LocalGrid& grid) const override {
    return grid.chunks_per_rank * grid.plan.ranks.size();
  }

  void local_piece(const LocalGrid& grid, std::size_t i) const override {
    const LocalPlan& plan = grid.plan;
    const std::size_t block = i / grid.chunks_per_rank;
    const std::size_t chunk = i % grid.chunks_per_rank;
    const std::size_t first = grid.first(chunk);
    const std::size_t offset = (block * plan.count + first) * grid.elem_bytes;
    std::vector<const void*> srcs(plan.ranks.size());
    for (std::size_t r = 0; r < plan.ranks.size(); ++r) srcs[r] = plan.ranks[r].send + offset;
    reduce::reduce(plan.ranks[block].recv + first * grid.elem_bytes, srcs.data(), srcs.size(), grid.length(chunk),
                   plan.dtype, plan.op);
  }

  Status on_device(const LocalPlan& plan, std::size_t bytes, device::DeviceQueue& queue) const override {
    // Block b of every input reduced into rank b's output (in place: block b
    // of its own input, read by this reduction only).
    for (std::size_t b = 0; b < plan.ranks.size(); ++b) {
      std::vector<const void*> srcs;
      for (const auto& rank : plan.ranks) srcs.push_back(rank.send + b * bytes);
      RINGSYNC_RETURN_IF_ERROR(
          queue.reduce(plan.ranks[b].recv, srcs.data(), srcs.size(), plan.count, plan.dtype, plan.op));
    }
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
    std::vector<const std::byte*> srcs;
    for (const auto& c : ranks)
      if (c.send != nullptr) srcs.push_back(c.send);
    if (!srcs.empty()) layout.gather(base, srcs, layout.buffer_count());
    for (std::size_t r = 0; r < ranks.size(); ++r) {
      const std::size_t slot = static_cast<std::size_t>(shape.node_rank) * shape.local_size + r;
      if (ranks[r].recv != nullptr) layout.scatter(ranks[r].recv, {base + slot * count * layout.element_bytes()}, count);
    }
  }

  Staging staging() const override { return Staging::kPerRank; }

  std::unique_ptr<ring::Task> task(const TaskArgs& a) const override {
    // The ring's first phase alone: segment n, this node's output blocks, ends reduced here.
    const OperationShape& s = a.work.shape();
    return std::make_unique<ring::ReduceScatter>(a.transport, a.work.buffer(), a.work.buffer_count(), s.dtype, s.op,
                                                 a.ranks, a.options);
  }

  const char* data_phase(route::Path) const override { return "REDUCE_SCATTER"; }
};

}  // namespace

const Kind& reduce_scatter_kind() {
  static const ReduceScatter kind;
  return kind;
}

}  // namespace ringsync::service::collective
