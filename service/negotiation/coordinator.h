// Negotiation on the coordinator (node 0): which tensors are ready on every
// node, whether the nodes agree on them, and in which order and fusion groups
// every node runs them (Horovod's controller). Pure bookkeeping: the control
// plane feeds it ReadyLists and sends out the Plans it makes.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/peer_wire.h"

namespace ringsync::service::negotiation {

using Clock = std::chrono::steady_clock;

// Small allreduces answered from the plan (docs/cluster.md, "Small
// allreduces"): when every node sent its local reduction of a tensor with its
// ready list, node 0 reduces them and the plan carries the result; no ring runs.
struct InlineOptions {
  std::uint64_t max_bytes = 0;  // --inline-bytes: largest inline operation at 2 nodes (route.h); 0: never
  std::uint64_t ranks = 1;      // every rank of the job: avg divides by this
};

class Coordinator {
 public:
  // fusion_threshold_bytes: ready allreduces of one dtype and op are packed into
  // one operation up to this many bytes (0 disables fusion).
  Coordinator(std::uint32_t num_nodes, std::uint64_t fusion_threshold_bytes, InlineOptions inline_options = {});

  // Records that `node` has these tensors ready (all its local ranks submitted).
  // A node reporting a name twice before it ran is an error for that tensor.
  // data[i], when given and not empty, is the node's local reduction of
  // tensors[i] (an allreduce of at most InlineOptions::max_bytes).
  void add_ready(std::uint32_t node, const std::vector<peer_wire::ReadyTensor>& tensors,
                 Clock::time_point now, std::vector<std::vector<std::uint8_t>> data = {});

  // Takes every tensor ready on all nodes, in the order the coordinator first
  // heard of them: the ones the nodes agree on become operations (fused where
  // possible), the others errors naming the field and the nodes.
  // At most about `max_bytes` of names and messages go into one plan (a peer
  // frame is bounded); what does not fit stays ready for the next call.
  peer_wire::Plan plan(std::uint64_t epoch, std::uint64_t cycle, std::size_t max_bytes = kMaxPlanBytes);

  static constexpr std::size_t kMaxPlanBytes = 256 * 1024;
  // Whether tensors ready everywhere are waiting for plan().
  bool has_ready() const { return !ready_.empty(); }

  struct Stall {
    std::string name;
    std::vector<std::uint32_t> ready_nodes;
    std::vector<std::uint32_t> missing_nodes;
    Clock::duration waited{};
  };
  // Tensors some nodes reported and others not, for at least `age`.
  std::vector<Stall> stalled(Clock::time_point now, Clock::duration age) const;

  std::size_t pending() const { return table_.size(); }
  // The nodes that reported `name` and wait for the others (none: not pending).
  std::vector<std::uint32_t> waiting_nodes(const std::string& name) const;

 private:
  struct Entry {
    std::uint64_t arrival = 0;  // order of first report
    Clock::time_point first_seen;
    std::vector<std::optional<peer_wire::ReadyTensor>> by_node;
    std::size_t reported = 0;
    std::string duplicate;  // a node reported it twice: the message
    std::vector<std::vector<std::uint8_t>> data;  // by node: local reductions, when sent
  };

  // Whether every node sent e's data, each of the tensor's size.
  bool inline_ready(const Entry& e) const;
  // Appends the reduction of every node's data of e (finished: avg divided).
  void append_result(const Entry& e, peer_wire::Operation& op) const;

  std::uint32_t num_nodes_;
  std::uint64_t fusion_threshold_;
  InlineOptions inline_;
  std::uint64_t inline_limit_;  // route::inline_limit(inline_.max_bytes, num_nodes_)
  std::uint64_t next_arrival_ = 0;
  std::uint32_t next_sequence_ = 1;
  std::map<std::string, Entry> table_;
  // (arrival, name) of entries every node reported: plan() walks only these,
  // not the tensors still waiting for a slow node.
  std::set<std::pair<std::uint64_t, std::string>> ready_;
};

// "tensor 'w': nodes disagree on count: node 0 says 10, nodes 1,2 say 12", or
// "" when every node's report matches.
std::string disagreement(const std::string& name,
                         const std::vector<std::optional<peer_wire::ReadyTensor>>& by_node);

}  // namespace ringsync::service::negotiation
