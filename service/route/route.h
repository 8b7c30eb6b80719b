// How a collective travels, decided here and nowhere else (Horovod's ordered
// operation list, NCCL's tuning table): one ordered list of paths
// (route.cpp, kRules); at each of the three decisions a collective meets, the
// first enabled path of that stage is taken, with the reason it was chosen.
//
//   on the node   every local rank submitted it (the daemon, the negotiator)
//     local (GPU)             a job of one node, GPU buffers: reduced and copied on the GPU
//     local (nothing)         a job of one node, no data: answered at once
//     local (control thread)  a job of one node, up to kInlineWorkBytes of memory work
//     local (work pool)       a job of one node
//     direct exchange         a small allreduce: every node sends its local reduction to
//                             every other and reduces them itself (negotiation/direct_exchange.h)
//     negotiation             anything else: reported to node 0, which plans it
//   planning      node 0 heard of it from every node (negotiation/coordinator.h)
//     inline                  a small allreduce whose local reductions every node sent:
//                             node 0 reduces them and the plan carries the result
//     planned                 anything else: an operation every node runs
//   running       the executor starts a planned operation (execution/executor.h)
//     plan only               a barrier: the plan, made once every node was ready, is it
//     staged ring             one GPU allreduce staged chunk by chunk: the copies overlap the
//                             ring (execution/staged_allreduce.h)
//     direct                  allreduces up to --direct-max-bytes (ring/direct_allreduce.h)
//     halving-doubling        allreduces up to --rhd-max-bytes (ring/halving_doubling.h)
//     ring                    everything else (the kind's ring task, service/collective/)
//
// Every node of a job must route alike: the settings here travel in the
// peers' hello and a node with other ones is refused (formation/bootstrap.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>

#include "common/collective_kind.h"
#include "common/dtype.h"
#include "common/status.h"

namespace ringsync::service::route {

// Memory work (gathering the ranks' inputs, copying results out) up to this
// many bytes runs on the control thread: handing it to the pool and back costs
// two thread wake-ups, more than copying a few KiB.
inline constexpr std::uint64_t kInlineWorkBytes = 64 * 1024;
// Collectives up to this payload keep the daemon's loop polling for a while:
// the ranks' next request, and the other nodes' contributions, are due soon.
// As large as the default --inline-bytes, so that every allreduce the control
// plane carries keeps it polling (docs/benchmarks-history.md, "The control loop
// polls after allreduces up to 256 KiB").
inline constexpr std::uint64_t kBusyPollBytes = 256 * 1024;
// The smallest GPU allreduce staged chunk by chunk: below it a whole copy
// takes a few microseconds, and the copy engine's cost per chunk would
// outweigh the overlap.
inline constexpr std::uint64_t kStagedRingBytes = std::uint64_t{1} << 20;
// --algorithm direct / rhd: every allreduce between nodes by that algorithm.
inline constexpr std::uint64_t kAlways = std::numeric_limits<std::uint64_t>::max();

// The bytes a local collective moves through memory: every rank's result,
// written once per rank (an allgather's result is already every rank's piece).
std::uint64_t local_work_bytes(wire::CollectiveKind kind, std::uint64_t count, DType dtype, std::uint64_t ranks);

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

// The routes --algorithm (auto | ring | rhd | direct), --direct-max-bytes and
// --rhd-max-bytes give.
Result<DataRoutes> data_routes(std::string_view algorithm, std::uint64_t direct_max_bytes,
                               std::uint64_t rhd_max_bytes);
// "auto (allreduces by direct up to 256KiB, halving-doubling up to 1MiB, ring above)",
// "ring", "rhd", "direct": for messages.
std::string describe(const DataRoutes& routes);

// The largest allreduce exchanged directly on N nodes. Every node receives
// (N-1)·S for one; node 0, which forwards the workers' contributions to each
// other (the control plane is a star), sends (N-1)²·S, where the ring moves
// 2(N-1)/N·S per node: N(N-1)/2 times as much, so the limit is
// max_bytes·2/(N(N-1)) — all of max_bytes at 2 nodes, where both move the same.
std::uint64_t direct_limit(std::uint64_t max_bytes, std::uint32_t num_nodes);
// The largest inline operation (fused tensors together) on N nodes. Node 0
// receives and sends (N-1)·S for one, where the ring moves 2(N-1)/N·S per
// node: N/2 times as much, so the limit is max_bytes·2/N (all of it at 2
// nodes, where both move the same bytes).
std::uint64_t inline_limit(std::uint64_t max_bytes, std::uint32_t num_nodes);

enum class Stage : std::uint8_t { kOnNode, kPlanning, kRunning };

enum class Path : std::uint8_t {
  kLocalDevice,
  kLocalNothing,
  kLocalInline,
  kLocalPool,
  kDirectExchange,
  kNegotiation,
  kInline,
  kPlanned,
  kPlanOnly,
  kStagedRing,
  kDirect,
  kHalvingDoubling,
  kRing,
};
// "local (GPU)", "direct exchange", "ring", "halving-doubling", ...: metric
// labels (ring, halving-doubling, direct) and messages.
const char* path_name(Path path);

// What a decision knows of a collective, or of a planned operation.
struct Query {
  wire::CollectiveKind kind = wire::CollectiveKind::kAllreduce;
  // One rank's payload in bytes; running: the operation's whole ring buffer
  // (fused tensors together).
  std::uint64_t bytes = 0;
  // On the node: the memory work of a local collective (local_work_bytes()).
  std::uint64_t local_work_bytes = 0;
  // A job of this node alone (no ring); otherwise the nodes of its ring.
  bool alone = true;
  std::uint32_t nodes = 1;
  bool device = false;  // GPU buffers
  // Planning: every node sent its local reduction, of the tensor's size.
  bool every_node_sent_data = false;
  // Running: one GPU tensor whose staging copies chunk by chunk (staged_chunk_by_chunk()).
  bool staged_chunk_by_chunk = false;
};

// The settings routes depend on (every node of a job has the same).
struct Limits {
  std::uint64_t inline_bytes = 0;  // --inline-bytes
  DataRoutes data;                 // --algorithm, --direct-max-bytes, --rhd-max-bytes
};

struct Route {
  Path path = Path::kRing;
  std::string_view why;  // the rule's reason, for logs and the in-flight view
};

// The first enabled path of `stage` for `query`.
Route choose(Stage stage, const Query& query, const Limits& limits);

// On the node, for the inline path that node 0 may take: whether this node
// sends its local reduction of the tensor with its report.
bool offers_local_reduction(const Query& query, const Limits& limits);
// GPU buffers of a job of several nodes travel through host memory: staged
// before negotiation (device/staging.h).
bool stages_through_host(const Query& query);
// Whether such a staging copies chunk by chunk as the ring runs (the staged
// ring path) rather than whole before it.
bool staged_chunk_by_chunk(wire::CollectiveKind kind, std::uint64_t bytes, std::uint32_t nodes);

}  // namespace ringsync::service::route
