// The seam between the ring algorithms and the wire that moves their data
// (Gloo's Pair/Buffer idea, UCX's tagged messages). One Transport is one
// node's endpoint in a job of size() nodes. Operations are non-blocking: post
// a send or receive, then drive progress() from the owner's loop; callbacks run
// inside progress() on the calling thread. Implementations: in-process (ranks
// as threads, for tests) and UCX (between daemons).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"

namespace ringsync::service::transport {

// A tag names one message between a pair of nodes, so concurrent collectives
// and the steps and chunks within one never match each other's messages:
// 32 bits of collective sequence, 16 of step, 16 of chunk.
inline std::uint64_t make_tag(std::uint32_t sequence, std::uint16_t step, std::uint16_t chunk) {
  return (static_cast<std::uint64_t>(sequence) << 32) | (static_cast<std::uint64_t>(step) << 16) |
         chunk;
}

class Transport {
 public:
  using Callback = std::function<void(const Status&)>;

  virtual ~Transport() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  // Sends `bytes` from `data` to node `peer` under `tag`. `data` must stay valid
  // until `done` runs. A send completes once the data has left `data` (the
  // peer may not have received it yet).
  virtual void send(int peer, std::uint64_t tag, const void* data, std::size_t bytes,
                    Callback done) = 0;
  // Receives exactly `bytes` from node `peer` under `tag` into `data`. A message
  // of another size completes `done` with an error.
  virtual void recv(int peer, std::uint64_t tag, void* data, std::size_t bytes,
                    Callback done) = 0;

  // Completes whatever is ready, running callbacks. Returns true if anything
  // completed (so the caller may loop), false if nothing was ready.
  virtual bool progress() = 0;

  // A descriptor that becomes readable when progress() may have work, for the
  // owner's event loop; -1 when the transport has none (then poll progress()).
  virtual int event_fd() const = 0;
  // Prepares event_fd() for waiting. Returns false when there is work right now
  // (call progress() again instead of waiting).
  virtual bool arm() = 0;

  // Completes every outstanding send and receive with `why` (a peer was lost, the
  // job is being torn down). Callbacks run before this returns.
  virtual void cancel_all(const Status& why) = 0;

  // What carries the link to `peer`, e.g. "tcp/eth0" or "rc_mlx5/mlx5_0:1,self/memory"
  // ("" when the transport cannot tell). Only before the transport's thread starts.
  virtual std::string peer_transports(int /*peer*/) const { return {}; }
};

}  // namespace ringsync::service::transport
