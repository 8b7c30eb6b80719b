// Forming the ring, and tearing it down when a node is lost.
#include "service/cluster/cluster_node.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstring>

#include "common/log.h"
#include "common/units.h"
#include "service/cluster/node_operation.h"
#include "service/thread_cpus.h"
#include "service/transport/ucx_transport.h"

namespace ringsync::service::cluster {

namespace asio = boost::asio;
using asio::ip::tcp;

namespace {
// Pause between a failed or lost ring and the next attempt, so that a node
// that keeps failing does not spin, and the others notice the loss first.
constexpr auto kReformPause = std::chrono::milliseconds(200);
constexpr auto kMaxReformPause = std::chrono::milliseconds(5000);
}  // namespace

ClusterNode::ClusterNode(asio::io_context& io, const ClusterConfig& config, WorkPool& pool,
                         DaemonMetrics& metrics, Timeline* timeline, Hooks hooks)
    : io_(io),
      config_(config),
      pool_(pool),
      metrics_(metrics),
      timeline_(timeline),
      hooks_(std::move(hooks)),
      staging_(StagingBuffers::create(config.fusion_threshold_bytes)),
      wake_formation_(io),
      report_timer_(io),
      direct_limit_(negotiation::direct_limit(config.inline_bytes, static_cast<std::uint32_t>(config.nodes.size()))) {}

ClusterNode::~ClusterNode() = default;

std::string ClusterNode::node_name(std::uint32_t node) const {
  if (node >= config_.nodes.size()) return "node " + std::to_string(node);
  return "node " + std::to_string(node) + " (" + control_address(config_.nodes[node]) + ")";
}

Status ClusterNode::start() {
  if (config_.node_rank == 0 && config_.nodes.size() > 1) {
    std::string where = config_.control_address;
    if (where.empty()) where = control_address(config_.nodes[0]);
    auto address = units::parse_address(where);
    if (!address.ok() || !*address)
      return Status::InvalidArgument("control address '" + where + "': " +
                                     (address.ok() ? std::string("not an address") : address.status().message()));
    boost::system::error_code ec;
    tcp::resolver resolver(io_);
    auto endpoints = resolver.resolve((*address)->host, std::to_string((*address)->port), ec);
    if (ec || endpoints.empty())
      return Status::InvalidArgument("cannot resolve the control address " + where + ": " + ec.message());
    acceptor_ = std::make_unique<tcp::acceptor>(io_);
    const tcp::endpoint endpoint = endpoints.begin()->endpoint();
    acceptor_->open(endpoint.protocol(), ec);
    if (!ec) acceptor_->set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor_->bind(endpoint, ec);
    if (!ec) acceptor_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec)
      return Status::InvalidArgument("cannot listen for the other nodes on " + where + ": " + ec.message() +
                                     " (--control-address)");
  }
  if (config_.node_rank != 0 && !config_.thread_cpus.empty()) {
    // Asio looks names up on a helper thread it starts at the first lookup,
    // which joining node 0 makes. A numeric lookup now (no network, no
    // wait) starts it before the daemon keeps this thread on
    // --control-cpus, so it runs on every CPU of the daemon like the other
    // helpers (service/thread_cpus.h).
    auto resolver = std::make_shared<tcp::resolver>(io_);
    resolver->async_resolve("127.0.0.1", "0", tcp::resolver::numeric_host | tcp::resolver::numeric_service,
                            [resolver](const boost::system::error_code&, const tcp::resolver::results_type&) {});
  }
  metrics_.ring_nodes.with().set(0);  // until the ring forms
  asio::co_spawn(io_, formation_loop(), asio::detached);
  RS_LOG(info, "ring") << "node " << config_.node_rank << " of " << num_nodes() << " in job '"
                       << config_.job_id << "'; " << (config_.node_rank == 0 ? "coordinating at " : "joining ")
                       << node_name(0);
  return Status::Ok();
}

void ClusterNode::stop(const Status& why) {
  if (stopping_) return;
  stopping_ = true;
  // The other nodes learn which node went away.
  if (formed_) lose(Status::Closed(node_name(config_.node_rank) + " of job '" + config_.job_id + "' shut down"));
  fail_waiting(why, "shutdown");
  boost::system::error_code ec;
  if (acceptor_) acceptor_->close(ec);
  wake_formation_.cancel();
  report_timer_.cancel();
}

void ClusterNode::abandon_job(const Status& why) {
  if (formed_) {
    lose(why);
  } else {
    fail_waiting(why, "client_lost");  // never reported: nobody else holds them
  }
}

