// What ringsync_errors_total{kind} counts: one enum, its label names in one
// table (error_kind.cpp). docs/observability.md lists what each means.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ringsync::service::observe {

enum class ErrorKind : std::uint8_t {
  kFromStatus,  // none named: the failure's status code says it (of(StatusCode))
  kAccept,             // the trainers' socket could not accept
  kAlloc,              // a shared buffer was refused (limits, memory)
  kAuth,               // a peer or a trainer failed to prove who it is
  kClientLost,         // a rank left or died with collectives pending
  kDevice,             // a GPU step failed
  kFlushTimeout,       // a client did not read its replies in time
  kHandshakeTimeout,   // a client did not say hello in time
  kHelloRefused,       // a trainer's hello was refused
  kIntegrity,          // --verify-results found copies that differ
  kInternal,           // a bug: please report it
  kInvalidArgument,    // a request with bad arguments
  kKeepState,          // a kept state was refused
  kMismatch,           // ranks or nodes disagree on a tensor
  kPeerLost,           // another node was lost
  kPeerProtocol,       // another node broke the peer protocol
  kPeerRefused,        // another node was refused into the ring
  kProtocol,           // a trainer broke the client protocol
  kRankUnresponsive,   // a rank stopped answering while it waited
  kRingFormation,      // a ring did not form
  kShutdown,           // the daemon shut down under the collective
  kSlowClient,         // a client's replies piled up unread
  kTimeout,            // a deadline ran out
  // Status codes with labels of their own (of(StatusCode)).
  kProtocolError,
  kOutOfMemory,
  kClosed,
  kInternalError,
};

// "peer_lost", "invalid_argument", ...
std::string_view label(ErrorKind kind);
// The kind a status code stands for: "invalid_argument", "mismatch",
// "peer_lost", "timeout", "protocol_error", "out_of_memory", "closed",
// "internal_error".
ErrorKind of(StatusCode code);
// `kind`, or the status's own when kind is kFromStatus.
inline ErrorKind resolve(ErrorKind kind, const Status& status) {
  return kind == ErrorKind::kFromStatus ? of(status.code()) : kind;
}
// The kinds whose series exist (at 0) from the start.
const std::vector<ErrorKind>& counted_from_start();

}  // namespace ringsync::service::observe
