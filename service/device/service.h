// The daemon's GPU buffers: registrations (each allocation mapped once, off
// the control thread), and running collectives whose buffers are GPU memory
// (docs/gpu-buffers.md). Every piece of device work runs on the WorkPool and
// reports back on the control thread; the control loop never waits on a GPU.
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "common/status.h"
#include "common/wire.h"
#include "service/device/backend.h"
#include "service/device/staging.h"
#include "service/local/pending_collective.h"
#include "service/observe/daemon_metrics.h"
#include "service/threads/work_pool.h"

namespace ringsync::service::local {
class ClientSession;
}

namespace ringsync::service::device {

class DeviceService {
 public:
  DeviceService(boost::asio::io_context& io, threads::WorkPool& pool, observe::DaemonMetrics& metrics,
                std::shared_ptr<DeviceBackend> backend);

  // RegisterDevice: checks it, maps the allocation on the pool, replies. A
  // daemon that cannot use a GPU replies with why (DeviceBackend::available()).
  void register_allocation(const std::shared_ptr<local::ClientSession>& session,
                           const wire::RegisterDevice& request);
  void unregister_allocation(local::ClientSession& session, std::uint32_t allocation_id);
  // The client left: its registrations go; mappings still used by a collective
  // stay open until it ends.
  void forget(local::ClientSession& session);

  // Called on the control thread once the device work is over.
  using Done = std::function<void(local::PendingCollective&, const Status&)>;

  // A collective of this node alone: runs it on the GPU.
  void run_local(local::PendingCollective collective, Done done);

  // A collective that goes around the ring: stages this node's part into host
  // memory, points the submissions at it (DeviceStaging::host_contributions)
  // and keeps the staging in collective.staging. `ready` runs in the order
  // stage_in was called, so that a tensor name submitted twice reaches the
  // ring in order.
  // `pipeline_chunk`: see DeviceStaging::create.
  void stage_in(local::PendingCollective collective, NodeShape shape, std::size_t pipeline_chunk, Done ready);

 private:
  // Runs `work` on the pool, then `then` with its status on the control thread.
  void on_pool(std::function<Status()> work, std::function<void(const Status&)> then);

  boost::asio::io_context& io_;
  threads::WorkPool& pool_;
  observe::DaemonMetrics& metrics_;
  std::shared_ptr<DeviceBackend> backend_;

  // stage_in results waiting for an earlier one, by call order.
  struct Staged {
    std::shared_ptr<local::PendingCollective> collective;
    Status status;
    Done ready;
    bool finished = false;
  };
  std::map<std::uint64_t, Staged> staging_order_;
  std::uint64_t next_stage_ = 0;
};

}  // namespace ringsync::service::device
