#include "service/route/route.h"

#include <array>

#include "common/units.h"

namespace ringsync::service::route {
namespace {

using wire::CollectiveKind;

bool allreduce(const Query& q) { return q.kind == CollectiveKind::kAllreduce; }
// Every rank's whole input reduced (allreduce, reduce): the allreduce's data tasks serve it.
bool whole_reduction(const Query& q) { return wire::reduces(q.kind) && !wire::traits(q.kind).send_per_rank; }
bool power_of_two(std::uint32_t n) { return (n & (n - 1)) == 0; }
bool within(std::uint64_t bytes, std::uint64_t limit) { return limit > 0 && bytes <= limit; }

struct Rule {
  Stage stage;
  Path path;
  const char* why;
  bool (*enabled)(const Query&, const Limits&);
};

// The one ordered list: at each stage the first rule enabled wins. Each stage
// ends with a rule that is always enabled.
constexpr std::array kRules{
    // On the node, once every local rank submitted the collective.
    Rule{Stage::kOnNode, Path::kLocalDevice, "a job of one node with GPU buffers: reduced and copied on the GPU",
         [](const Query& q, const Limits&) { return q.alone && q.device && q.bytes > 0; }},
    Rule{Stage::kOnNode, Path::kLocalNothing, "a job of one node and nothing to move: answered at once",
         [](const Query& q, const Limits&) { return q.alone && q.bytes == 0; }},
    Rule{Stage::kOnNode, Path::kLocalInline,
         "a job of one node and a few KiB of memory work: on the control thread (handing it to the work pool and "
         "back costs two thread wake-ups)",
         [](const Query& q, const Limits&) { return q.alone && q.local_work_bytes <= kInlineWorkBytes; }},
    Rule{Stage::kOnNode, Path::kLocalPool, "a job of one node: the work pool's threads",
         [](const Query& q, const Limits&) { return q.alone; }},
    Rule{Stage::kOnNode, Path::kDirectExchange,
         "an allreduce up to --inline-bytes x 2/(N(N-1)): one message between the nodes, no plan and no ring",
         [](const Query& q, const Limits& l) {
           return allreduce(q) && q.bytes > 0 && q.bytes <= direct_limit(l.inline_bytes, q.nodes);
         }},
    Rule{Stage::kOnNode, Path::kNegotiation, "reported to node 0, which plans it with the other nodes",
         [](const Query&, const Limits&) { return true; }},

    // Planning, on node 0, once every node reported the tensor and they agree.
    Rule{Stage::kPlanning, Path::kInline,
         "an allreduce up to --inline-bytes x 2/N whose local reductions every node sent: node 0 reduces them and "
         "the plan carries the result",
         [](const Query& q, const Limits& l) {
           return allreduce(q) && q.every_node_sent_data && q.bytes > 0 &&
                  q.bytes <= inline_limit(l.inline_bytes, q.nodes);
         }},
    Rule{Stage::kPlanning, Path::kPlanned, "an operation every node runs", [](const Query&, const Limits&) {
           return true;
         }},

    // Running a planned operation, on every node.
    Rule{Stage::kRunning, Path::kPlanOnly, "no data: node 0 planned it once every node was ready, the plan is it",
         [](const Query& q, const Limits&) { return !wire::moves_data(q.kind); }},
    Rule{Stage::kRunning, Path::kStagedRing,
         "one GPU allreduce staged chunk by chunk: the copies to and from the GPU overlap the ring",
         [](const Query& q, const Limits&) { return q.staged_chunk_by_chunk; }},
    Rule{Stage::kRunning, Path::kDirect,
         "an allreduce or reduce up to --direct-max-bytes: every node's segment to its owner, then every owner's "
         "result to every node",
         [](const Query& q, const Limits& l) {
           return whole_reduction(q) && q.nodes >= 2 && within(q.bytes, l.data.direct_bytes);
         }},
    Rule{Stage::kRunning, Path::kHalvingDoubling, "an allreduce or reduce up to --rhd-max-bytes: log2(N) steps each way",
         [](const Query& q, const Limits& l) {
           return whole_reduction(q) && q.nodes >= 2 && within(q.bytes, l.data.halving_doubling_bytes) &&
                  (power_of_two(q.nodes) || l.data.fold);
         }},
    Rule{Stage::kRunning, Path::kDirect,
         "an allreduce or reduce up to --rhd-max-bytes on a node count that is not a power of two (--algorithm "
         "auto): halving-doubling would fold",
         [](const Query& q, const Limits& l) {
           return whole_reduction(q) && q.nodes >= 2 && within(q.bytes, l.data.halving_doubling_bytes);
         }},
    Rule{Stage::kRunning, Path::kRing, "the pipelined ring: every other size and collective",
         [](const Query&, const Limits&) { return true; }},
};

}  // namespace

Route choose(Stage stage, const Query& query, const Limits& limits) {
  for (const Rule& rule : kRules)
    if (rule.stage == stage && rule.enabled(query, limits)) return Route{rule.path, rule.why};
  return Route{Path::kRing, "no rule"};  // each stage ends with one that is always enabled
}

bool offers_local_reduction(const Query& q, const Limits& limits) {
  return allreduce(q) && !q.device && q.bytes > 0 && q.bytes <= inline_limit(limits.inline_bytes, q.nodes);
}

bool stages_through_host(const Query& q) { return q.device && q.bytes > 0 && wire::moves_data(q.kind); }

bool staged_chunk_by_chunk(wire::CollectiveKind kind, std::uint64_t bytes, std::uint32_t nodes) {
  return kind == CollectiveKind::kAllreduce && nodes > 1 && bytes >= kStagedRingBytes;
}

const char* path_name(Path path) {
  switch (path) {
    case Path::kLocalDevice: return "local (GPU)";
    case Path::kLocalNothing: return "local (nothing to move)";
    case Path::kLocalInline: return "local (control thread)";
    case Path::kLocalPool: return "local (work pool)";
    case Path::kDirectExchange: return "direct exchange";
    case Path::kNegotiation: return "negotiation";
    case Path::kInline: return "inline";
    case Path::kPlanned: return "planned";
    case Path::kPlanOnly: return "plan only";
    case Path::kStagedRing: return "staged ring";
    case Path::kDirect: return "direct";
    case Path::kHalvingDoubling: return "halving-doubling";
    case Path::kRing: return "ring";
  }
  return "ring";
}

std::uint64_t local_work_bytes(wire::CollectiveKind kind, std::uint64_t count, DType dtype, std::uint64_t ranks) {
  return wire::extent(kind, count, ranks).payload() * dtype_size(dtype) * ranks;
}

std::uint64_t direct_limit(std::uint64_t max_bytes, std::uint32_t num_nodes) {
  if (num_nodes < 2) return 0;
  const std::uint64_t n = num_nodes;
  return max_bytes * 2 / (n * (n - 1));
}

std::uint64_t inline_limit(std::uint64_t max_bytes, std::uint32_t num_nodes) {
  return num_nodes <= 2 ? max_bytes : max_bytes * 2 / num_nodes;
}

Result<DataRoutes> data_routes(std::string_view algorithm, std::uint64_t direct_max_bytes,
                               std::uint64_t rhd_max_bytes) {
  if (algorithm == "auto") return DataRoutes{direct_max_bytes, rhd_max_bytes, /*fold=*/false};
  if (algorithm == "ring") return DataRoutes{};
  if (algorithm == "rhd") return DataRoutes{0, kAlways};
  if (algorithm == "direct") return DataRoutes{kAlways, 0};
  return Status::InvalidArgument("algorithm must be auto, ring, rhd or direct, got '" + std::string(algorithm) + "'");
}

std::string describe(const DataRoutes& routes) {
  if (routes.direct_bytes == kAlways) return "direct";
  if (routes.halving_doubling_bytes == kAlways && routes.direct_bytes == 0) return "rhd";
  if (routes == DataRoutes{}) return "ring";
  // Limits at or below the direct one never apply; kAlways only comes with --algorithm.
  std::string out = "auto (allreduces by ";
  if (routes.direct_bytes > 0) out += "direct up to " + units::format_bytes(routes.direct_bytes) + ", ";
  if (routes.halving_doubling_bytes > routes.direct_bytes)
    out += "halving-doubling up to " + units::format_bytes(routes.halving_doubling_bytes) +
           (routes.fold ? ", " : " (direct where the node count is not a power of two), ");
  out += "ring above";
  return out + ")";
}

}  // namespace ringsync::service::route
