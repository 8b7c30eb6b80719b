// What the daemon does for one collective kind, in one place (Gloo gives each
// algorithm its file): one class per kind (allreduce.cpp, broadcast.cpp, ...),
// found by kind_of(). A kind says
//   - on one node alone, the memory work among the local ranks, in independent
//     pieces (LocalCollective), or queued on a GPU when the buffers are device
//     memory;
//   - on one node of several, the ring buffer and the pieces that fill it from
//     the local ranks before the data task and copy the result back after it
//     (NodeOperation), and how GPU buffers are staged through host memory;
//   - between the nodes, the data task (service/ring/) for the path the route
//     chose, and its timeline phase.
// What the kind means to every side (its arguments, extent, in place, busbw
// factor) is the table of common/collective_kind.h. Which path a collective
// takes is service/route/route.h.
//
// This folder depends on common/, the ring's tasks (service/ring/), the
// transport and device-queue interfaces, route/ (path names) and the timeline.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "service/collective/plan.h"
#include "service/ring/task.h"
#include "service/route/route.h"

namespace ringsync::service::transport {
class Transport;
}
namespace ringsync::service::device {
class DeviceQueue;
}
namespace ringsync::service::observe {
class Timeline;
}

namespace ringsync::service::collective {

// One node alone: a plan cut into chunks of memory work.
struct LocalGrid {
  const LocalPlan& plan;
  std::size_t elem_bytes = 1;
  std::size_t chunk_elems = 1;
  std::size_t chunks_per_rank = 0;  // chunks covering `count` elements

  std::size_t first(std::size_t chunk) const { return chunk * chunk_elems; }
  std::size_t length(std::size_t chunk) const { return std::min(chunk_elems, plan.count - first(chunk)); }
};

// One operation as this node of several runs it.
struct OperationShape {
  wire::CollectiveKind kind = wire::CollectiveKind::kAllreduce;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  std::uint32_t root = 0;  // rooted kinds: a global rank
  std::uint32_t node_rank = 0;
  std::uint32_t num_nodes = 1;
  std::uint32_t local_size = 1;
};

// This node's ring buffer for an operation.
struct RingBuffer {
  std::size_t count = 0;       // elements
  std::size_t node_block = 0;  // alltoall: elements one node sends each node
  // Elements of a local rank's input when the buffer has the layout of one
  // rank's output (zero copy: that output may carry the ring); 0: it never has.
  std::size_t carrier_send = 0;
};

class NodeLayout;     // node_operation.h
class NodeOperation;  // node_operation.h

// How this node's part of a GPU collective of several nodes goes through one
// host buffer (device/staging.h).
enum class Staging : std::uint8_t {
  kNone,       // no data
  kReduced,    // the L inputs reduced on the GPU, one copy; the result to every output
  kRootInput,  // the root's input, where the root is on this node; the result to every output
  kSlots,      // each rank's input at its global slot; the whole result to every output
  kPerRank,    // each rank's input and output apart: every rank its own result
  kUnserved,   // GPU buffers not served yet (reduce, gather, scatter): refused at submission
};

// What a data task is built from.
struct TaskArgs {
  transport::Transport& transport;
  NodeOperation& work;
  route::Path path;  // ring, halving-doubling or direct
  const ring::RingOptions& options;
  std::size_t ranks = 1;        // every rank of the job: avg divides by it
  std::uint32_t root_node = 0;  // rooted kinds: the node of the root
  // A task that records its own phases writes them here (null: no timeline).
  observe::Timeline* timeline = nullptr;
  const std::vector<std::string>* names = nullptr;
};

class Kind {
 public:
  virtual ~Kind() = default;

  // One node alone: how many pieces, and piece i (safe to run concurrently
  // for different i; in-place buffers are read before they are written).
  virtual std::size_t local_pieces(const LocalGrid& grid) const = 0;
  virtual void local_piece(const LocalGrid& grid, std::size_t i) const = 0;
  // One node alone, GPU buffers: queues the work (the caller synchronizes).
  // `bytes`: one rank's count in bytes, never 0.
  virtual Status on_device(const LocalPlan& plan, std::size_t bytes, device::DeviceQueue& queue) const = 0;

  // One node of several: the ring buffer for tensors of `counts` elements (per
  // rank), and the pieces that fill and empty it (NodeOperation).
  virtual RingBuffer ring_buffer(const OperationShape& shape, std::span<const std::size_t> counts) const = 0;
  virtual void lay_out(NodeLayout& layout) const = 0;
  virtual Staging staging() const = 0;

  // The data task between the nodes, for route path args.path.
  virtual std::unique_ptr<ring::Task> task(const TaskArgs& args) const = 0;
  // Whether its ring task may start before the gather is over (under a
  // ring::StageGate) or read one local input where it lies (RingOptions::gate,
  // RingOptions::input; the ring allreduce's).
  virtual bool ring_reads_while_gathering() const { return false; }
  // Its timeline phase; null where the task records its own (TaskArgs::timeline).
  virtual const char* data_phase(route::Path path) const = 0;
};

// The kind's class; an unknown kind (never past the wire codecs) is the barrier's.
const Kind& kind_of(wire::CollectiveKind kind);

}  // namespace ringsync::service::collective
