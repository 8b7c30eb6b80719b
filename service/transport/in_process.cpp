#include "service/transport/in_process.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace ringsync::service::transport {

namespace {

std::string hex(std::uint64_t v) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 60; shift >= 0; shift -= 4) s += kDigits[(v >> shift) & 0xF];
  return s;
}

Status lost(int peer) {
  return Status::PeerLost("node " + std::to_string(peer) +
                          " is lost (it was killed); the job must re-form its ring without it");
}

Status closed(int rank) {
  return Status::Closed("node " + std::to_string(rank) +
                        " was killed; its endpoint takes no more operations");
}

}  // namespace

class InProcessFabric::Endpoint final : public Transport {
 public:
  Endpoint(InProcessFabric& fabric, int rank)
      : fabric_(fabric), rank_(rank), efd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {}
  ~Endpoint() override {
    if (efd_ >= 0) close(efd_);
  }

  int rank() const override { return rank_; }
  int size() const override { return fabric_.size(); }

  void send(int peer, std::uint64_t tag, const void* data, std::size_t bytes,
            Callback done) override {
    Status status = check_peer(peer);
    if (status.ok() && dead()) status = closed(rank_);
    if (status.ok()) status = fabric_.at(peer).deliver(rank_, tag, data, bytes);
    if (status.ok()) {
      bytes_sent.fetch_add(bytes, std::memory_order_relaxed);
      messages_sent.fetch_add(1, std::memory_order_relaxed);
    }
    std::lock_guard lock(mu_);
    complete_locked(std::move(done), std::move(status));
  }

