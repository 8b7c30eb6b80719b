// Committed state the daemon keeps for this rank (KeepState / FetchState): it
// outlives the trainer process, so a trainer restarted on the same node resumes
// from it (docs/elastic.md).
#include "client/src/context.h"

namespace ringsync::client {

namespace {
constexpr std::size_t kMaxStateName = 4096;

Status check_name(std::string_view name, const char* call) {
  if (name.empty() || name.size() > kMaxStateName)
    return Status::InvalidArgument(std::string(call) + ": a state's name must be 1 to " + std::to_string(kMaxStateName) +
                                   " bytes");
  return Status::Ok();
}
}  // namespace

Status Context::keep_state(std::string_view name, const void* ptr, std::size_t bytes) {
  RINGSYNC_RETURN_IF_ERROR(check_name(name, "rs_keep_state"));
  if (bytes == 0) return Status::InvalidArgument("rs_keep_state: keep at least one byte");
  auto where = buffers_.find(ptr, bytes);
  if (!where.ok()) return where.status();
  if (!*where || (*where)->offset != 0)
    return Status::InvalidArgument("rs_keep_state: the state must start at a buffer from rs_alloc() on this "
                                   "context (the daemon keeps that buffer); copy it into one first");
  const std::uint64_t id = next_request_id_++;
  auto wait = std::make_shared<PendingRegistration>();
  {
    std::lock_guard lock(mu_);
    if (closed_) return *closed_;
    pending_.emplace(id, wait);
  }
  if (Status s = connection_->send(wire::KeepState{id, std::string(name), (*where)->buffer_id, bytes}); !s.ok())
    fail_connection(s);
  await_reply([&] { return wait->done; });
  std::lock_guard lock(mu_);
  return wait->result;
}

Result<std::pair<void*, std::size_t>> Context::fetch_state(std::string_view name) {
  RINGSYNC_RETURN_IF_ERROR(check_name(name, "rs_fetch_state"));
  const std::uint64_t id = next_request_id_++;
  auto wait = std::make_shared<PendingAlloc>();
  wait->fetch = true;
  {
    std::lock_guard lock(mu_);
    if (closed_) return *closed_;
    pending_.emplace(id, wait);
  }
  if (Status s = connection_->send(wire::FetchState{id, std::string(name)}); !s.ok()) fail_connection(s);
  await_reply([&] { return wait->done; });
  Result<IssuedBuffer> issued = [&] {
    std::lock_guard lock(mu_);
    return std::move(*wait->result);
  }();
  if (!issued.ok()) return issued.status();
  if (issued->buffer_id == 0) return std::pair<void*, std::size_t>{nullptr, 0};
  const std::size_t bytes = issued->memory.size();
  void* ptr = buffers_.add(issued->buffer_id, std::move(issued->memory), bytes);
  return std::pair<void*, std::size_t>{ptr, bytes};
}

Result<std::uint32_t> Context::nodes_waiting() {
  const std::uint64_t id = next_request_id_++;
  auto wait = std::make_shared<PendingRegistration>();
  {
    std::lock_guard lock(mu_);
    if (closed_) return *closed_;
    pending_.emplace(id, wait);
  }
  if (Status s = connection_->send(wire::NodesWaiting{id}); !s.ok()) fail_connection(s);
  await_reply([&] { return wait->done; });
  std::lock_guard lock(mu_);
  if (!wait->result.ok()) return wait->result;
  return wait->value;
}

}  // namespace ringsync::client
