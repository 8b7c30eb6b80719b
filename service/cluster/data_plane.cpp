#include "service/cluster/data_plane.h"

#include <cstring>

#include "service/threads/thread_cpus.h"
#include "service/transport/ucx_transport.h"

namespace ringsync::service::cluster {

UcxDataPlane::UcxDataPlane(transport::UcxOptions options, std::vector<int> cpus)
    : options_(std::move(options)), cpus_(std::move(cpus)) {}

std::unique_ptr<UcxDataPlane> UcxDataPlane::for_daemon(const ClusterConfig& settings) {
  transport::UcxOptions options;
  options.transports = settings.ucx_transports;
  options.net_devices = settings.ucx_net_devices;
  options.tcp_segment_bytes = transport::tcp_segment_for(settings.ring_chunk_bytes);
  return std::make_unique<UcxDataPlane>(std::move(options), settings.thread_cpus);
}

Result<std::vector<std::uint8_t>> UcxDataPlane::open() {
  context_.reset();
  auto ucx = [&] {
    threads::ThreadCpusScope spread(cpus_);  // UCX's own threads
    return transport::UcxContext::create(options_);
  }();
  if (!ucx.ok()) return Status::Internal("cannot start UCX: " + ucx.status().message());
  context_ = std::move(ucx).value();
  const auto& address = context_->address();
  std::vector<std::uint8_t> bytes(address.size());
  std::memcpy(bytes.data(), address.data(), address.size());
  return bytes;
}

Result<std::unique_ptr<transport::Transport>> UcxDataPlane::connect(
    int rank, const std::vector<std::vector<std::uint8_t>>& addresses, std::uint64_t tag_key) {
  if (!context_) return Status::Internal("the UCX endpoint was not opened");
  std::vector<std::vector<std::byte>> peers(addresses.size());
  for (std::size_t r = 0; r < addresses.size(); ++r) {
    peers[r].resize(addresses[r].size());
    std::memcpy(peers[r].data(), addresses[r].data(), addresses[r].size());
  }
  auto created = transport::UcxTransport::create(std::move(context_), rank, std::move(peers), tag_key);
  if (!created.ok()) return created.status();
  return std::unique_ptr<transport::Transport>(std::move(created).value());
}

}  // namespace ringsync::service::cluster
