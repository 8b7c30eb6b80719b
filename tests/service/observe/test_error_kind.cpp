// service/observe/error_kind.h: the kinds of ringsync_errors_total and their labels.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "service/observe/error_kind.h"

namespace test_service_observe_error_kind {

using namespace ringsync;
using namespace ringsync::service::observe;

TEST_CASE("error kinds: the labels dashboards and alerts read") {
  CHECK(label(ErrorKind::kPeerLost) == "peer_lost");
  CHECK(label(ErrorKind::kInvalidArgument) == "invalid_argument");
  CHECK(label(ErrorKind::kRankUnresponsive) == "rank_unresponsive");
  CHECK(label(ErrorKind::kTimeout) == "timeout");
  CHECK(label(ErrorKind::kInternal) == "internal");
  CHECK(label(ErrorKind::kInternalError) == "internal_error");
  // Every series that exists from the start, once each, none of them empty.
  std::set<std::string> labels;
  for (ErrorKind kind : counted_from_start()) labels.insert(std::string(label(kind)));
  CHECK(labels.size() == counted_from_start().size());
  CHECK(labels == std::set<std::string>{"accept", "alloc", "auth", "client_lost", "device", "flush_timeout",
                                        "handshake_timeout", "hello_refused", "integrity", "internal",
                                        "invalid_argument", "keep_state", "mismatch", "peer_lost", "peer_protocol",
                                        "peer_refused", "protocol", "rank_unresponsive", "ring_formation",
                                        "shutdown", "slow_client", "timeout"});
}

TEST_CASE("error kinds: a failure without a kind counts as its status code's") {
  CHECK(of(StatusCode::kPeerLost) == ErrorKind::kPeerLost);
  CHECK(of(StatusCode::kMismatch) == ErrorKind::kMismatch);
  CHECK(label(of(StatusCode::kProtocolError)) == "protocol_error");
  CHECK(label(of(StatusCode::kOutOfMemory)) == "out_of_memory");
  CHECK(label(of(StatusCode::kClosed)) == "closed");
  CHECK(label(of(StatusCode::kInternal)) == "internal_error");
  CHECK(resolve(ErrorKind::kFromStatus, Status::Timeout("late")) == ErrorKind::kTimeout);
  CHECK(resolve(ErrorKind::kIntegrity, Status::Mismatch("copies differ")) == ErrorKind::kIntegrity);
}

}  // namespace test_service_observe_error_kind
