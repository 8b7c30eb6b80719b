#include "service/local/job.h"

#include <algorithm>

namespace ringsync::service::local {

Job::Job(std::string id, std::uint32_t local_size) : id_(std::move(id)), slots_(local_size) {}

Status Job::join(std::uint32_t rank, std::uint32_t local_size, std::int32_t pid) {
  if (local_size != slots_.size())
    return Status::InvalidArgument("job '" + id_ + "' has local size " +
                                   std::to_string(slots_.size()) + " but this client says " +
                                   std::to_string(local_size) +
                                   "; every local rank must pass the same local size");
  if (rank >= slots_.size())
    return Status::InvalidArgument("local rank " + std::to_string(rank) + " is out of range for " +
                                   "job '" + id_ + "' of local size " +
                                   std::to_string(slots_.size()));
  // Not the caller's mistake: a rank that reconnects after its job broke (an
  // elastic trainer, or one restarted) meets the run its other ranks are still
  // leaving. PeerLost, like the failure that broke it: try again shortly.
  if (broken_)
    return Status::PeerLost("job '" + id_ + "' is shutting down (" + *broken_ +
                            "); its other ranks here have yet to disconnect: connect again once they "
                            "have (ringsync.elastic does), or use another job id");
  Slot& slot = slots_[rank];
  if (slot.connected)
    return Status::InvalidArgument("local rank " + std::to_string(rank) + " of job '" + id_ +
                                   "' is already connected (pid " + std::to_string(slot.pid) +
                                   "); check RINGSYNC_LOCAL_RANK of each process");
  slot.connected = true;
  slot.pid = pid;
  ++connected_;
  return Status::Ok();
}

std::vector<PendingCollective> Job::leave(std::uint32_t rank, std::optional<std::string> why) {
  std::vector<PendingCollective> orphaned;
  if (rank >= slots_.size() || !slots_[rank].connected) return orphaned;
  Slot& slot = slots_[rank];
  slot.connected = false;
  --connected_;
  if (connected_ > 0 && !broken_)
    broken_ = why ? *why
                  : "local rank " + std::to_string(rank) + " (pid " + std::to_string(slot.pid) + ") disconnected";
  for (auto& [name, pending] : pending_) orphaned.push_back(std::move(pending));
  pending_.clear();
  return orphaned;
}

Result<std::optional<PendingCollective>> Job::submit(Submission submission) {
  if (broken_)
    return Status::PeerLost(*broken_ + " (job '" + id_ + "' cannot run collectives any more: restart its ranks)");
  const std::string& name = submission.request.name;
  auto [it, inserted] = pending_.try_emplace(name);
  PendingCollective& pending = it->second;
  if (inserted) {
    pending.name = name;
    pending.job_id = id_;
    if (pending_.size() > kMaxPendingPerJob) {
      pending_.erase(it);
      return Status::InvalidArgument(
          "job '" + id_ + "' already has " + std::to_string(kMaxPendingPerJob) +
          " collectives waiting for other ranks; wait for some before submitting more");
    }
    pending.name = name;
    pending.present.resize(slots_.size());
    pending.first_submit = submission.submitted;
  }
  const std::uint32_t rank = submission.local_rank;
  if (pending.present[rank])
    return Status::InvalidArgument("tensor '" + name + "' was already submitted by local rank " +
                                   std::to_string(rank) +
                                   " and is not complete yet; wait for it before reusing the name");
  pending.present[rank] = true;
  pending.submissions.push_back(std::move(submission));
  if (!pending.ready()) return std::optional<PendingCollective>();
  std::optional<PendingCollective> ready(std::move(pending));
  pending_.erase(it);
  std::sort(ready->submissions.begin(), ready->submissions.end(),
            [](const Submission& a, const Submission& b) { return a.local_rank < b.local_rank; });
  return ready;
}

std::vector<PendingCollective> Job::break_with(const std::string& why) {
  if (!broken_) broken_ = why;
  std::vector<PendingCollective> orphaned;
  for (auto& [name, pending] : pending_) orphaned.push_back(std::move(pending));
  pending_.clear();
  return orphaned;
}

std::vector<PendingCollective> Job::take_expired(Clock::time_point now, Clock::duration timeout) {
  std::vector<PendingCollective> expired;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now - it->second.first_submit >= timeout) {
      expired.push_back(std::move(it->second));
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return expired;
}

}  // namespace ringsync::service::local
