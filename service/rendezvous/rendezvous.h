// How the daemons of one job learn who is in it (Gloo keeps rendezvous apart
// from the algorithms the same way): this node's rank, every node's control
// address before each formation, and the epoch node 0 gives each ring.
// Implementations: the node list the trainers gave (StaticRendezvous) and a
// store such as etcd (StoreRendezvous).
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "common/hostfile.h"
#include "common/status.h"

namespace ringsync::service::rendezvous {

struct Members {
  std::vector<HostEntry> nodes;  // by node rank
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;
  // Registers this node; its node rank (`wanted` when the trainers stated one).
  virtual boost::asio::awaitable<Result<std::uint32_t>> join(std::optional<std::uint32_t> wanted) = 0;
  // Every node of the job, once all are there, or an error at `deadline`.
  virtual boost::asio::awaitable<Result<Members>> members(std::chrono::steady_clock::time_point deadline) = 0;
  // Node 0, before each roster: the epoch of the next ring.
  virtual boost::asio::awaitable<Result<std::uint64_t>> next_epoch() = 0;
  // The job is over on this node.
  virtual void leave() = 0;
  // The job's node count as the rendezvous decided it for this run, after
  // join() (elastic jobs); nullopt: the job's own.
  virtual std::optional<std::uint32_t> num_nodes() const { return std::nullopt; }
  // The formed ring lost `node` (its verdict named it): an elastic job's next
  // roster counts it gone at once instead of waiting for its lease.
  virtual void report_lost(std::uint32_t /*node*/) {}
  // Nodes registered for the job that its current run has no place for yet,
  // up to the room it has (elastic jobs; 0 otherwise): they join at the next
  // run, which the trainers may start at a step boundary.
  virtual std::uint32_t nodes_waiting() const { return 0; }
};

// The node list the trainers gave (RINGSYNC_NODES) or the daemon's flags:
// everyone is known from the start; node 0 counts its own formations.
class StaticRendezvous final : public Rendezvous {
 public:
  StaticRendezvous(std::vector<HostEntry> nodes, std::uint32_t node_rank)
      : nodes_(std::move(nodes)), node_rank_(node_rank) {}
  boost::asio::awaitable<Result<std::uint32_t>> join(std::optional<std::uint32_t>) override { co_return node_rank_; }
  boost::asio::awaitable<Result<Members>> members(std::chrono::steady_clock::time_point) override {
    co_return Members{nodes_};
  }
  boost::asio::awaitable<Result<std::uint64_t>> next_epoch() override { co_return ++epoch_; }
  void leave() override {}

 private:
  std::vector<HostEntry> nodes_;
  std::uint32_t node_rank_;
  std::uint64_t epoch_ = 0;
};

}  // namespace ringsync::service::rendezvous
