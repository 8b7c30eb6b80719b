#include "service/local/kept_states.h"

#include "common/units.h"

namespace ringsync::service::local {

Status KeptStates::keep(const Key& key, std::shared_ptr<shm::Region> region, std::uint64_t bytes) {
  if (!region || bytes > region->size())
    return Status::InvalidArgument("state '" + key.name + "': " + std::to_string(bytes) +
                                   " bytes do not fit in the buffer given");
  State next{std::move(region), bytes};
  auto it = states_.find(key);
  // The same buffer kept again costs nothing more.
  const std::uint64_t replaced = it == states_.end() || it->second.region == next.region ? 0 : cost(it->second);
  const std::uint64_t added = it != states_.end() && it->second.region == next.region ? 0 : cost(next);
  if (bytes_ - replaced + added > limit_)
    return Status::OutOfMemory("keeping state '" + key.name + "' of local rank " + std::to_string(key.local_rank) +
                               " of job '" + key.job_id + "' (" + units::format_bytes(cost(next)) +
                               ") would take this node's kept states to " +
                               units::format_bytes(bytes_ - replaced + added) + ", past --max-kept-state-bytes " +
                               units::format_bytes(limit_) + "; raise the limit, or keep less");
  bytes_ = bytes_ - replaced + added;
  states_[key] = std::move(next);
  return Status::Ok();
}

std::optional<KeptStates::State> KeptStates::fetch(const Key& key) const {
  auto it = states_.find(key);
  if (it == states_.end()) return std::nullopt;
  return it->second;
}

void KeptStates::job_gone(const std::string& job_id, Clock::time_point expiry) { expiry_[job_id] = expiry; }

std::size_t KeptStates::forget_expired(Clock::time_point now) {
  std::size_t dropped = 0;
  for (auto job = expiry_.begin(); job != expiry_.end();) {
    if (now < job->second) {
      ++job;
      continue;
    }
    for (auto it = states_.lower_bound(Key{job->first, 0, ""}); it != states_.end() && it->first.job_id == job->first;) {
      bytes_ -= cost(it->second);
      it = states_.erase(it);
      ++dropped;
    }
    owners_.erase(job->first);
    job = expiry_.erase(job);
  }
  return dropped;
}

}  // namespace ringsync::service::local
