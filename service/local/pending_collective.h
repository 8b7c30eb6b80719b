// A collective that some local ranks of a job have submitted and others not
// yet, keyed by tensor name; and the check that all ranks asked for the same
// thing once everyone has arrived.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/shm.h"
#include "common/status.h"
#include "common/wire.h"
#include "service/collective/plan.h"

namespace ringsync::service::device {
class DeviceMapping;
class DeviceStaging;
}  // namespace ringsync::service::device

namespace ringsync::service {
// The daemon's clock for deadlines and ages, in every folder.
using Clock = std::chrono::steady_clock;
}  // namespace ringsync::service

namespace ringsync::service::local {

struct Submission {
  std::uint32_t local_rank = 0;
  wire::Collective request;  // request.memory: host or GPU buffers
  collective::Contribution where;  // GPU buffers: device addresses in the daemon
  int device = -1;           // GPU buffers: the device of the receive buffer
  std::vector<std::shared_ptr<shm::Region>> keepalive;  // buffers stay mapped until done
  std::vector<std::shared_ptr<const device::DeviceMapping>> device_keepalive;
  Clock::time_point submitted;
  std::function<void(const Status&)> complete;  // answers the client, if still connected
};

// Memory grows with the ranks that submitted, not with the job's size: a
// pending name costs one bit per local rank until its ranks arrive.
struct PendingCollective {
  std::string name;
  std::string job_id;                   // the job's id, for its metrics
  std::vector<Submission> submissions;  // arrival order; by local rank once ready()
  std::vector<bool> present;            // indexed by local rank
  Clock::time_point first_submit;
  bool stall_reported = false;
  // GPU buffers of a multi-node job, from DeviceService::stage_in until the
  // executor's stage-out step copied the result back (execution/executor.h).
  std::shared_ptr<device::DeviceStaging> staging;

  bool ready() const { return submissions.size() == present.size(); }
  std::vector<std::uint32_t> missing_ranks() const;
  std::vector<std::uint32_t> present_ranks() const;
};

// Ok when every submission agrees on kind, memory (host or GPU), dtype, count,
// op (allreduce) and root (broadcast); otherwise a Mismatch naming the tensor, the fields and
// which ranks said what.
Status check_agreement(const PendingCollective& pending);

// The data movement of a ready collective: its shape and every rank's buffers
// (submissions are by local rank once ready).
collective::LocalPlan plan_of(const PendingCollective& collective);

// "0,2,5" — for messages.
std::string rank_list(const std::vector<std::uint32_t>& ranks);

}  // namespace ringsync::service::local
