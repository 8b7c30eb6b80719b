#include "service/observe/error_kind.h"

#include <array>

namespace ringsync::service::observe {
namespace {

// By ErrorKind, in the enum's order.
constexpr std::array<std::string_view, 27> kLabels{
    "",                                      // kFromStatus: never a label
    "accept",        "alloc",          "auth",          "client_lost",       "device",
    "flush_timeout", "handshake_timeout", "hello_refused", "integrity",     "internal",
    "invalid_argument", "keep_state",  "mismatch",      "peer_lost",         "peer_protocol",
    "peer_refused",  "protocol",       "rank_unresponsive", "ring_formation", "shutdown",
    "slow_client",   "timeout",        "protocol_error", "out_of_memory",    "closed",
    "internal_error",
};
static_assert(kLabels.size() == static_cast<std::size_t>(ErrorKind::kInternalError) + 1, "one label per kind");

}  // namespace

std::string_view label(ErrorKind kind) {
  const auto i = static_cast<std::size_t>(kind);
  return i < kLabels.size() && i > 0 ? kLabels[i] : "internal_error";
}

ErrorKind of(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument: return ErrorKind::kInvalidArgument;
    case StatusCode::kMismatch: return ErrorKind::kMismatch;
    case StatusCode::kPeerLost: return ErrorKind::kPeerLost;
    case StatusCode::kTimeout: return ErrorKind::kTimeout;
    case StatusCode::kProtocolError: return ErrorKind::kProtocolError;
    case StatusCode::kOutOfMemory: return ErrorKind::kOutOfMemory;
    case StatusCode::kClosed: return ErrorKind::kClosed;
    case StatusCode::kOk:
    case StatusCode::kInternal: return ErrorKind::kInternalError;
  }
  return ErrorKind::kInternalError;
}

const std::vector<ErrorKind>& counted_from_start() {
  static const std::vector<ErrorKind> kinds = [] {
    std::vector<ErrorKind> all;
    for (auto k = static_cast<std::uint8_t>(ErrorKind::kAccept); k <= static_cast<std::uint8_t>(ErrorKind::kTimeout); ++k)
      all.push_back(static_cast<ErrorKind>(k));
    return all;
  }();
  return kinds;
}

}  // namespace ringsync::service::observe
