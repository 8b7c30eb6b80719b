// Daemon <-> daemon control messages as plain structs (schemas/peer.fbs).
// Framing is the same as the client protocol's (wire::frame_length); FlatBuffers
// stays in peer_wire.cpp, and decode() verifies before reading.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "common/wire.h"

namespace ringsync::peer_wire {

// 3: RankLeft, NodeDrained; 4: reduce-scatter, alltoall; 5: challenge-response, no key in the hello;
// 6: UCX tcp segments that follow the ring chunk (transport::tcp_segment_for), whose fragments a
// daemon before it, with 256 KiB receive segments, cannot take (UCX aborts on them);
// 7: ucx_address holds a data-plane offer (locality and one or two workers,
// service/transport/ucx_offer.h), no longer a bare UCX worker address
inline constexpr std::uint32_t kProtocolVersion = 7;

struct PeerHello {
  std::uint32_t protocol_version = kProtocolVersion;
  std::string job_id;
  std::uint32_t node_rank = 0;
  std::uint32_t num_nodes = 0;
  std::uint32_t slots = 0;
  std::vector<std::uint8_t> nonce;  // the sender's; empty: it has no job key
  std::vector<std::uint8_t> ucx_address;
  std::uint64_t epoch = 0;
  std::uint64_t ring_chunk_bytes = 0;  // must match on every node
  std::uint32_t response_cache = 0;    // capacity; must match on every node
  std::uint64_t inline_bytes = 0;      // --inline-bytes; must match on every node
  std::uint64_t halving_doubling_bytes = 0;  // --algorithm, --rhd-max-bytes; must match on every node
  std::uint8_t verify_results = 0;  // --verify-results (0 off, 1 sample, 2 all); must match on every node
  std::uint64_t direct_bytes = 0;   // --algorithm, --direct-max-bytes; must match on every node
  bool halving_doubling_folds = true;  // --algorithm; must match on every node (service/route/route.h)
};

struct PeerHelloReply {
  bool accepted = false;
  std::string message;
  std::uint32_t node_rank = 0;
  std::vector<std::uint8_t> ucx_address;
  std::uint64_t epoch = 0;
};

// Node 0 proves it holds the job's key, and challenges the worker (peer_auth.h).
struct AuthChallenge {
  std::vector<std::uint8_t> nonce;
  std::vector<std::uint8_t> proof;
};

// The worker's answer to an AuthChallenge.
struct AuthProof {
  std::vector<std::uint8_t> proof;
};

struct Heartbeat {
  std::uint64_t epoch = 0;
  std::uint64_t sequence = 0;
};

struct ReadyTensor {
  std::string name;
  wire::CollectiveKind kind = wire::CollectiveKind::kAllreduce;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  std::uint64_t count = 0;
  std::uint32_t root = 0;
  bool operator==(const ReadyTensor&) const = default;
};

// A node's local reduction of one small ready allreduce (schemas/peer.fbs).
struct InlineData {
  std::string name;
  std::vector<std::uint8_t> data;
};

struct ReadyList {
  std::uint64_t epoch = 0;
  std::uint32_t node_rank = 0;
  std::vector<ReadyTensor> tensors;
  std::vector<std::uint64_t> cached;  // response-cache bit vector
  std::uint64_t plans_seen = 0;       // cycle of the last plan applied
  std::vector<InlineData> data;       // small allreduces, by name
};

// One node's local reduction of a small allreduce, for every node (schemas/peer.fbs).
struct DirectTensor {
  ReadyTensor tensor;
  std::vector<std::uint8_t> data;  // empty: the node cannot give one (GPU buffers)
};

struct Contributions {
  std::uint64_t epoch = 0;
  std::uint32_t origin = 0;  // whose local reductions
  std::vector<DirectTensor> tensors;
};

struct Operation {
  std::uint32_t sequence = 0;
  wire::CollectiveKind kind = wire::CollectiveKind::kAllreduce;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  std::uint32_t root = 0;
  std::vector<std::string> names;     // fused tensors, in buffer order
  std::vector<std::uint64_t> counts;  // elements of each
  // Small allreduces: the finished result (all tensors back to back), reduced
  // by node 0 from every node's InlineData. Empty: run the ring.
  std::vector<std::uint8_t> result;
};

struct TensorError {
  std::string name;
  std::string message;
};

struct Plan {
  std::uint64_t epoch = 0;
  std::uint64_t cycle = 0;
  std::vector<Operation> operations;
  std::vector<TensorError> errors;
};

struct RosterEntry {
  std::uint32_t node_rank = 0;
  std::vector<std::uint8_t> ucx_address;
};

struct Roster {
  std::uint64_t epoch = 0;
  std::vector<RosterEntry> entries;  // by node rank
};

struct Goodbye {
  std::uint64_t epoch = 0;
  std::string reason;
  bool finished = false;  // the job's run ended everywhere: close quietly
  std::int32_t lost_node = -1;  // whom the reason is about; -1: nobody in particular
  bool timed_out = false;       // a deadline ran out: no node is lost (schemas/peer.fbs)
};
// Goodbye::lost_node of a link's own watchdog: the receiver itself went silent.
inline constexpr std::int32_t kLostNodeYou = -2;

// A rank of the job left; relayed by node 0 (schemas/peer.fbs).
struct RankLeft {
  std::uint64_t epoch = 0;
  std::uint32_t origin = 0;  // the rank's node
  std::uint32_t global_rank = 0;
  std::string reason;
  bool clean = false;  // left on purpose, nothing unfinished
};

struct NodeDrained {
  std::uint64_t epoch = 0;
  std::uint32_t node_rank = 0;
};

using Message = std::variant<PeerHello, PeerHelloReply, Heartbeat, ReadyList, Plan, Goodbye, Roster, Contributions,
                             RankLeft, NodeDrained, AuthChallenge, AuthProof>;

// Length-prefixed frame, as wire::encode.
std::vector<std::uint8_t> encode(const Message& message);

// Verifies the body, then checks enums, required names, and that each
// operation has one count per name.
Result<Message> decode(std::span<const std::uint8_t> body);

}  // namespace ringsync::peer_wire
