// What a multi-node job is, as far as one daemon's part in it goes: its id
// and shared token, its shape (nodes x slots), this node's place, and how the
// nodes find each other (a node list, or a rendezvous store that assigns the
// places). Given by the trainers' hellos, or by the daemon's own flags for a
// pre-configured job (--hostfile / --hosts, --node-rank, --job-id).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/hostfile.h"

namespace ringsync::service::cluster {

inline constexpr std::uint16_t kDefaultControlPort = 29517;

struct JobSpec {
  std::string id;
  std::string token;            // shared secret of the job; "" for none
  std::uint32_t slots = 1;      // local ranks per node
  std::uint32_t num_nodes = 1;
  std::uint32_t node_rank = 0;  // this node's place; with a rendezvous, once assigned
  // Control endpoint of every node, by node rank. With a rendezvous store it is
  // filled in from the store when every node has registered.
  std::vector<HostEntry> nodes;
  std::string rendezvous;       // "" (the node list) or etcd://HOST:PORT[,HOST:PORT]
  // An elastic job (max_nodes > 0): the rendezvous places min_nodes..max_nodes
  // nodes for every run, num_nodes (then the first run's size) included.
  std::uint32_t min_nodes = 0;
  std::uint32_t max_nodes = 0;
  bool node_rank_known = true;  // false: the rendezvous assigns node_rank
  std::string self_address;     // with a rendezvous: this daemon's control address for the others
  // Started with the daemon and kept for its lifetime (the ring forms before
  // any trainer connects, and again after every loss); otherwise the job
  // exists while some of its ranks are connected here.
  bool preconfigured = false;

  std::uint64_t ranks() const { return std::uint64_t{num_nodes} * slots; }
};

// "host:port" of a node's control endpoint (the default port when unset).
std::string control_address(const HostEntry& node);

// "node 2 (10.0.0.13:29517)", or "node 2" while its address is unknown: how
// messages name a node of the job.
std::string node_name(const JobSpec& job, std::uint32_t node);
// "node 2 at 10.0.0.13:29517" (or "node 2"), for a name inside parentheses.
std::string node_at(const JobSpec& job, std::uint32_t node);

}  // namespace ringsync::service::cluster
