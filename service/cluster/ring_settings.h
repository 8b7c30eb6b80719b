// The settings every node of a job's ring must run with alike, in one struct
// compared whole: they travel in each node's hello (common/peer_wire.h) and
// node 0 refuses a node whose settings differ, naming the first that does
// (formation/bootstrap.cpp). Nodes with other chunk sizes would cut messages
// differently, with other caches or inline limits plan differently, with
// other routes run other algorithms, with other checks wait for each other's
// check words.
#pragma once

#include <cstdint>
#include <string>

#include "common/peer_wire.h"
#include "service/integrity/verify_results.h"
#include "service/route/route.h"

namespace ringsync::service::cluster {

struct RingSettings {
  std::uint64_t chunk_bytes = 0;     // --ring-chunk-bytes
  std::uint32_t response_cache = 0;  // --response-cache (capacity; 0: off)
  std::uint64_t inline_bytes = 0;    // --inline-bytes
  route::DataRoutes routes;          // --algorithm, --direct-max-bytes, --rhd-max-bytes
  integrity::VerifyResults verify_results = integrity::VerifyResults::kOff;  // --verify-results
  bool operator==(const RingSettings&) const = default;
};

// Why `who` running `theirs` cannot join node 0 running `ours`: the first
// setting that differs, with both values and its flag; "" when alike.
std::string difference(const RingSettings& ours, const RingSettings& theirs, const std::string& who);

// As a peer's hello carries them, and back.
void put(const RingSettings& settings, peer_wire::PeerHello& hello);
RingSettings settings_of(const peer_wire::PeerHello& hello);

}  // namespace ringsync::service::cluster
