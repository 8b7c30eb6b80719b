// A job on this node: its local_size slots (one per local rank) and the
// collectives its ranks have submitted but not all of them yet. Once a rank
// disconnects the job is broken: nothing pending can complete, and new
// collectives fail at once until every rank has gone and the job is formed anew.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "service/local/pending_collective.h"

namespace ringsync::service::local {

class Job {
 public:
  // Collectives one job may have waiting for ranks at once (a bound on what a
  // buggy or hostile client can make the daemon hold).
  static constexpr std::size_t kMaxPendingPerJob = 65536;

  Job(std::string id, std::uint32_t local_size);

  const std::string& id() const { return id_; }
  // The uid of the trainer that made the job: only its processes may join it.
  std::uint32_t owner_uid = 0;
  std::uint32_t local_size() const { return static_cast<std::uint32_t>(slots_.size()); }
  std::size_t connected() const { return connected_; }
  const std::optional<std::string>& broken() const { return broken_; }

  // Takes slot `rank`; fails if it is taken, out of range, or the job is broken.
  Status join(std::uint32_t rank, std::uint32_t local_size, std::int32_t pid);

  // Frees the slot. Returns every pending collective (none can complete now).
  // `why`: what the job's later collectives are told (default: the local rank
  // and pid disconnected).
  std::vector<PendingCollective> leave(std::uint32_t rank, std::optional<std::string> why = std::nullopt);

  // Shared memory the job's ranks on this node have allocated.
  std::uint64_t buffer_bytes() const { return buffer_bytes_; }
  void add_buffer_bytes(std::int64_t delta) { buffer_bytes_ = static_cast<std::uint64_t>(static_cast<std::int64_t>(buffer_bytes_) + delta); }

  // Records a submission. Returns the collective, taken out of the pending set,
  // once every rank has submitted it; nullopt while others are still missing.
  Result<std::optional<PendingCollective>> submit(Submission submission);

  // Breaks the job (the ring it runs on was lost): returns every pending
  // collective, and new ones fail with `why` until every rank has gone.
  std::vector<PendingCollective> break_with(const std::string& why);

  // Takes out the collectives that have waited longer than `timeout`.
  std::vector<PendingCollective> take_expired(Clock::time_point now, Clock::duration timeout);

  std::map<std::string, PendingCollective>& pending() { return pending_; }

 private:
  struct Slot {
    bool connected = false;
    std::int32_t pid = 0;
  };

  std::string id_;
  std::vector<Slot> slots_;
  std::size_t connected_ = 0;
  std::optional<std::string> broken_;
  std::map<std::string, PendingCollective> pending_;
  std::uint64_t buffer_bytes_ = 0;
};

}  // namespace ringsync::service::local
