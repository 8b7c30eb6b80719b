// Allreduce: every rank ends with the reduction (sum, min, max, prod, avg) of
// every rank's input. Reduce: the root alone (a global rank) ends with it; no
// other rank's output is written (they may pass none).
//
// One node alone: chunk i of every rank is reduced into rank 0's result, which
// is then copied to the other ranks; each rank's chunk i is read before any
// write to it, so in-place buffers are safe. On GPUs the same, queued.
// One node of several: the ring buffer holds the fused tensors back to back,
// each the local reduction of the L ranks' inputs (avg sums here and the data
// task divides by every rank of the job); the result goes to every rank. One
// tensor with one local input is read where it lies (NodeOperation::ring_input).
// Between nodes: the pipelined ring, halving-doubling or the direct algorithm;
// a reduce too, so every node ends with the result: twice the traffic a reduce
// to one node needs (a reduce-scatter, then each segment to the root's node).
#include <numeric>

#include "common/reduce.h"
#include "service/collective/copies.h"
#include "service/collective/kind.h"
#include "service/collective/kinds.h"
#include "service/collective/node_operation.h"
#include "service/device/backend.h"
#include "service/observe/timeline.h"
#include "service/ring/allreduce.h"
#include "service/ring/direct_allreduce.h"
#include "service/ring/halving_doubling.h"

namespace ringsync::service::collective {
namespace {

using Clock = observe::Timeline::Clock;

// Records the two halves of a ring allreduce on the timeline, from the engine
// thread, as the task moves from reduce-scatter to allgather.
class TimedAllreduce final : public ring::Task {
 public:
  TimedAllreduce(std::unique_ptr<ring::Allreduce> inner, observe::Timeline* timeline, std::vector<std::string> names)
      : inner_(std::move(inner)), timeline_(timeline), names_(std::move(names)) {}

  Status post() override {
    start_ = Clock::now();
    return inner_->post();
  }
  ring::TaskState progress() override {
    const ring::TaskState state = inner_->progress();
    if (!switched_ && inner_->gathering()) {
      switched_ = true;
      gather_start_ = Clock::now();
      for (const auto& name : names_) timeline_->phase(name, "REDUCE_SCATTER", start_, gather_start_);
    }
    if (state != ring::TaskState::kInProgress && switched_)
      for (const auto& name : names_) timeline_->phase(name, "ALLGATHER", gather_start_, Clock::now());
    return state;
  }
  void abort(const Status& why) override { inner_->abort(why); }
  const Status& status() const override { return inner_->status(); }

 private:
  std::unique_ptr<ring::Allreduce> inner_;
  observe::Timeline* timeline_;
  std::vector<std::string> names_;
  Clock::time_point start_;
  Clock::time_point gather_start_;
  bool switched_ = false;
};

// The allreduce, or with `to_root` the reduce.
class Allreduce final : public Kind {
 public:
  explicit Allreduce(bool to_root) : to_root_(to_root) {}

  std::size_t local_pieces(const LocalGrid& grid) const override { return grid.chunks_per_rank; }

  // Into rank 0's output, then copied to the others'; a reduce's into the root's alone.
  void local_piece(const LocalGrid& grid, std::size_t i) const override {
    const LocalPlan& plan = grid.plan;
    const std::size_t n = grid.length(i);
    const std::size_t offset = grid.first(i) * grid.elem_bytes;
    std::vector<const void*> srcs(plan.ranks.size());
    for (std::size_t r = 0; r < plan.ranks.size(); ++r) srcs[r] = plan.ranks[r].send + offset;
    std::byte* result = plan.ranks[to_root_ ? plan.root : 0].recv + offset;
    reduce::reduce(result, srcs.data(), srcs.size(), n, plan.dtype, plan.op);
    if (to_root_) return;
    for (std::size_t r = 1; r < plan.ranks.size(); ++r)
      copy_unless_same(plan.ranks[r].recv + offset, result, n * grid.elem_bytes);
  }

  Status on_device(const LocalPlan& plan, std::size_t bytes, device::DeviceQueue& queue) const override {
    std::vector<const void*> srcs;
    for (const auto& rank : plan.ranks) srcs.push_back(rank.send);
    RINGSYNC_RETURN_IF_ERROR(queue.reduce(plan.ranks.at(to_root_ ? plan.root : 0).recv, srcs.data(), srcs.size(),
                                          plan.count, plan.dtype, plan.op));
    return to_root_ ? Status::Ok() : spread_from_first(plan, bytes, queue);
  }

  RingBuffer ring_buffer(const OperationShape&, std::span<const std::size_t> counts) const override {
    const std::size_t count = std::accumulate(counts.begin(), counts.end(), std::size_t{0});
    return {count, 0, count};
  }

  void lay_out(NodeLayout& layout) const override {
    const auto& tensors = layout.tensors();
    std::byte* base = layout.buffer();
    const std::size_t elem = layout.element_bytes();
    std::size_t offset = 0;
    for (std::size_t t = 0; t < tensors.size(); ++t) {
      const std::size_t count = layout.counts()[t];
      std::vector<const std::byte*> srcs;
      for (const auto& c : tensors[t])
        if (c.send != nullptr) srcs.push_back(c.send);
      if (!srcs.empty()) layout.gather(base + offset * elem, srcs, count);
      // Disjoint from the buffer: the one sender's own output when that is
      // apart from its input (the carrier), a buffer of our own otherwise.
      if (tensors.size() == 1 && srcs.size() == 1 && layout.buffer_count() > 0) layout.read_input(srcs[0]);
      // (A reduce's non-roots pass no output.)
      for (const auto& c : tensors[t])
        if (c.recv != nullptr && c.recv != base + offset * elem) layout.scatter(c.recv, {base + offset * elem}, count);
      offset += count;
    }
  }

  // A reduce's GPU buffers: refused at submission for now (Daemon::prepare).
  Staging staging() const override { return to_root_ ? Staging::kUnserved : Staging::kReduced; }

  std::unique_ptr<ring::Task> task(const TaskArgs& a) const override {
    const OperationShape& s = a.work.shape();
    if (a.path == route::Path::kHalvingDoubling)
      return std::make_unique<ring::HalvingDoublingAllreduce>(a.transport, a.work.buffer(), a.work.buffer_count(),
                                                              s.dtype, s.op, a.ranks, a.options);
    if (a.path == route::Path::kDirect)
      return std::make_unique<ring::DirectAllreduce>(a.transport, a.work.buffer(), a.work.buffer_count(), s.dtype,
                                                     s.op, a.ranks, a.options);
    auto ring = std::make_unique<ring::Allreduce>(a.transport, a.work.buffer(), a.work.buffer_count(), s.dtype, s.op,
                                                  a.ranks, a.options);
    if (!a.timeline) return ring;
    return std::make_unique<TimedAllreduce>(std::move(ring), a.timeline, a.names ? *a.names : std::vector<std::string>{});
  }

  bool ring_reads_while_gathering() const override { return true; }

  const char* data_phase(route::Path path) const override {
    if (path == route::Path::kHalvingDoubling) return "HALVING_DOUBLING";
    if (path == route::Path::kDirect) return "DIRECT_ALLREDUCE";
    return nullptr;  // the ring's two halves (TimedAllreduce)
  }

 private:
  bool to_root_;
};

}  // namespace

const Kind& allreduce_kind() {
  static const Allreduce kind(false);
  return kind;
}

const Kind& reduce_kind() {
  static const Allreduce kind(true);
  return kind;
}

}  // namespace ringsync::service::collective
