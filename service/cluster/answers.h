// Where a collective's outcome goes: every rank of it is answered and the
// outcome counted (the daemon does both). A job's ring, its negotiator and its
// executor all answer through it.
#pragma once

#include <cstddef>

#include "common/status.h"
#include "service/local/pending_collective.h"
#include "service/observe/error_kind.h"

namespace ringsync::service::cluster {

class Answers {
 public:
  virtual ~Answers() = default;
  // Every rank gets `why`, counted as ringsync_errors_total{kind} (kFromStatus:
  // the status's own kind).
  virtual void fail(local::PendingCollective& collective, const Status& why, observe::ErrorKind kind) = 0;
  // Every rank gets success; `ready`: when this node had it ready; `ranks`:
  // the ranks of the whole job (for bus bandwidth).
  virtual void succeed(local::PendingCollective& collective, Clock::time_point ready, std::size_t ranks) = 0;
};

// What the failures of a lost ring count as: a deadline that ran out, or a lost peer.
inline observe::ErrorKind lost_kind(const Status& why) {
  return why.code() == StatusCode::kTimeout ? observe::ErrorKind::kTimeout : observe::ErrorKind::kPeerLost;
}

}  // namespace ringsync::service::cluster
