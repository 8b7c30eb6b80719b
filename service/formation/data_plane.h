// How a forming ring gets its data plane: a fresh endpoint whose address goes
// into the roster, then, once every node's address is known, the Transport of
// the ring. UCX between daemons; the tests plug an in-process fabric in here
// to run the whole job ring without UCX.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "service/cluster/cluster_config.h"
#include "service/transport/transport.h"
#include "service/transport/ucx_context.h"
#include "service/transport/ucx_offer.h"

namespace ringsync::service::formation {

class DataPlane {
 public:
  virtual ~DataPlane() = default;
  // A new endpoint for the next ring; its address, to send to the other nodes.
  virtual Result<std::vector<std::uint8_t>> open() = 0;
  // The ring's transport, node `rank` of addresses.size(), from the endpoint
  // open() made and every node's address (by node rank). tag_key: what a
  // keyed job's transport mixes into its message tags so that only the
  // ring's nodes match them (data_plane_tag_key, peer_auth.h); 0: none.
  virtual Result<std::unique_ptr<transport::Transport>> connect(
      int rank, const std::vector<std::vector<std::uint8_t>>& addresses, std::uint64_t tag_key) = 0;
  // After connect(): why the link to `peer` avoids transports it could
  // otherwise use ("" when nothing was avoided), for the log and
  // ringsync_peer_transports_info.
  virtual std::string link_note(int /*peer*/) const { return {}; }
};

// UCX: a UcxContext (context and worker) per ring, then a UcxTransport. Where
// the transports include shared memory, open() makes a second worker without
// it, and connect() picks each node's worker from every node's locality
// (transport/ucx_offer.h): shared memory only between daemons that share the
// namespaces it needs.
class UcxDataPlane final : public DataPlane {
 public:
  // cpus: where UCX's own threads run (service/threads/thread_cpus.h); empty: anywhere.
  // where: what this node tells the others of where it runs (default: this
  // process's Locality::here(); a test gives its own).
  UcxDataPlane(transport::UcxOptions options, std::vector<int> cpus,
               std::optional<transport::Locality> where = std::nullopt);
  // A daemon's: the settings' transports and devices, UCX's threads on
  // settings.thread_cpus, and tcp segments that carry a ring chunk in two
  // fragments. Every collective cuts its messages into chunks of
  // --ring-chunk-bytes (ring/chunk_pipeline.h), except where a piece would need
  // more than 65536 chunks (a chunk is then larger; it only costs more fragments).
  static std::unique_ptr<UcxDataPlane> for_daemon(const cluster::ClusterConfig& settings);
  const transport::UcxOptions& options() const { return options_; }
  Result<std::vector<std::uint8_t>> open() override;
  Result<std::unique_ptr<transport::Transport>> connect(
      int rank, const std::vector<std::vector<std::uint8_t>>& addresses, std::uint64_t tag_key) override;
  std::string link_note(int peer) const override;

 private:
  transport::UcxOptions options_;
  std::vector<int> cpus_;
  std::optional<transport::Locality> where_;
  std::unique_ptr<transport::UcxContext> context_;
  std::unique_ptr<transport::UcxContext> network_context_;  // without shared memory, when context_ has it
  // The last connect()'s choices, by node rank, and this node's rank.
  std::vector<transport::WorkerChoice> choices_;
  int rank_ = 0;
};

}  // namespace ringsync::service::formation
