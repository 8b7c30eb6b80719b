// What a daemon offers the other nodes of a forming ring for its data plane
// (the bytes of its roster entry): where it runs (locality.h) and one or two
// UCX worker addresses — the worker with the configured transports, and, when
// those include shared memory, a second one without it. Once every node's
// offer is known, each node's worker is chosen the same way on every node
// (choose_workers), so each connects to the worker its peer progresses:
// a node that shares the kernel with another node but not the namespaces
// shared memory needs (two simulated hosts, two pods) uses its network-only
// worker, and every link to it is a network link.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "service/transport/locality.h"

namespace ringsync::service::transport {

struct UcxOffer {
  Locality where;
  std::vector<std::uint8_t> worker;          // the configured transports'
  std::vector<std::uint8_t> network_worker;  // without shared memory; empty when there is no such worker
  // The configured transports include shared memory (so a node may need
  // network_worker; empty network_worker then means none is left: "sm,self").
  bool offers_shared_memory = false;

  std::vector<std::uint8_t> encode() const;
  static Result<UcxOffer> decode(std::span<const std::uint8_t> bytes);
};

// One node's worker, as every node decides it.
struct WorkerChoice {
  bool network_only = false;
  // Why it is network-only ("" otherwise), naming the node and what they do
  // not share: "node 1 (hostname b) runs on the same kernel as node 0 but
  // does not share its network namespace, which UCX's shared memory needs".
  std::string why;
};

// The worker of each node (by node rank). Fails naming the pair when a node
// must not use shared memory but its configured transports have nothing else.
// names[k] names node k in messages ("node 1 (10.0.0.2:29517)").
Result<std::vector<WorkerChoice>> choose_workers(const std::vector<UcxOffer>& offers,
                                                 const std::vector<std::string>& names);

}  // namespace ringsync::service::transport
