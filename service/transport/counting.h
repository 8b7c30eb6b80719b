// A Transport that counts the bytes each completed send and receive moved,
// per peer, for the link metrics, and how long sends to each peer were in
// flight. Forwards everything else. The counters are atomics: the data-plane
// thread adds, the control thread reads.
//
// Why the busy time: a ring runs every link at the pace of its slowest, so
// bytes per second are the same on every link of a ring. Bytes per second
// *while a send to that peer was in flight* is what the link itself achieves,
// and is low only on the slow link (the others finish their part and wait).
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include "service/transport/transport.h"

namespace ringsync::service::transport {

struct LinkCounters {
  explicit LinkCounters(int peers)
      : sent(peers), received(peers), send_busy_ns(peers), sends_in_flight(peers, 0), busy_since(peers) {}
  std::vector<std::atomic<std::uint64_t>> sent;          // by peer rank
  std::vector<std::atomic<std::uint64_t>> received;      // by peer rank
  std::vector<std::atomic<std::uint64_t>> send_busy_ns;  // time with >= 1 send to the peer in flight
  // The data-plane thread's own bookkeeping for send_busy_ns.
  std::vector<int> sends_in_flight;
  std::vector<std::chrono::steady_clock::time_point> busy_since;
};

class CountingTransport final : public Transport {
 public:
  CountingTransport(std::unique_ptr<Transport> inner, std::shared_ptr<LinkCounters> counters)
      : inner_(std::move(inner)), counters_(std::move(counters)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }

  void send(int peer, std::uint64_t tag, const void* data, std::size_t bytes,
            Callback done) override {
    const bool counted = peer >= 0 && static_cast<std::size_t>(peer) < counters_->sent.size();
    if (counted && counters_->sends_in_flight[peer]++ == 0)
      counters_->busy_since[peer] = std::chrono::steady_clock::now();
    inner_->send(peer, tag, data, bytes,
                 [c = counters_, peer, bytes, counted, done = std::move(done)](const Status& s) {
                   if (counted) {
                     if (s.ok()) c->sent[peer].fetch_add(bytes, std::memory_order_relaxed);
                     if (--c->sends_in_flight[peer] == 0) {
                       const auto busy = std::chrono::steady_clock::now() - c->busy_since[peer];
                       c->send_busy_ns[peer].fetch_add(
                           static_cast<std::uint64_t>(
                               std::chrono::duration_cast<std::chrono::nanoseconds>(busy).count()),
                           std::memory_order_relaxed);
                     }
                   }
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
