#include "service/device_staging.h"

#include "service/device_collective.h"

namespace ringsync::service {

Result<std::unique_ptr<DeviceStaging>> DeviceStaging::create(LocalPlan plan, NodeShape shape,
                                                             DeviceBackend& backend) {
  if (plan.ranks.size() != shape.local_size || shape.local_size == 0)
    return Status::Internal("staging a GPU collective of " + std::to_string(plan.ranks.size()) +
                            " local ranks on a node of " + std::to_string(shape.local_size));
  std::size_t bytes = plan.count * dtype_size(plan.dtype);
  if (plan.kind == wire::CollectiveKind::kAllgather)
    bytes *= static_cast<std::size_t>(shape.num_nodes) * shape.local_size;
  if (plan.kind == wire::CollectiveKind::kBarrier) bytes = 0;
  auto host = backend.host_buffer(bytes);
  if (!host.ok()) return host.status();
  return std::unique_ptr<DeviceStaging>(
      new DeviceStaging(std::move(plan), shape, std::move(host).value()));
}

DeviceStaging::DeviceStaging(LocalPlan plan, NodeShape shape, std::unique_ptr<HostBuffer> host)
    : plan_(std::move(plan)), shape_(shape), host_(std::move(host)) {}

std::size_t DeviceStaging::element_bytes() const { return dtype_size(plan_.dtype); }

bool DeviceStaging::root_here() const { return plan_.root / shape_.local_size == shape_.node_rank; }

Status DeviceStaging::stage_in(DeviceQueue& queue) {
  const std::size_t bytes = rank_bytes();
  if (bytes == 0) return Status::Ok();
  std::byte* host = host_->data();
  switch (plan_.kind) {
    case wire::CollectiveKind::kAllreduce: {
      const auto& ranks = plan_.ranks;
      if (ranks.size() == 1) {
        RINGSYNC_RETURN_IF_ERROR(queue.copy_to_host(host, ranks[0].send, bytes));
        break;
      }
      std::vector<const void*> srcs;
      for (const auto& rank : ranks) srcs.push_back(rank.send);
      // Avg sums here; the ring divides by every rank of the job.
      const ReduceOp op = plan_.op == ReduceOp::kAvg ? ReduceOp::kSum : plan_.op;
      RINGSYNC_RETURN_IF_ERROR(
          queue.reduce(ranks[0].recv, srcs.data(), srcs.size(), plan_.count, plan_.dtype, op));
      RINGSYNC_RETURN_IF_ERROR(queue.copy_to_host(host, ranks[0].recv, bytes));
      break;
    }
    case wire::CollectiveKind::kBroadcast:
      if (root_here())
        RINGSYNC_RETURN_IF_ERROR(
            queue.copy_to_host(host, plan_.ranks[plan_.root % shape_.local_size].send, bytes));
      break;
    case wire::CollectiveKind::kAllgather: {
      const std::size_t first_slot = static_cast<std::size_t>(shape_.node_rank) * shape_.local_size;
      for (std::size_t r = 0; r < plan_.ranks.size(); ++r)
        RINGSYNC_RETURN_IF_ERROR(
            queue.copy_to_host(host + (first_slot + r) * bytes, plan_.ranks[r].send, bytes));
      break;
    }
    case wire::CollectiveKind::kBarrier: return Status::Ok();
  }
  return queue.synchronize();
}

std::vector<Contribution> DeviceStaging::host_contributions() const {
  std::vector<Contribution> view(plan_.ranks.size());
  if (rank_bytes() == 0) return view;
  std::byte* host = host_->data();
  switch (plan_.kind) {
    case wire::CollectiveKind::kAllreduce: view[0] = Contribution{host, host}; break;
    case wire::CollectiveKind::kBroadcast: {
      // Only the root's input is read: the carrier sits where the root is.
      const std::size_t carrier = root_here() ? plan_.root % shape_.local_size : 0;
      view[carrier] = Contribution{host, host};
      break;
    }
    case wire::CollectiveKind::kAllgather: {
      const std::size_t first_slot = static_cast<std::size_t>(shape_.node_rank) * shape_.local_size;
      for (std::size_t r = 0; r < view.size(); ++r)
        view[r].send = host + (first_slot + r) * rank_bytes();
      view[0].recv = host;  // in place: the gathered result lands around the inputs
      break;
    }
    case wire::CollectiveKind::kBarrier: break;
  }
  return view;
}

Status DeviceStaging::stage_out(DeviceQueue& queue) {
  const std::size_t bytes = plan_.kind == wire::CollectiveKind::kBarrier ? 0 : host_->size();
  if (bytes == 0) return Status::Ok();
  RINGSYNC_RETURN_IF_ERROR(queue.copy_to_device(plan_.ranks[0].recv, host_->data(), bytes));
  RINGSYNC_RETURN_IF_ERROR(spread_from_first(plan_, bytes, queue));
  return queue.synchronize();
}

}  // namespace ringsync::service
