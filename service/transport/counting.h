// A Transport that counts the bytes each completed send and receive moved,
// per peer, for the link metrics. Forwards everything else. The counters are
// atomics: the data-plane thread adds, the control thread reads.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "service/transport/transport.h"

namespace ringsync::service::transport {

struct LinkCounters {
  explicit LinkCounters(int peers) : sent(peers), received(peers) {}
  std::vector<std::atomic<std::uint64_t>> sent;      // by peer rank
  std::vector<std::atomic<std::uint64_t>> received;  // by peer rank
};

class CountingTransport final : public Transport {
 public:
  CountingTransport(std::unique_ptr<Transport> inner, std::shared_ptr<LinkCounters> counters)
      : inner_(std::move(inner)), counters_(std::move(counters)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }

  void send(int peer, std::uint64_t tag, const void* data, std::size_t bytes,
            Callback done) override {
    inner_->send(peer, tag, data, bytes,
                 [c = counters_, peer, bytes, done = std::move(done)](const Status& s) {
                   if (s.ok() && peer >= 0 && static_cast<std::size_t>(peer) < c->sent.size())
                     c->sent[peer].fetch_add(bytes, std::memory_order_relaxed);
                   done(s);
                 });
  }
  void recv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Callback done) override {
    inner_->recv(peer, tag, data, bytes,
                 [c = counters_, peer, bytes, done = std::move(done)](const Status& s) {
                   if (s.ok() && peer >= 0 && static_cast<std::size_t>(peer) < c->received.size())
                     c->received[peer].fetch_add(bytes, std::memory_order_relaxed);
                   done(s);
                 });
  }
  bool progress() override { return inner_->progress(); }
  int event_fd() const override { return inner_->event_fd(); }
  bool arm() override { return inner_->arm(); }
  void cancel_all(const Status& why) override { inner_->cancel_all(why); }
  std::string peer_transports(int peer) const override { return inner_->peer_transports(peer); }

 private:
  std::unique_ptr<Transport> inner_;
  std::shared_ptr<LinkCounters> counters_;
};

}  // namespace ringsync::service::transport
