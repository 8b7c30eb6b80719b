// Small allreduces exchanged among the nodes instead of negotiated
// (docs/cluster.md, "Small allreduces"): every node sends its local reduction
// of such a tensor to every other node, and each node, once it holds all N
// contributions, reduces them itself. No round trip to node 0 and no plan:
// the latency is one message between nodes.
//
// Which tensors go this way is decided from the tensor's description alone
// (route.h: an allreduce of at most route::direct_limit() bytes), so every node
// decides the same for the same tensor. Rounds pair up by order: a node's k-th contribution of
// a name meets every other node's k-th (links keep order, and a node sends the
// next one of a name only after the previous round finished). Pure
// bookkeeping: the control plane feeds it contributions and acts on the rounds.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/peer_wire.h"
#include "service/negotiation/coordinator.h"

namespace ringsync::service::negotiation {

class DirectExchange {
 public:
  // ranks: every rank of the job (avg divides by it).
  DirectExchange(std::uint32_t num_nodes, std::uint64_t ranks);

  // Every node's contribution to one round of a tensor arrived.
  struct Round {
    enum class Outcome {
      kResult,     // `result` is the finished allreduce
      kNegotiate,  // a node gave no data (GPU buffers) or data of another size:
                   // every node negotiates the tensor with node 0 instead
      kMismatch,   // the nodes disagree on the tensor: `error` says how
    };
    std::string name;
    Outcome outcome = Outcome::kResult;
    peer_wire::ReadyTensor tensor;  // as node 0 described it
    std::vector<std::uint8_t> result;
    std::string error;
  };

  // Node `origin`'s next contribution to a tensor (origin < num_nodes). When
  // it is the last of its round, returns the round and forgets it.
  std::optional<Round> add(std::uint32_t origin, peer_wire::DirectTensor contribution, Clock::time_point now);

  // Tensors some nodes contributed to and others not, for at least `age`.
  std::vector<Coordinator::Stall> stalled(Clock::time_point now, Clock::duration age) const;
  // Names with contributions waiting for other nodes.
  std::size_t pending() const { return table_.size(); }
  // The nodes whose contribution to `name` waits for the others' (none: not pending).
  std::vector<std::uint32_t> waiting_nodes(const std::string& name) const;

 private:
  struct Arrived {
    peer_wire::DirectTensor contribution;
    Clock::time_point at;
  };
  // By node: contributions not yet in a finished round, oldest first.
  using Queues = std::vector<std::deque<Arrived>>;

  Round finish(const std::string& name, Queues& queues) const;

  std::uint32_t num_nodes_;
  std::uint64_t ranks_;
  std::map<std::string, Queues> table_;
};

}  // namespace ringsync::service::negotiation
