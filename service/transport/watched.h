// What one data-plane operation has moved and what it waits for: a Transport
// that forwards to another and records, in an OperationWatch, every message
// the operation posts and completes. The ring's thread records as it runs;
// the control thread reads a snapshot whenever it needs one — for the
// progress deadline (no bytes moved for --progress-timeout) and for the
// daemon's in-flight view (GET /debug/inflight, ringsync top).
//
// "Waits for" is the oldest message still outstanding, receives first: a
// receive that does not complete is data a peer has not delivered, and the
// peer, step and chunk of its tag say which.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "service/transport/transport.h"

namespace ringsync::service::transport {

class OperationWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // One outstanding message.
  struct Waiting {
    int peer = 0;
    bool receive = true;
    std::uint16_t step = 0;
    std::uint16_t chunk = 0;
    std::size_t bytes = 0;
    Clock::time_point since;
  };
  struct Snapshot {
    std::uint64_t bytes_moved = 0;      // of completed sends and receives
    std::uint64_t messages_done = 0;
    std::uint64_t messages_failed = 0;  // completed with an error (a peer lost, the ring torn down)
    Clock::time_point first_failure;    // when the first of them did
    std::size_t outstanding = 0;        // messages posted, not completed
    Clock::time_point last_progress;    // the watch's start, or the last completion
    std::optional<Waiting> waiting;     // the oldest outstanding receive, else send
  };

  explicit OperationWatch(Clock::time_point start = Clock::now()) : last_progress_(start) {}

  // Called on the thread that drives the transport.
  std::uint64_t posted(int peer, bool receive, std::uint64_t tag, std::size_t bytes, Clock::time_point now);
  void completed(std::uint64_t id, bool ok, Clock::time_point now);

  // Any thread.
  Snapshot snapshot() const;

 private:
  mutable std::mutex mu_;
  std::uint64_t next_id_ = 1;
  std::uint64_t bytes_moved_ = 0;
  std::uint64_t messages_done_ = 0;
  std::uint64_t messages_failed_ = 0;
  Clock::time_point first_failure_;
  Clock::time_point last_progress_;
  std::map<std::uint64_t, Waiting> outstanding_;  // by id: in posting order
};

class WatchedTransport final : public Transport {
 public:
  WatchedTransport(Transport& inner, std::shared_ptr<OperationWatch> watch)
      : inner_(inner), watch_(std::move(watch)) {}

  int rank() const override { return inner_.rank(); }
  int size() const override { return inner_.size(); }
  void send(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Callback done) override;
  void recv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Callback done) override;
  bool progress() override { return inner_.progress(); }
  int event_fd() const override { return inner_.event_fd(); }
  bool arm() override { return inner_.arm(); }
  void cancel_all(const Status& why) override { inner_.cancel_all(why); }
  std::string peer_transports(int peer) const override { return inner_.peer_transports(peer); }

 private:
  Callback record(std::uint64_t id, Callback done);

  Transport& inner_;
  std::shared_ptr<OperationWatch> watch_;
};

}  // namespace ringsync::service::transport
