// How a forming ring gets its data plane: a fresh endpoint whose address goes
// into the roster, then, once every node's address is known, the Transport of
// the ring. UCX between daemons; the tests plug an in-process fabric in here
// to run the whole job ring without UCX.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "service/daemon_config.h"
#include "service/transport/transport.h"
#include "service/transport/ucx_context.h"

namespace ringsync::service::cluster {

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
};

// UCX: a UcxContext (context and worker) per ring, then a UcxTransport.
class UcxDataPlane final : public DataPlane {
 public:
  // cpus: where UCX's own threads run (service/threads/thread_cpus.h); empty: anywhere.
  UcxDataPlane(transport::UcxOptions options, std::vector<int> cpus);
  // A daemon's: the settings' transports and devices, UCX's threads on
  // settings.thread_cpus, and tcp segments that carry a ring chunk in two
  // fragments. Every collective cuts its messages into chunks of
  // --ring-chunk-bytes (ring/chunk_pipeline.h), except where a piece would need
  // more than 65536 chunks (a chunk is then larger; it only costs more fragments).
  static std::unique_ptr<UcxDataPlane> for_daemon(const ClusterConfig& settings);
  const transport::UcxOptions& options() const { return options_; }
  Result<std::vector<std::uint8_t>> open() override;
  Result<std::unique_ptr<transport::Transport>> connect(
      int rank, const std::vector<std::vector<std::uint8_t>>& addresses, std::uint64_t tag_key) override;

 private:
  transport::UcxOptions options_;
  std::vector<int> cpus_;
  std::unique_ptr<transport::UcxContext> context_;
};

}  // namespace ringsync::service::cluster
