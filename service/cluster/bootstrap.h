// Forming a ring: every node says hello to the coordinator (node 0) over TCP,
// which checks that all agree on the job (protocol version, job id, node count,
// slots, shared token), then tells everyone the roster — the UCX worker
// address of every node. Bounded by a join timeout: a node that never comes is
// a clear error naming it, never a hang.
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/hostfile.h"
#include "common/status.h"
#include "service/cluster/peer_link.h"

namespace ringsync::service::cluster {

inline constexpr std::uint16_t kDefaultControlPort = 29517;

struct BootstrapConfig {
  std::string job_id;
  std::string token;  // shared secret; "" when none
  std::uint32_t node_rank = 0;
  std::uint32_t slots = 1;
  std::vector<HostEntry> nodes;  // control endpoint of every node, by node rank
  std::vector<std::uint8_t> ucx_address;
  std::chrono::nanoseconds join_timeout = std::chrono::seconds(60);
  // Data-plane settings that must be equal on every node.
  std::uint64_t ring_chunk_bytes = 0;
  std::uint32_t response_cache = 0;
  std::uint64_t inline_bytes = 0;
};

struct Membership {
  std::uint64_t epoch = 1;
  std::vector<std::vector<std::uint8_t>> ucx_addresses;  // by node rank
  std::shared_ptr<PeerLink> coordinator;                 // on workers: the link to node 0
  std::vector<std::shared_ptr<PeerLink>> workers;        // on node 0: by node rank (0 empty)
};

// The coordinator passes the acceptor of its control port (already listening);
// workers pass nullptr and connect to nodes[0], retrying while it starts.
boost::asio::awaitable<Result<Membership>> bootstrap(const BootstrapConfig& config,
                                                     boost::asio::ip::tcp::acceptor* acceptor);

// Why the coordinator refuses this hello (protocol version, job, shape, token,
// node rank out of range), or "" when it belongs to the job.
std::string hello_refusal(const BootstrapConfig& config, const peer_wire::PeerHello& hello);

// "host:port" of a node's control endpoint (the default port when unset).
std::string control_address(const HostEntry& node);

}  // namespace ringsync::service::cluster
