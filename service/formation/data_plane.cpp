#include "service/formation/data_plane.h"

#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "service/threads/thread_cpus.h"
#include "service/transport/ucx_transport.h"

namespace ringsync::service::formation {

namespace {

std::vector<std::byte> as_bytes(const std::vector<std::uint8_t>& v) {
  std::vector<std::byte> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size());
  return out;
}

std::vector<std::uint8_t> as_uint8(const std::vector<std::byte>& v) {
  std::vector<std::uint8_t> out(v.size());
  if (!v.empty()) std::memcpy(out.data(), v.data(), v.size());
  return out;
}

}  // namespace

UcxDataPlane::UcxDataPlane(transport::UcxOptions options, std::vector<int> cpus,
                           std::optional<transport::Locality> where)
    : options_(std::move(options)), cpus_(std::move(cpus)), where_(std::move(where)) {}

std::unique_ptr<UcxDataPlane> UcxDataPlane::for_daemon(const cluster::ClusterConfig& settings) {
  transport::UcxOptions options;
  options.transports = settings.ucx_transports;
  options.net_devices = settings.ucx_net_devices;
  options.tcp_segment_bytes = transport::tcp_segment_for(settings.ring.chunk_bytes);
  return std::make_unique<UcxDataPlane>(std::move(options), settings.thread_cpus);
}

Result<std::vector<std::uint8_t>> UcxDataPlane::open() {
  context_.reset();
  network_context_.reset();
  choices_.clear();
  // What UCX will be told: the daemon's setting, else UCX's own environment.
  const char* env_tls = std::getenv("UCX_TLS");
  const std::string transports = !options_.transports.empty() ? options_.transports : env_tls ? env_tls : "";
  transport::UcxOffer offer;
  offer.where = where_ ? *where_ : transport::Locality::here();
  offer.offers_shared_memory = transport::may_use_shared_memory(transports);
  threads::ThreadCpusScope spread(cpus_);  // UCX's own threads
  auto ucx = transport::UcxContext::create(options_);
  if (!ucx.ok()) return Status::Internal("cannot start UCX: " + ucx.status().message());
  context_ = std::move(ucx).value();
  offer.worker = as_uint8(context_->address());
  if (offer.offers_shared_memory) {
    if (std::string network = transport::without_shared_memory(transports); !network.empty()) {
      transport::UcxOptions options = options_;
      options.transports = network;
      auto second = transport::UcxContext::create(options);
      if (!second.ok())
        return Status::Internal("cannot start UCX without shared memory (UCX_TLS=" + network +
                                "): " + second.status().message());
      network_context_ = std::move(second).value();
      offer.network_worker = as_uint8(network_context_->address());
    }
  }
  return offer.encode();
}

Result<std::unique_ptr<transport::Transport>> UcxDataPlane::connect(
    int rank, const std::vector<std::vector<std::uint8_t>>& addresses, std::uint64_t tag_key) {
  if (!context_) return Status::Internal("the UCX endpoint was not opened");
  if (rank < 0 || static_cast<std::size_t>(rank) >= addresses.size())
    return Status::InvalidArgument("node rank " + std::to_string(rank) + " is outside a roster of " +
                                   std::to_string(addresses.size()) + " nodes");
  std::vector<transport::UcxOffer> offers;
  std::vector<std::string> names;
  for (std::size_t r = 0; r < addresses.size(); ++r) {
    auto offer = transport::UcxOffer::decode(addresses[r]);
    if (!offer.ok())
      return Status::ProtocolError("node " + std::to_string(r) + ": " + offer.status().message());
    offers.push_back(std::move(offer).value());
    names.push_back("node " + std::to_string(r));
  }
  auto choices = transport::choose_workers(offers, names);
  if (!choices.ok()) return choices.status();
  choices_ = std::move(choices).value();
  rank_ = rank;
  // Every node connects to the worker its peer chose, from the one it chose.
  std::vector<std::vector<std::byte>> peers(addresses.size());
  for (std::size_t r = 0; r < addresses.size(); ++r)
    peers[r] = as_bytes(choices_[r].network_only ? offers[r].network_worker : offers[r].worker);
  std::unique_ptr<transport::UcxContext> mine;
  if (choices_[rank].network_only) {
    mine = std::move(network_context_);
    RS_LOG(info, "ucx") << "this node uses no shared memory: " << choices_[rank].why;
  } else {
    mine = std::move(context_);
  }
  context_.reset();
  network_context_.reset();
  auto created = transport::UcxTransport::create(std::move(mine), rank, std::move(peers), tag_key);
  if (!created.ok()) return created.status();
  return std::unique_ptr<transport::Transport>(std::move(created).value());
}

std::string UcxDataPlane::link_note(int peer) const {
  if (peer < 0 || static_cast<std::size_t>(peer) >= choices_.size() || static_cast<std::size_t>(rank_) >= choices_.size())
    return {};
  const auto& chosen = choices_[rank_].network_only ? choices_[rank_] : choices_[peer];
  return chosen.network_only ? "no shared memory: " + chosen.why : "";
}

}  // namespace ringsync::service::formation
