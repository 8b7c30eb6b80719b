#include "service/device/service.h"

#include <boost/asio/post.hpp>
#include <algorithm>
#include <exception>
#include <vector>

#include "common/log.h"
#include "service/device/collective.h"
#include "service/local/session.h"

namespace ringsync::service::device {

namespace asio = boost::asio;

namespace {

// The device of the queue a collective runs on: where local rank 0's output is.
int queue_device(const local::PendingCollective& collective) {
  return collective.submissions.empty() ? 0 : std::max(0, collective.submissions.front().device);
}

// Each local rank's GPU (-1: no buffer).
std::vector<int> rank_devices(const local::PendingCollective& collective) {
  std::vector<int> devices;
  for (const auto& s : collective.submissions) devices.push_back(s.device);
  return devices;
}

}  // namespace

DeviceService::DeviceService(asio::io_context& io, threads::WorkPool& pool, observe::DaemonMetrics& metrics,
                             std::shared_ptr<DeviceBackend> backend)
    : io_(io), pool_(pool), metrics_(metrics), backend_(std::move(backend)) {}

void DeviceService::on_pool(std::function<Status()> work, std::function<void(const Status&)> then) {
  auto result =
      std::make_shared<Status>(Status::Closed("ringsyncd shut down before the GPU work ran"));
  pool_.run(
      1,
      [work = std::move(work), result](std::size_t) {
        try {
          *result = work();
        } catch (const std::exception& e) {
          *result = Status::Internal(std::string("GPU work failed: ") + e.what());
        }
      },
      // On a pool thread, possibly while the daemon is torn down: only the
      // io_context (which outlives the pool) is touched here.
      [&io = io_, result, then = std::move(then)] {
        asio::post(io, [result, then] { then(*result); });
      });
}

// ---- registrations -------------------------------------------------------------

void DeviceService::register_allocation(const std::shared_ptr<local::ClientSession>& session,
                                        const wire::RegisterDevice& request) {
  const auto reply = [](local::ClientSession& to, const wire::RegisterDevice& r, const Status& status) {
    to.send(wire::RegisterDeviceReply{r.request_id, status, r.allocation_id});
  };
  if (Status reserved = session->devices.reserve(request); !reserved.ok()) {
    metrics_.error(observe::ErrorKind::kInvalidArgument);
    reply(*session, request, reserved);
    return;
  }
  // Mapped on the pool: the first CUDA call of the process creates a context,
  // which takes long enough to stall every other client.
  auto mapping = std::make_shared<std::shared_ptr<const DeviceMapping>>();
  std::weak_ptr<local::ClientSession> weak = session;
  on_pool(
      [backend = backend_, request, mapping]() -> Status {
        if (Status usable = backend->available(); !usable.ok())
          return Status(usable.code(), "ringsyncd cannot use GPU memory: " + usable.message());
        auto mapped = backend->open_ipc(request.ipc_handle, request.device_uuid, request.device);
        if (!mapped.ok())
          return Status(mapped.status().code(),
                        "ringsyncd cannot map GPU allocation " +
                            std::to_string(request.allocation_id) + " (" +
                            std::to_string(request.bytes) + " bytes on the trainer's GPU " +
                            std::to_string(request.device) + "): " + mapped.status().message());
        auto opened = std::make_shared<const DeviceMapping>(
            static_cast<std::byte*>(mapped->base), request.bytes, mapped->device,
            [backend, device = mapped->device](void* b) {
              if (Status s = backend->close_ipc(b, device); !s.ok())
                RS_LOG(warn, "device") << "unmapping a GPU allocation: " << s.message();
            });
        RINGSYNC_RETURN_IF_ERROR(DeviceTable::check_mapped_size(request, mapped->bytes));
        *mapping = std::move(opened);
        return Status::Ok();
      },
      [this, weak, request, mapping, reply](const Status& status) {
        auto session = weak.lock();
        if (!session || session->closed()) return;  // dropping the mapping unmaps it
        if (!status.ok()) {
          session->devices.cancel(request.allocation_id);
          RS_LOG(info, "device") << "client " << session->id() << ": " << status.message();
          metrics_.error(observe::ErrorKind::kDevice);
          reply(*session, request, status);
          return;
        }
        if (!session->devices.complete(request.allocation_id, *mapping)) return;
        metrics_.registered_bytes.with({"device"}).inc(static_cast<double>(request.bytes));
        RS_LOG(debug, "device") << "client " << session->id() << " registered GPU allocation "
                                << request.allocation_id << " (" << request.bytes
                                << " bytes on GPU " << request.device << ")";
        reply(*session, request, Status::Ok());
      });
}

void DeviceService::unregister_allocation(local::ClientSession& session, std::uint32_t allocation_id) {
  const std::uint64_t before = session.devices.total_bytes();
  if (!session.devices.release(allocation_id)) {
    RS_LOG(warn, "device") << "client " << session.id() << " unregistered GPU allocation "
                           << allocation_id << ", which is unknown or still being registered";
    metrics_.error(observe::ErrorKind::kInvalidArgument);
    return;
  }
  metrics_.registered_bytes.with({"device"}).dec(
      static_cast<double>(before - session.devices.total_bytes()));
}

void DeviceService::forget(local::ClientSession& session) {
  if (session.devices.size() == 0) return;
  metrics_.registered_bytes.with({"device"})
      .dec(static_cast<double>(session.devices.total_bytes()));
  session.devices.clear();
}

// ---- collectives ---------------------------------------------------------------

void DeviceService::run_local(local::PendingCollective collective, Done done) {
  auto shared = std::make_shared<local::PendingCollective>(std::move(collective));
  on_pool(
      [backend = backend_, plan = local::plan_of(*shared), device = queue_device(*shared),
       devices = rank_devices(*shared)]() -> Status {
        RINGSYNC_RETURN_IF_ERROR(check_reachable(devices, device, *backend));
        auto queue = backend->queue(device);
        if (!queue.ok()) return queue.status();
        return run_on_device(plan, **queue);
      },
      [shared, done = std::move(done)](const Status& status) { done(*shared, status); });
}

void DeviceService::stage_in(local::PendingCollective collective, NodeShape shape, std::size_t pipeline_chunk,
                             Done ready) {
  auto shared = std::make_shared<local::PendingCollective>(std::move(collective));
  const std::uint64_t order = next_stage_++;
  staging_order_[order] = Staged{shared, Status::Ok(), std::move(ready)};
  auto staging = std::make_shared<std::unique_ptr<DeviceStaging>>();
  on_pool(
      [backend = backend_, plan = local::plan_of(*shared), shape, pipeline_chunk, device = queue_device(*shared),
       devices = rank_devices(*shared), staging]() -> Status {
        RINGSYNC_RETURN_IF_ERROR(check_reachable(devices, device, *backend));
        auto created = DeviceStaging::create(plan, shape, *backend, device, pipeline_chunk);
        if (!created.ok()) return created.status();
        auto queue = backend->queue(device);
        if (!queue.ok()) return queue.status();
        RINGSYNC_RETURN_IF_ERROR((*created)->stage_in(**queue));
        *staging = std::move(created).value();
        return Status::Ok();
      },
      [this, order, shared, staging](const Status& status) {
        if (status.ok()) {
          const auto host = (*staging)->host_contributions();
          for (std::size_t r = 0; r < shared->submissions.size(); ++r)
            shared->submissions[r].where = host[r];
          shared->staging = std::move(*staging);
        }
        Staged& entry = staging_order_.at(order);
        entry.status = status;
        entry.finished = true;
        // Release in call order: the oldest first, once it is done.
        while (!staging_order_.empty() && staging_order_.begin()->second.finished) {
          Staged next = std::move(staging_order_.begin()->second);
          staging_order_.erase(staging_order_.begin());
          next.ready(*next.collective, next.status);
        }
      });
}

}  // namespace ringsync::service::device