  void recv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Callback done) override {
    Status invalid = check_peer(peer);
    std::lock_guard lock(mu_);
    if (!invalid.ok()) return complete_locked(std::move(done), std::move(invalid));
    if (dead()) return complete_locked(std::move(done), closed(rank_));
    const Key key{peer, tag};
    if (auto it = unexpected_.find(key); it != unexpected_.end()) {
      std::vector<std::byte> message = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) unexpected_.erase(it);
      return complete_locked(std::move(done),
                             copy_in(data, bytes, peer, tag, message.data(), message.size()));
    }
    // Messages the peer sent before it died were taken above; nothing more comes.
    if (fabric_.at(peer).dead()) return complete_locked(std::move(done), lost(peer));
    posted_[key].push_back({data, bytes, std::move(done)});
  }

  bool progress() override {
    std::deque<Completion> ready;
    {
      std::lock_guard lock(mu_);
      ready.swap(completions_);
    }
    for (Completion& c : ready) {
      if (c.done) c.done(c.status);
    }
    return !ready.empty();
  }

  int event_fd() const override { return efd_; }

  bool arm() override {
    if (efd_ < 0) return false;  // no descriptor to wait on: keep polling
    std::uint64_t count = 0;
    if (read(efd_, &count, sizeof count) < 0) {
      // EAGAIN: nothing was signalled since the last arm().
    }
    std::lock_guard lock(mu_);
    return completions_.empty();
  }

  void cancel_all(const Status& why) override {
    // Operations that callbacks post meanwhile are cancelled too (ring tasks
    // post only from their own progress(), never from a callback).
    for (;;) {
      std::deque<Completion> ready;
      {
        std::lock_guard lock(mu_);
        ready.swap(completions_);
        for (auto& [key, receives] : posted_) {
          for (PostedRecv& r : receives) ready.push_back({std::move(r.done), why});
        }
        posted_.clear();
      }
      if (ready.empty()) return;
      for (Completion& c : ready) {
        if (c.done) c.done(why);
      }
    }
  }

  // The rest is called from other endpoints' threads.

  // A message from node `from` arrives: into the matching posted receive, or
  // kept until one is posted. Fails only when this node is dead.
  Status deliver(int from, std::uint64_t tag, const void* data, std::size_t bytes) {
    std::lock_guard lock(mu_);
    if (dead()) return lost(rank_);
    const Key key{from, tag};
    if (auto it = posted_.find(key); it != posted_.end()) {
      PostedRecv r = std::move(it->second.front());
      it->second.pop_front();
      if (it->second.empty()) posted_.erase(it);
      complete_locked(std::move(r.done), copy_in(r.data, r.bytes, from, tag, data, bytes));
      return Status::Ok();
    }
    const auto* first = static_cast<const std::byte*>(data);
    unexpected_[key].emplace_back(first, first + bytes);
    return Status::Ok();
  }

  // Node `peer` died: the receives posted from it will never be matched.
  void peer_killed(int peer) {
    std::lock_guard lock(mu_);
    for (auto it = posted_.begin(); it != posted_.end();) {
      if (it->first.first != peer) {
        ++it;
        continue;
      }
      for (PostedRecv& r : it->second) complete_locked(std::move(r.done), lost(peer));
      it = posted_.erase(it);
    }
    wake();  // let the owner notice, even with nothing to complete
  }

  // This node dies: everything it waits for fails, nothing more arrives.
  void die() {
    std::lock_guard lock(mu_);
    dead_.store(true);
    for (auto& [key, receives] : posted_) {
      for (PostedRecv& r : receives) complete_locked(std::move(r.done), closed(rank_));
    }
    posted_.clear();
    unexpected_.clear();
    wake();
  }

  bool dead() const { return dead_.load(); }

  std::atomic<std::uint64_t> bytes_sent{0};
  std::atomic<std::uint64_t> messages_sent{0};

 private:
  using Key = std::pair<int, std::uint64_t>;  // (sending node, tag)
  struct PostedRecv {
    void* data;
    std::size_t bytes;
    Callback done;
  };
  struct Completion {
    Callback done;
    Status status;
  };

  Status check_peer(int peer) const {
    if (peer >= 0 && peer < fabric_.size()) return Status::Ok();
    return Status::InvalidArgument("peer " + std::to_string(peer) + " is not a node of this job (" +
                                   std::to_string(fabric_.size()) + " nodes, ranks 0.." +
                                   std::to_string(fabric_.size() - 1) + ")");
  }

  // Copies a message into a receive buffer, if the sizes agree.
  static Status copy_in(void* dst, std::size_t capacity, int from, std::uint64_t tag,
                        const void* data, std::size_t bytes) {
    if (bytes != capacity) {
      return Status::ProtocolError(
          "message from node " + std::to_string(from) + " with tag " + hex(tag) + " has " +
          std::to_string(bytes) + " bytes but the receive expects " + std::to_string(capacity) +
          "; every node must run the collective with the same count and dtype");
    }
    if (bytes != 0) std::memcpy(dst, data, bytes);
    return Status::Ok();
  }

  // Queues a completion for the owner's progress() and wakes it. mu_ held.
  void complete_locked(Callback done, Status status) {
    completions_.push_back({std::move(done), std::move(status)});
    wake();
  }

  void wake() {
    if (efd_ < 0) return;
    const std::uint64_t one = 1;
    if (write(efd_, &one, sizeof one) < 0) {
      // EAGAIN only when the counter is saturated: the descriptor is readable anyway.
    }
  }

  InProcessFabric& fabric_;
  const int rank_;
  const int efd_;  // -1 if eventfd failed: owners then poll progress()
  std::mutex mu_;
  std::map<Key, std::deque<PostedRecv>> posted_;
  std::map<Key, std::deque<std::vector<std::byte>>> unexpected_;
  std::deque<Completion> completions_;
  std::atomic<bool> dead_{false};
};

InProcessFabric::InProcessFabric(int size) {
  if (size < 1) {
    throw std::invalid_argument("InProcessFabric: size " + std::to_string(size) +
                                " must be at least 1 node");
  }
  endpoints_.reserve(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) endpoints_.push_back(std::make_unique<Endpoint>(*this, r));
}

InProcessFabric::~InProcessFabric() = default;

Transport& InProcessFabric::endpoint(int rank) { return at(rank); }

void InProcessFabric::kill(int rank) {
  at(rank).die();
  for (int r = 0; r < size(); ++r) {
    if (r != rank) at(r).peer_killed(rank);
  }
}

bool InProcessFabric::killed(int rank) const { return at(rank).dead(); }

std::uint64_t InProcessFabric::bytes_sent(int rank) const {
  return at(rank).bytes_sent.load(std::memory_order_relaxed);
}

std::uint64_t InProcessFabric::messages_sent(int rank) const {
  return at(rank).messages_sent.load(std::memory_order_relaxed);
}

}  // namespace ringsync::service::transport
