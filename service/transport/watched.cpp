#include "service/transport/watched.h"

namespace ringsync::service::transport {

std::uint64_t OperationWatch::posted(int peer, bool receive, std::uint64_t tag, std::size_t bytes,
                                     Clock::time_point now) {
  std::lock_guard lock(mu_);
  const std::uint64_t id = next_id_++;
  outstanding_[id] = Waiting{peer, receive, static_cast<std::uint16_t>(tag >> 16), static_cast<std::uint16_t>(tag),
                             bytes, now};
  return id;
}

void OperationWatch::completed(std::uint64_t id, bool ok, Clock::time_point now) {
  std::lock_guard lock(mu_);
  auto it = outstanding_.find(id);
  if (it == outstanding_.end()) return;
  if (ok) {
    bytes_moved_ += it->second.bytes;
    ++messages_done_;
    last_progress_ = now;
  } else if (messages_failed_++ == 0) {
    first_failure_ = now;
  }
  outstanding_.erase(it);
}

OperationWatch::Snapshot OperationWatch::snapshot() const {
  std::lock_guard lock(mu_);
  Snapshot s;
  s.bytes_moved = bytes_moved_;
  s.messages_done = messages_done_;
  s.messages_failed = messages_failed_;
  s.first_failure = first_failure_;
  s.outstanding = outstanding_.size();
  s.last_progress = last_progress_;
  for (const auto& [id, w] : outstanding_)
    if (w.receive) {
      s.waiting = w;
      return s;
    }
  if (!outstanding_.empty()) s.waiting = outstanding_.begin()->second;
  return s;
}

Transport::Callback WatchedTransport::record(std::uint64_t id, Callback done) {
  return [watch = watch_, id, done = std::move(done)](const Status& status) {
    watch->completed(id, status.ok(), OperationWatch::Clock::now());
    done(status);
  };
}

void WatchedTransport::send(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Callback done) {
  const std::uint64_t id = watch_->posted(peer, false, tag, bytes, OperationWatch::Clock::now());
  inner_.send(peer, tag, data, bytes, record(id, std::move(done)));
}

void WatchedTransport::recv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Callback done) {
  const std::uint64_t id = watch_->posted(peer, true, tag, bytes, OperationWatch::Clock::now());
  inner_.recv(peer, tag, data, bytes, record(id, std::move(done)));
}

}  // namespace ringsync::service::transport
