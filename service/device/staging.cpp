#include "service/device/staging.h"

#include "service/collective/copies.h"
#include "service/collective/kind.h"
#include "service/route/route.h"

namespace ringsync::service::device {

Result<std::unique_ptr<DeviceStaging>> DeviceStaging::create(collective::LocalPlan plan, NodeShape shape,
                                                             DeviceBackend& backend, int device,
                                                             std::size_t pipeline_chunk) {
  if (plan.ranks.size() != shape.local_size || shape.local_size == 0)
    return Status::Internal("staging a GPU collective of " + std::to_string(plan.ranks.size()) +
                            " local ranks on a node of " + std::to_string(shape.local_size));
  const std::size_t ranks = static_cast<std::size_t>(shape.num_nodes) * shape.local_size;
  const wire::Extent extent = wire::extent(plan.kind, plan.count, ranks);
  const collective::Staging layout = collective::kind_of(plan.kind).staging();
  if (layout == collective::Staging::kUnserved)
    return Status::InvalidArgument(std::string(wire::collective_kind_name(plan.kind)) +
                                   " of GPU buffers in a job of several nodes is not served yet; pass host buffers");
  std::size_t bytes = extent.recv * dtype_size(plan.dtype);
  if (layout == collective::Staging::kPerRank)
    bytes = (extent.send + extent.recv) * dtype_size(plan.dtype) * shape.local_size;
  auto host = backend.host_buffer(bytes);
  if (!host.ok()) return host.status();
  std::unique_ptr<DeviceStaging> staging(
      new DeviceStaging(std::move(plan), shape, layout, std::move(host).value(), backend, device));
  if (pipeline_chunk > 0 && route::staged_chunk_by_chunk(staging->plan_.kind, bytes, shape.num_nodes)) {
    auto copier = backend.copier(device);
    if (!copier.ok()) return copier.status();
    staging->copier_ = std::move(copier).value();
    staging->pipelined_ = true;
    staging->pipeline_chunk_ = pipeline_chunk;
  }
  return staging;
}

DeviceStaging::DeviceStaging(collective::LocalPlan plan, NodeShape shape, collective::Staging layout,
                             std::unique_ptr<HostBuffer> host, DeviceBackend& backend, int device)
    : plan_(std::move(plan)),
      shape_(shape),
      layout_(layout),
      host_(std::move(host)),
      backend_(&backend),
      device_(device) {}

const void* DeviceStaging::ring_input() const {
  // One local rank: its input as it is; several: their reduction, in rank 0's output.
  return plan_.ranks.size() == 1 ? plan_.ranks[0].send : plan_.ranks[0].recv;
}

execution::StagedBuffers DeviceStaging::staged_buffers() const {
  return {host_->data(), static_cast<const std::byte*>(ring_input()), static_cast<std::byte*>(plan_.ranks[0].recv)};
}

Status DeviceStaging::fill_host() {
  if (host_filled_) return Status::Ok();
  auto queue = backend_->queue(device_);
  if (!queue.ok()) return queue.status();
  RINGSYNC_RETURN_IF_ERROR((*queue)->copy_to_host(host_->data(), ring_input(), rank_bytes()));
  RINGSYNC_RETURN_IF_ERROR((*queue)->synchronize());
  host_filled_ = true;
  return Status::Ok();
}

std::size_t DeviceStaging::element_bytes() const { return dtype_size(plan_.dtype); }

wire::Extent DeviceStaging::rank_extent_bytes() const {
  const wire::Extent e =
      wire::extent(plan_.kind, plan_.count, static_cast<std::uint64_t>(shape_.num_nodes) * shape_.local_size);
  return {e.send * element_bytes(), e.recv * element_bytes()};
}

std::byte* DeviceStaging::host_send(std::size_t r) const { return host_->data() + r * rank_extent_bytes().send; }

std::byte* DeviceStaging::host_recv(std::size_t r) const {
  const wire::Extent e = rank_extent_bytes();
  return host_->data() + plan_.ranks.size() * e.send + r * e.recv;
}

bool DeviceStaging::root_here() const { return plan_.root / shape_.local_size == shape_.node_rank; }

Status DeviceStaging::stage_in(DeviceQueue& queue) {
  const std::size_t bytes = rank_bytes();
  if (bytes == 0) return Status::Ok();
  std::byte* host = host_->data();
  switch (layout_) {
    case collective::Staging::kReduced: {
      const auto& ranks = plan_.ranks;
      if (ranks.size() > 1) {
        std::vector<const void*> srcs;
        for (const auto& rank : ranks) srcs.push_back(rank.send);
        // Avg sums here; the ring divides by every rank of the job.
        const ReduceOp op = plan_.op == ReduceOp::kAvg ? ReduceOp::kSum : plan_.op;
        RINGSYNC_RETURN_IF_ERROR(
            queue.reduce(ranks[0].recv, srcs.data(), srcs.size(), plan_.count, plan_.dtype, op));
      }
      // Pipelined, the ring copies it in chunk by chunk as it goes.
      if (!pipelined_) {
        RINGSYNC_RETURN_IF_ERROR(queue.copy_to_host(host, ring_input(), bytes));
        host_filled_ = true;
      }
      break;
    }
    case collective::Staging::kRootInput:
      if (root_here())
        RINGSYNC_RETURN_IF_ERROR(
            queue.copy_to_host(host, plan_.ranks[plan_.root % shape_.local_size].send, bytes));
      break;
    case collective::Staging::kSlots: {
      const std::size_t first_slot = static_cast<std::size_t>(shape_.node_rank) * shape_.local_size;
      for (std::size_t r = 0; r < plan_.ranks.size(); ++r)
        RINGSYNC_RETURN_IF_ERROR(
            queue.copy_to_host(host + (first_slot + r) * bytes, plan_.ranks[r].send, bytes));
      break;
    }
    case collective::Staging::kPerRank:
      for (std::size_t r = 0; r < plan_.ranks.size(); ++r)
        RINGSYNC_RETURN_IF_ERROR(queue.copy_to_host(host_send(r), plan_.ranks[r].send, rank_extent_bytes().send));
      break;
    case collective::Staging::kNone:
    case collective::Staging::kUnserved: return Status::Ok();
  }
  return queue.synchronize();
}

std::vector<collective::Contribution> DeviceStaging::host_contributions() const {
  std::vector<collective::Contribution> view(plan_.ranks.size());
  if (rank_bytes() == 0) return view;
  std::byte* host = host_->data();
  switch (layout_) {
    case collective::Staging::kReduced: view[0] = collective::Contribution{host, host}; break;
    case collective::Staging::kRootInput: {
      // Only the root's input is read: the carrier sits where the root is.
      const std::size_t carrier = root_here() ? plan_.root % shape_.local_size : 0;
      view[carrier] = collective::Contribution{host, host};
      break;
    }
    case collective::Staging::kSlots: {
      const std::size_t first_slot = static_cast<std::size_t>(shape_.node_rank) * shape_.local_size;
      for (std::size_t r = 0; r < view.size(); ++r)
        view[r].send = host + (first_slot + r) * rank_bytes();
      view[0].recv = host;  // in place: the gathered result lands around the inputs
      break;
    }
    case collective::Staging::kPerRank:
      for (std::size_t r = 0; r < view.size(); ++r) view[r] = collective::Contribution{host_send(r), host_recv(r)};
      break;
    case collective::Staging::kNone:
    case collective::Staging::kUnserved: break;
  }
  return view;
}

Status DeviceStaging::stage_out() {
  auto queue = backend_->queue(device_);
  if (!queue.ok()) return queue.status();
  return stage_out(**queue);
}

Status DeviceStaging::stage_out(DeviceQueue& queue) {
  const bool moves = layout_ != collective::Staging::kNone && layout_ != collective::Staging::kUnserved;
  const std::size_t bytes = moves ? host_->size() : 0;
  if (bytes == 0) return Status::Ok();
  if (layout_ == collective::Staging::kPerRank) {  // every rank its own result
    for (std::size_t r = 0; r < plan_.ranks.size(); ++r)
      RINGSYNC_RETURN_IF_ERROR(queue.copy_to_device(plan_.ranks[r].recv, host_recv(r), rank_extent_bytes().recv));
    return queue.synchronize();
  }
  if (!result_on_device_)
    RINGSYNC_RETURN_IF_ERROR(queue.copy_to_device(plan_.ranks[0].recv, host_->data(), bytes));
  RINGSYNC_RETURN_IF_ERROR(collective::spread_from_first(plan_, bytes, queue));
  return queue.synchronize();
}

}  // namespace ringsync::service::device
