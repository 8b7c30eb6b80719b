// A multi-node collective on GPU buffers, staged through host memory: the ring
// runs over host memory (the Debian UCX has no CUDA support), so before it
// this node's part goes to one pinned host buffer and after it the result goes
// back to every local rank's GPU output.
//
//   stage_in:  allreduce  reduce the L inputs on the GPU (into local rank 0's
//                         output), copy that to the host buffer
//              broadcast  the root's input, when the root is on this node
//              allgather  each local rank's input into its slot
//   the ring:  runs on host_contributions(), the host path's view of the node
//   stage_out: the host result to local rank 0's output, device to device to
//              the others
//
// The node's data is reduced already, so the ring path sees one carrier rank
// holding the host buffer and the other local ranks without buffers (null
// send and recv). Whole buffers are copied at once: the pipelined staging of
// cuda/ (chunked copies overlapping the ring) can replace stage_in/stage_out.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "service/device_backend.h"
#include "service/local_collective.h"

namespace ringsync::service {

struct NodeShape {
  std::uint32_t node_rank = 0;
  std::uint32_t num_nodes = 1;
  std::uint32_t local_size = 1;
};

class DeviceStaging {
 public:
  // `plan` holds this node's L local ranks (device addresses); plan.root is a
  // global rank. Allocates the host buffer.
  static Result<std::unique_ptr<DeviceStaging>> create(LocalPlan plan, NodeShape shape,
                                                       DeviceBackend& backend);

  // Queue and wait: device → host before the ring, host → device after it.
  Status stage_in(DeviceQueue& queue);
  Status stage_out(DeviceQueue& queue);

  // The local ranks' buffers as the host ring path sees them (index = local rank).
  std::vector<Contribution> host_contributions() const;

  const LocalPlan& plan() const { return plan_; }
  std::size_t host_bytes() const { return host_->size(); }

 private:
  DeviceStaging(LocalPlan plan, NodeShape shape, std::unique_ptr<HostBuffer> host);
  std::size_t element_bytes() const;
  std::size_t rank_bytes() const { return plan_.count * element_bytes(); }
  // The global rank of the broadcast root is on this node.
  bool root_here() const;

  LocalPlan plan_;
  NodeShape shape_;
  std::unique_ptr<HostBuffer> host_;
};

}  // namespace ringsync::service
