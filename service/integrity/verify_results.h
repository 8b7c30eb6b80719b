// The end-to-end result check (--verify-results, docs/security.md): after the
// ring, every node checksums its copy of a result that must be the same on
// every node, the nodes exchange the checksums, and a difference fails the
// collective on every rank, naming the nodes whose copies differ.
//
// This folder depends on common/ and on the ring's task and transport
// interfaces (service/ring/task.h, service/transport/transport.h) only.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "common/wire.h"

namespace ringsync::service::integrity {

enum class VerifyResults : std::uint8_t {
  kOff,     // no check: the ring runs as if the feature did not exist
  kSample,  // a few windows of every result (checked_ranges.h)
  kAll,     // every byte of every result
};

// "off", "sample" or "all"; anything else is an error that lists them.
Result<VerifyResults> parse_verify_results(std::string_view text);
std::string_view verify_results_name(VerifyResults mode);

// Whether a collective's ring result is the same on every node (allreduce,
// broadcast, allgather): only those can be compared. Reduce-scatter and
// alltoall leave each node a different part.
bool result_is_shared(wire::CollectiveKind kind);

}  // namespace ringsync::service::integrity
