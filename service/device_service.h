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
#include "service/daemon_metrics.h"
#include "service/device_backend.h"
#include "service/device_staging.h"
#include "service/pending_collective.h"
#include "service/work_pool.h"

namespace ringsync::service {

class ClientSession;

class DeviceService {
 public:
  DeviceService(boost::asio::io_context& io, WorkPool& pool, DaemonMetrics& metrics,
                std::shared_ptr<DeviceBackend> backend);

  // RegisterDevice: checks it, maps the allocation on the pool, replies. A
  // daemon that cannot use a GPU replies with why (DeviceBackend::available()).
  void register_allocation(const std::shared_ptr<ClientSession>& session,
                           const wire::RegisterDevice& request);
  void unregister_allocation(ClientSession& session, std::uint32_t allocation_id);
  // The client left: its registrations go; mappings still used by a collective
  // stay open until it ends.
  void forget(ClientSession& session);

  // Called on the control thread once the device work is over.
  using Done = std::function<void(PendingCollective&, const Status&)>;

  // A collective of this node alone: runs it on the GPU.
  void run_local(PendingCollective collective, Done done);

  // A collective that goes around the ring: stages this node's part into host
  // memory, points the submissions at it (DeviceStaging::host_contributions)
  // and keeps the staging in collective.staging. `ready` runs in the order
  // stage_in was called, so that a tensor name submitted twice reaches the
  // ring in order.
  // `pipeline_chunk`: see DeviceStaging::create.
  void stage_in(PendingCollective collective, NodeShape shape, std::size_t pipeline_chunk, Done ready);

  // After the ring: copies the result out of collective.staging to the GPU
  // outputs (and drops the staging).
  void stage_out(PendingCollective collective, Done done);

 private:
  // Runs `work` on the pool, then `then` with its status on the control thread.
  void on_pool(std::function<Status()> work, std::function<void(const Status&)> then);

  boost::asio::io_context& io_;
  WorkPool& pool_;
  DaemonMetrics& metrics_;
  std::shared_ptr<DeviceBackend> backend_;

  // stage_in results waiting for an earlier one, by call order.
  struct Staged {
    std::shared_ptr<PendingCollective> collective;
    Status status;
    Done ready;
    bool finished = false;
  };
  std::map<std::uint64_t, Staged> staging_order_;
  std::uint64_t next_stage_ = 0;
};

}  // namespace ringsync::service
