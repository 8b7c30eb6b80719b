// The committed states trainers asked their daemon to keep (KeepState): per job,
// per local slot and per name, the last one, in the trainer's own shared buffer,
// which the daemon keeps mapped after the trainer is gone. A trainer restarted on
// this node fetches it (FetchState) and resumes from it without a disk checkpoint
// (docs/elastic.md). Bounded by --max-kept-state-bytes for the whole node; a job's
// states go --kept-state-linger after its last rank left this node. Control
// thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>

#include "common/shm.h"
#include "common/status.h"

namespace ringsync::service::local {

class KeptStates {
 public:
  using Clock = std::chrono::steady_clock;
  struct Key {
    std::string job_id;
    std::uint32_t local_rank = 0;
    std::string name;
    bool operator<(const Key& o) const {
      return std::tie(job_id, local_rank, name) < std::tie(o.job_id, o.local_rank, o.name);
    }
  };
  struct State {
    std::shared_ptr<shm::Region> region;  // holds the state from its start
    std::uint64_t bytes = 0;
  };

  explicit KeptStates(std::uint64_t limit_bytes) : limit_(limit_bytes) {}

  // Keeps `bytes` of `region` under `key`, replacing what was kept there. Refused
  // (and nothing changes) when it would take the node past the limit.
  Status keep(const Key& key, std::shared_ptr<shm::Region> region, std::uint64_t bytes);
  std::optional<State> fetch(const Key& key) const;

  // The job's last rank left this node: its states go at `expiry` unless it comes back.
  void job_gone(const std::string& job_id, Clock::time_point expiry);
  void job_back(const std::string& job_id) { expiry_.erase(job_id); }
  // The uid whose trainers kept the job's states: only they may fetch them,
  // also after the job left the node (another user could reuse its id).
  void set_owner(const std::string& job_id, std::uint32_t uid) { owners_[job_id] = uid; }
  std::optional<std::uint32_t> owner(const std::string& job_id) const {
    auto it = owners_.find(job_id);
    return it == owners_.end() ? std::nullopt : std::optional<std::uint32_t>(it->second);
  }
  // Drops the states of jobs gone for good by `now`; returns how many.
  std::size_t forget_expired(Clock::time_point now);

  std::uint64_t bytes() const { return bytes_; }
  std::size_t size() const { return states_.size(); }

 private:
  static std::uint64_t cost(const State& s) { return s.region ? s.region->size() : 0; }

  std::uint64_t limit_;
  std::uint64_t bytes_ = 0;
  std::map<Key, State> states_;
  std::map<std::string, Clock::time_point> expiry_;  // jobs with no rank here, and when their states go
  std::map<std::string, std::uint32_t> owners_;      // by job: the uid that kept its states
};

}  // namespace ringsync::service::local
