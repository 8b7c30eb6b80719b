// The last step of a small allreduce that skips the ring: every node's local
// reduction, reduced once more into the job's result (docs/cluster.md, "Small
// allreduces"). Whoever combines — node 0 for a plan, or every node for a
// direct exchange — uses node order, so the bits are the same everywhere.
#pragma once

#include <cstdint>
#include <vector>

#include "common/peer_wire.h"

namespace ringsync::service::negotiation {

// node_data[n]: node n's local reduction of t (t.count elements of t.dtype;
// for avg, its ranks' sum). Writes t.count elements to out; avg is divided
// once, by the job's `ranks`.
void combine(const peer_wire::ReadyTensor& t, const std::vector<const void*>& node_data, std::uint64_t ranks,
             std::uint8_t* out);

}  // namespace ringsync::service::negotiation
