// A ring buffer that something else fills and drains while the ring runs over it:
// a GPU buffer staged through host memory chunk by chunk (execution/ring_staging.h).
// Without a gate (RingOptions::gate null) the buffer holds this node's data from
// the start and nobody needs to hear when a range is final.
//
// The ring tasks ask filled() before they read this node's own input from a
// range (a reduce-scatter sends its own segment at step 0 and reduces received
// chunks into its own data), and they wait, without blocking, until it is;
// they call finished() once a range holds its final result (an allgather's own
// segment at its start, every chunk it receives as it lands), so the range can
// be copied out while the rest is still on the wire. Both are called on the
// thread that drives the task.
#pragma once

#include <cstddef>

namespace ringsync::service::ring {

class StageGate {
 public:
  virtual ~StageGate() = default;
  // [at, at + bytes) of the ring buffer holds this node's input.
  virtual bool filled(const std::byte* at, std::size_t bytes) = 0;
  // [at, at + bytes) holds the collective's final result.
  virtual void finished(const std::byte* at, std::size_t bytes) = 0;
};

}  // namespace ringsync::service::ring
