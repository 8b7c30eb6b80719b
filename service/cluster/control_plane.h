// What the parts of a formed ring hand each other: the control links as an
// interface (so negotiation is tested without sockets: test_negotiator.cpp), and one planned
// operation on its way from the plan to the answers.
#pragma once

#include <cstdint>
#include <vector>

#include "common/peer_wire.h"
#include "service/local/pending_collective.h"

namespace ringsync::service::cluster {

// The formed ring's control links: a star around node 0. Workers reach node 0
// only; node 0 reaches every worker. Frames to one node keep their order.
class ControlPlane {
 public:
  virtual ~ControlPlane() = default;
  virtual void send(std::uint32_t node, const peer_wire::Message& message) = 0;
};

// One operation of a plan as this node runs it: the fused tensors, in buffer
// order, and when each became ready here.
struct PlannedOperation {
  peer_wire::Operation op;
  std::vector<local::PendingCollective> tensors;
  std::vector<Clock::time_point> ready_at;
};

}  // namespace ringsync::service::cluster
