// How a collective travels, decided here and nowhere else (as Horovod's
// ordered operation list and NCCL's tuner do): the named size limits, and
// which algorithm moves an operation between nodes.
//
//   on one node      memory work up to kInlineWorkBytes runs on the control
//                    thread, larger work on the pool (service/local/local_collective.h)
//   between nodes    allreduces up to --inline-bytes skip the data plane: the
//                    nodes exchange their local reductions directly, or node 0
//                    answers with the plan (negotiation::direct_limit and
//                    inline_limit divide --inline-bytes by the node count);
//                    then data_algorithm(): the direct reduce-scatter and
//                    allgather (ring/direct_allreduce.h) for allreduces up to
//                    the direct limit, recursive halving-doubling
//                    (ring/halving_doubling.h) above it up to the
//                    halving-doubling limit (auto: the direct algorithm there
//                    too where the node count is not a power of two), the
//                    pipelined ring above both and for every other collective
//   the loop         collectives up to kBusyPollBytes keep it polling (threads/busy_poll.h)
//
// Every node of a job must route alike: the settings here travel in the
// peers' hello and a node with other ones is refused (cluster/bootstrap.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/wire.h"

namespace ringsync::service::route {

// Memory work (gathering the ranks' inputs, copying results out) up to this
// many bytes runs on the control thread: handing it to the pool and back costs
// two thread wake-ups, more than copying a few KiB.
inline constexpr std::uint64_t kInlineWorkBytes = 64 * 1024;
// Collectives up to this payload keep the daemon's loop polling for a while:
// the ranks' next request, and the other nodes' contributions, are due soon.
// As large as the default --inline-bytes, so every allreduce the control plane
// carries by default (exchanged directly, or answered with the plan), which
// the control loop itself finishes, keeps it polling.
// (64 KiB before: 128 KiB allreduces took nearly twice as long; docs/benchmarks.md,
// "The control loop polls after allreduces up to 256 KiB".)
inline constexpr std::uint64_t kBusyPollBytes = 256 * 1024;
// --algorithm direct / rhd: every allreduce between nodes by that algorithm.
inline constexpr std::uint64_t kAlways = std::numeric_limits<std::uint64_t>::max();

// The bytes a local collective moves through memory: every rank's result,
// written once per rank (an allgather's result is already every rank's piece).
std::uint64_t local_work_bytes(wire::CollectiveKind kind, std::uint64_t count, DType dtype, std::uint64_t ranks);

enum class Algorithm { kRing, kHalvingDoubling, kDirect };
const char* algorithm_name(Algorithm algorithm);

// Which allreduces between nodes take which algorithm: the direct one up to
// direct_bytes, halving-doubling above it up to halving_doubling_bytes, the
// ring above both (0: never; kAlways: every allreduce).
struct DataRoutes {
  std::uint64_t direct_bytes = 0;
  std::uint64_t halving_doubling_bytes = 0;
  // Halving-doubling also where the node count is not a power of two, where it
  // folds (two whole buffers more over the folding pairs' links: twice the
  // ring's time on a 1 Gbit/s link at 3 nodes). False (--algorithm auto): the
  // direct algorithm takes those allreduces instead.
  bool fold = true;
  bool operator==(const DataRoutes&) const = default;
};

// Which algorithm moves an operation of `bytes` (its whole buffer) among `nodes` nodes.
Algorithm data_algorithm(const DataRoutes& routes, wire::CollectiveKind kind, std::uint64_t bytes,
                         std::uint32_t nodes);

// The routes --algorithm (auto | ring | rhd | direct), --direct-max-bytes and
// --rhd-max-bytes give.
Result<DataRoutes> data_routes(std::string_view algorithm, std::uint64_t direct_max_bytes,
                               std::uint64_t rhd_max_bytes);
// "auto (allreduces by direct up to 256KiB, halving-doubling up to 1MiB, ring above)",
// "ring", "rhd", "direct": for messages.
std::string describe(const DataRoutes& routes);

}  // namespace ringsync::service::route
