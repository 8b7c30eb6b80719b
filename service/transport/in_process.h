// Transport endpoints that live in one process, for testing ring algorithms
// with ranks as threads (Gloo's BaseTest::spawn idea).
//
// InProcessFabric(size) holds `size` endpoints, one per node. Each endpoint is
// used from one thread (its owner); different endpoints may be used from
// different threads at once. Semantics, as the Transport interface promises:
// - A send copies its data straight into the matching posted receive, or into
//   a buffer kept until that receive is posted (an unexpected message), so a
//   send completes at once. Matching is by (sending node, tag), first come
//   first served among equal keys.
// - Callbacks run only inside progress() (or cancel_all()) of the endpoint
//   that posted the operation, on its owner's thread.
// - event_fd() is an eventfd that becomes readable when a completion is
//   queued; arm() drains it and returns false if completions are already
//   queued.
//
// Failure injection: kill(rank) makes node `rank` die. Its peers' receives
// posted from it fail with kPeerLost, and so do later sends to it and
// receives from it (messages it sent before dying are still delivered). Its
// own pending and later operations fail with kClosed. Every endpoint is woken,
// so owners waiting on event_fd() can look at killed().
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "service/transport/transport.h"

namespace ringsync::service::transport {

class InProcessFabric {
 public:
  // Throws std::invalid_argument if size < 1.
  explicit InProcessFabric(int size);
  ~InProcessFabric();
  InProcessFabric(const InProcessFabric&) = delete;
  InProcessFabric& operator=(const InProcessFabric&) = delete;

  int size() const { return static_cast<int>(endpoints_.size()); }

  // Node `rank`'s endpoint, 0 <= rank < size(); valid while the fabric lives.
  Transport& endpoint(int rank);

  // Node `rank` dies (see above). Thread-safe; killing twice does nothing more.
  void kill(int rank);
  bool killed(int rank) const;

  // Payload bytes and messages node `rank` has sent successfully so far.
  std::uint64_t bytes_sent(int rank) const;
  std::uint64_t messages_sent(int rank) const;

 private:
  class Endpoint;

  Endpoint& at(int rank) const { return *endpoints_[static_cast<std::size_t>(rank)]; }

  std::vector<std::unique_ptr<Endpoint>> endpoints_;
};

}  // namespace ringsync::service::transport