asio::awaitable<void> ClusterNode::formation_loop() {
  // Attempts that fail (a node refuses this one, or never comes) back off, so
  // a misconfigured node does not flood the logs of both.
  auto pause = kReformPause;
  while (!stopping_) {
    transport::UcxOptions options;
    options.transports = config_.ucx_transports;
    options.net_devices = config_.ucx_net_devices;
    auto ucx = [&] {
      ThreadCpusScope spread(config_.thread_cpus);  // UCX's own threads
      return transport::UcxContext::create(options);
    }();
    Status failed = Status::Ok();
    if (!ucx.ok()) {
      failed = Status::Internal("cannot start UCX: " + ucx.status().message());
    } else {
      BootstrapConfig bc = bootstrap_config();
      const auto& address = (*ucx)->address();
      bc.ucx_address.resize(address.size());
      std::memcpy(bc.ucx_address.data(), address.data(), address.size());
      auto membership = co_await bootstrap(bc, acceptor_.get());
      if (stopping_) break;
      if (!membership.ok()) {
        failed = membership.status();
      } else {
        failed = form(std::move(membership).value(), std::move(ucx).value());
      }
    }
    if (stopping_) break;
    boost::system::error_code ec;
    if (!failed.ok()) {
      pause = std::min<std::chrono::milliseconds>(pause * 2, kMaxReformPause);
      RS_LOG(warn, "ring") << "forming the ring of job '" << config_.job_id << "' failed: "
                           << failed.message() << "; trying again";
      metrics_.error("ring_formation");
      // What waited for this ring waits no longer: it gets the reason.
      fail_waiting(Status::PeerLost("the ring of job '" + config_.job_id + "' is not formed: " +
                                    failed.message()),
                   "peer_lost");
    } else {
      pause = kReformPause;
      // Formed: sleep until lose() wakes us.
      wake_formation_.expires_at(asio::steady_timer::time_point::max());
      co_await wake_formation_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      if (stopping_) break;
    }
    wake_formation_.expires_after(pause);
    co_await wake_formation_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
}

BootstrapConfig ClusterNode::bootstrap_config() const {
  BootstrapConfig bc;
  bc.job_id = config_.job_id;
  bc.token = config_.token;
  bc.node_rank = config_.node_rank;
  bc.slots = config_.slots();
  bc.nodes = config_.nodes;
  bc.join_timeout = config_.join_timeout;
  bc.ring_chunk_bytes = config_.ring_chunk_bytes;
  bc.response_cache = static_cast<std::uint32_t>(config_.response_cache_capacity);
  bc.inline_bytes = config_.inline_bytes;
  return bc;
}

Status ClusterNode::form(Membership membership, std::unique_ptr<transport::UcxContext> ucx) {
  const int n = static_cast<int>(num_nodes());
  std::vector<std::vector<std::byte>> addresses(n);
  for (int r = 0; r < n && r < static_cast<int>(membership.ucx_addresses.size()); ++r) {
    const auto& a = membership.ucx_addresses[r];
    addresses[r].resize(a.size());
    std::memcpy(addresses[r].data(), a.data(), a.size());
  }
  auto ucx_transport = transport::UcxTransport::create(std::move(ucx), static_cast<int>(config_.node_rank),
                                                       std::move(addresses));
  if (!ucx_transport.ok()) {
    for (auto& link : membership.workers)
      if (link) link->close(ucx_transport.status());
    if (membership.coordinator) membership.coordinator->close(ucx_transport.status());
    return ucx_transport.status();
  }
  link_counters_ = std::make_shared<transport::LinkCounters>(n);
  last_link_bytes_.assign(2 * static_cast<std::size_t>(n), 0);
  last_link_sample_ = Clock::now();
  auto counting = std::make_unique<transport::CountingTransport>(std::move(ucx_transport).value(),
                                                                 link_counters_);
  {
    ThreadCpusScope spread(config_.thread_cpus);  // the ring's thread
    engine_ = std::make_unique<RingEngine>(
        std::move(counting), [&io = io_](std::function<void()> f) { asio::post(io, std::move(f)); },
        config_.busy_poll);
  }

  ++epoch_;
  formed_ = true;
  plans_applied_ = 0;
  next_cycle_ = 1;
  cache_.reset();
  if (config_.response_cache_capacity > 0)
    cache_ = std::make_unique<negotiation::ResponseCache>(config_.response_cache_capacity);
  bit_history_ = std::make_unique<negotiation::BitHistory>(config_.response_cache_capacity);
  stall_reported_.clear();
  direct_ = std::make_unique<negotiation::DirectExchange>(num_nodes(), std::uint64_t{num_nodes()} * slots());
  const std::uint64_t epoch = epoch_;
  auto wire = [this, epoch](std::uint32_t node, const std::shared_ptr<PeerLink>& link) {
    link->set_handlers(
        [this, node, epoch](peer_wire::Message m) {
          if (formed_ && epoch_ == epoch) on_peer_message(node, std::move(m));
        },
        [this, node, epoch](const Status& why) {
          if (formed_ && epoch_ == epoch) on_link_closed(node, why);
        });
    link->start_heartbeats(config_.heartbeat_interval, config_.peer_timeout);
  };
  if (config_.node_rank == 0) {
    coordinator_ = std::make_unique<negotiation::Coordinator>(
        num_nodes(), config_.fusion_threshold_bytes,
        negotiation::InlineOptions{config_.inline_bytes, std::uint64_t{num_nodes()} * slots()});
    worker_links_ = std::move(membership.workers);
    for (std::uint32_t r = 1; r < worker_links_.size(); ++r)
      if (worker_links_[r]) wire(r, worker_links_[r]);
    asio::co_spawn(io_, accept_while_formed(epoch), asio::detached);
  } else {
    coordinator_link_ = std::move(membership.coordinator);
    wire(0, coordinator_link_);
  }
  metrics_.ring_epoch.with().set(static_cast<double>(epoch_));
  metrics_.ring_nodes.with().set(static_cast<double>(n));
  RS_LOG(info, "ring") << "ring of job '" << config_.job_id << "' formed: " << n << " node(s), epoch "
                       << epoch_;
  // Whatever became ready while the ring formed is reported now.
  unreported_.clear();
  unannounced_.clear();
  in_negotiation_.clear();
  for (auto& [name, w] : waiting_)
    if (!w.queue.empty()) report(w.queue.front());
  return Status::Ok();
}

void ClusterNode::on_link_closed(std::uint32_t node, const Status& why) {
  const std::string who = node_name(node);
  lose(Status::PeerLost(who + " of job '" + config_.job_id + "' was lost: " + why.message()));
}

void ClusterNode::on_peer_message(std::uint32_t from, peer_wire::Message message) {
  if (auto* goodbye = std::get_if<peer_wire::Goodbye>(&message)) {
    // The coordinator relays why the ring ended (e.g. another node was lost).
    lose(Status::PeerLost(from == 0 && config_.node_rank != 0
                              ? goodbye->reason
                              : node_name(from) + " left the ring: " + goodbye->reason));
    return;
  }
  if (auto* ready = std::get_if<peer_wire::ReadyList>(&message)) {
    if (config_.node_rank != 0) {
      RS_LOG(warn, "ring") << node_name(from) << " sent a ready list to a node that does not coordinate";
      return;
    }
    on_ready_list(from, std::move(*ready));
    return;
  }
  if (auto* contributions = std::get_if<peer_wire::Contributions>(&message)) {
    on_contributions(from, std::move(*contributions));
    return;
  }
  if (auto* plan = std::get_if<peer_wire::Plan>(&message)) {
    if (from != 0) {
      RS_LOG(warn, "ring") << node_name(from) << " sent a plan but only node 0 plans";
      return;
    }
    on_plan(*plan);
    return;
  }
  RS_LOG(warn, "ring") << node_name(from) << " sent an unexpected message; ignored";
  metrics_.error("peer_protocol");
}

void ClusterNode::lose(const Status& why) {
  if (!formed_) return;
  formed_ = false;
  if (why.code() == StatusCode::kClosed) {
    RS_LOG(info, "ring") << why.message() << "; the ring is closed";
  } else {
    RS_LOG(error, "ring") << why.message() << "; failing the job's collectives and forming the ring again";
  }
  metrics_.ring_nodes.with().set(0);
  active_.clear();
  metrics_.peers_lost.with().inc();
  metrics_.error("peer_lost");
  // Tell the others first: the coordinator relays the reason to every worker.
  for (auto& link : worker_links_)
    if (link) link->goodbye(why);
  if (coordinator_link_) coordinator_link_->goodbye(why);
  worker_links_.clear();
  coordinator_link_.reset();
  coordinator_.reset();
  direct_.reset();
  plan_scheduled_ = false;
  if (acceptor_) {
    boost::system::error_code ec;
    acceptor_->cancel(ec);
  }
  // In-flight ring operations fail with `why` through their engine callbacks;
  // the engine lives until they have (sweep() lets it go).
  last_loss_ = why;
  if (engine_) {
    engine_->abort(why);
    retired_.push_back(std::move(engine_));
  }
  auto queued = std::move(queued_);
  queued_.clear();
  for (auto& r : queued)
    for (auto& t : r->tensors) hooks_.fail(t, why, "peer_lost");
  fail_waiting(why, "peer_lost");
  hooks_.ring_lost(why);
  wake_formation_.cancel();
}

void ClusterNode::fail_waiting(const Status& why, std::string_view kind) {
  auto waiting = std::move(waiting_);
  waiting_.clear();
  unreported_.clear();
  unannounced_.clear();
  in_negotiation_.clear();
  for (auto& [name, w] : waiting)
    for (auto& p : w.queue) hooks_.fail(p, why, kind);
}

}  // namespace ringsync::service::cluster

