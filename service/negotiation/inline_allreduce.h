// Small allreduces answered through negotiation (docs/cluster.md, "Small
// allreduces"): a node sends its local reduction of the tensor with its ready
// list, node 0 reduces every node's (negotiation::Coordinator) and the plan
// carries the finished result, which every node copies to its ranks. One round
// trip to node 0 instead of a round trip plus a ring of 2(N-1) steps.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/status.h"
#include "service/local/pending_collective.h"

namespace ringsync::service::negotiation {

// The local ranks' reduction of a ready allreduce of at most max_bytes in host
// memory (avg sums: the coordinator divides by the job's ranks); nullopt for
// anything else (other collectives, GPU buffers, larger tensors, max_bytes 0).
std::optional<std::vector<std::uint8_t>> local_reduction(const local::PendingCollective& collective,
                                                         std::uint64_t max_bytes);

// Copies `result` (one tensor's finished allreduce) to every local rank's
// receive buffer. Fails, copying nothing, when its size is not the tensor's.
Status copy_result(const local::PendingCollective& collective, std::span<const std::uint8_t> result);

}  // namespace ringsync::service::negotiation
