// A multi-node collective on GPU buffers, staged through host memory: the ring
// runs over host memory (the Debian UCX has no CUDA support), so this node's part
// goes to one pinned host buffer before or during the ring and the result goes
// back to every local rank's GPU output after or during it.
//
// How, the kind says (collective::Staging):
//   stage_in:  reduced    reduce the L inputs on the GPU (into local rank 0's
//                         output); copy that to the host buffer, unless the
//                         allreduce is pipelined (below)
//              root input the root's input, when the root is on this node
//              slots      each local rank's input into its slot
//              per rank   each local rank's input into a host input of its own
//                         (the ring path reduces or packs them; every rank has
//                         an output slot of its own)
//   the ring:  runs on host_contributions(), the host path's view of the node
//   stage_out: the host result to local rank 0's output (unless a pipelined ring
//              put it there already), device to device to the others; per
//              rank: each rank's host output to its own
//
// Pipelined (route::staged_chunk_by_chunk(): an allreduce of at least
// route::kStagedRingBytes on several nodes): the ring
// runs directly over the host buffer as a execution::StagedAllreduce, which copies
// the reduced input in and the result out chunk by chunk while the ring runs
// (copier(), staged_buffers()); the executor then calls result_on_device(). Should
// the negotiation fuse such a tensor with others, the executor fills the host
// buffer whole first (fill_host()) and the ring runs as for any host tensor.
//
// The node's data is reduced already, so the ring path sees one carrier rank
// holding the host buffer and the other local ranks without buffers (null
// send and recv).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/status.h"
#include "cuda/chunk_copier.h"
#include "service/execution/ring_staging.h"
#include "service/collective/kind.h"
#include "service/collective/plan.h"
#include "service/device/backend.h"
#include "service/route/route.h"

namespace ringsync::service::device {

struct NodeShape {
  std::uint32_t node_rank = 0;
  std::uint32_t num_nodes = 1;
  std::uint32_t local_size = 1;
};

class DeviceStaging {
 public:
  // Smallest allreduce that is pipelined (route::kStagedRingBytes).
  static constexpr std::size_t kPipelinedBytes = route::kStagedRingBytes;

  // `plan` holds this node's L local ranks (device addresses); plan.root is a
  // global rank; `device` is where the queues run. Allocates the host buffer (and,
  // pipelined, a copy engine). `backend` outlives the staging. `pipeline_chunk`:
  // the largest copy of a pipelined allreduce (--gpu-staging-chunk); 0 stages
  // whole buffers.
  static Result<std::unique_ptr<DeviceStaging>> create(collective::LocalPlan plan, NodeShape shape,
                                                       DeviceBackend& backend, int device,
                                                       std::size_t pipeline_chunk = 0);

  // Queue and wait: device → host before the ring, host → device after it.
  Status stage_in(DeviceQueue& queue);
  Status stage_out(DeviceQueue& queue);
  // stage_out on a queue of this staging's device. Blocks until copied: for the WorkPool.
  Status stage_out();

  // Whether the ring should run as a StagedAllreduce (the host buffer is not filled).
  bool pipelined() const { return pipelined_ && !host_filled_; }
  // Pipelined: the copy engine, and the buffers it moves between.
  cuda::ChunkCopier& copier() { return *copier_; }
  execution::StagedBuffers staged_buffers() const;
  std::size_t pipeline_chunk() const { return pipeline_chunk_; }
  // The pipelined ring put the result in local rank 0's output already.
  void result_on_device() { result_on_device_ = true; }
  // The whole input into the host buffer now (a pipelined tensor the negotiation
  // fused with others). Blocks until copied: for the WorkPool.
  Status fill_host();

  // The local ranks' buffers as the host ring path sees them (index = local rank).
  std::vector<collective::Contribution> host_contributions() const;

  const collective::LocalPlan& plan() const { return plan_; }
  std::size_t host_bytes() const { return host_->size(); }

 private:
  DeviceStaging(collective::LocalPlan plan, NodeShape shape, collective::Staging layout,
                std::unique_ptr<HostBuffer> host, DeviceBackend& backend, int device);
  // The device buffer that holds this node's input for the ring (allreduce).
  const void* ring_input() const;
  std::size_t element_bytes() const;
  std::size_t rank_bytes() const { return plan_.count * element_bytes(); }
  // Per rank: each local rank has a host input and output of its own
  // (host_send(r), host_recv(r)), as its extent in bytes says.
  wire::Extent rank_extent_bytes() const;
  std::byte* host_send(std::size_t r) const;
  std::byte* host_recv(std::size_t r) const;
  // The global rank of the broadcast root is on this node.
  bool root_here() const;

  collective::LocalPlan plan_;
  NodeShape shape_;
  collective::Staging layout_;
  std::unique_ptr<HostBuffer> host_;
  DeviceBackend* backend_;
  int device_;
  bool pipelined_ = false;
  std::size_t pipeline_chunk_ = 0;
  bool host_filled_ = false;       // the host buffer holds this node's input
  bool result_on_device_ = false;  // the ring's result is in local rank 0's output
  std::unique_ptr<cuda::ChunkCopier> copier_;  // pipelined only
};

}  // namespace ringsync::service::device
