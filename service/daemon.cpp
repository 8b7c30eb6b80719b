#include "service/daemon.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/cpu_list.h"
#include "common/log.h"
#include "common/version.h"
#include <nlohmann/json.hpp>
#include "service/threads/thread_cpus.h"

namespace ringsync::service {

namespace asio = boost::asio;
using local_stream = asio::local::stream_protocol;

namespace {

int pool_threads(int configured) {
  if (configured > 0) return configured;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
}

// True when something accepts connections on `path` (another daemon).
bool socket_is_live(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  const bool live = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return live;
}

}  // namespace

Daemon::Daemon(DaemonConfig config)
    : config_(std::move(config)),
      acceptor_(io_),
      signals_(io_, SIGINT, SIGTERM),
      sweep_timer_(io_),
      accept_retry_(io_),
      shutdown_deadline_(io_),
      metrics_(registry_),
      pool_(pool_threads(config_.reduce_threads)),
      busy_(config_.busy_poll),
      kept_(config_.max_kept_state_bytes) {}

Daemon::~Daemon() {
  if (owns_socket_file_) ::unlink(config_.socket_path.c_str());
}

Status Daemon::start() {
  if (!config_.control_cpus.empty()) {
    // Checked before anything is bound, so a wrong list costs nothing; the
    // threads started later keep the CPUs the daemon was given.
    auto given = threads::thread_cpus();
    if (!given.ok()) return given.status();
    if (Status usable = threads::within(config_.control_cpus, *given); !usable.ok())
      return Status::InvalidArgument("--control-cpus " + format_cpu_list(config_.control_cpus) + ": " +
                                     usable.message());
    config_.cluster.thread_cpus = std::move(given).value();
  }
  RINGSYNC_RETURN_IF_ERROR(listen());
  if (!config_.metrics_address.empty() && config_.metrics_address != "off") {
    observe::MetricsServerOptions options;
    options.not_ready = [this] { return not_ready(); };
    options.in_flight = [this] { return in_flight_json(); };
    auto server = observe::MetricsServer::start(
        io_, config_.metrics_address,
        [this] {
          update_gauges();
          return registry_.render();
        },
        std::move(options));
    if (!server.ok()) return server.status();
    metrics_server_ = std::move(server).value();
    metrics_.start_gpu_sampling();  // ringsync_gpu_* from NVML; one info line without a GPU
    metrics_.set_link_rate(config_.link_rate_bytes_per_second);
  }
  RINGSYNC_RETURN_IF_ERROR(serve_rendezvous());
  RINGSYNC_RETURN_IF_ERROR(start_cluster());
  if (!config_.control_cpus.empty()) {
    // After the threads started above (pool, timeline), which keep the
    // daemon's CPUs; before the ready file, which says it is serving.
    RINGSYNC_RETURN_IF_ERROR(threads::set_thread_cpus(config_.control_cpus));
    RS_LOG(info, "daemon") << "control thread on CPU(s) " << format_cpu_list(config_.control_cpus)
                           << "; other threads on " << format_cpu_list(config_.cluster.thread_cpus);
  }
  RINGSYNC_RETURN_IF_ERROR(write_ready_file());
  signals_.async_wait([this](boost::system::error_code ec, int signal) {
    if (ec) return;
    RS_LOG(info, "daemon") << "received signal " << signal << ", shutting down";
    shutdown();
  });
  accept_next();
  serving_ = true;
  schedule_sweep();
  RS_LOG(info, "daemon") << "ringsyncd " << kVersion << " listening on "
                              << config_.socket_path << "; metrics "
                              << (metrics_server_ ? metrics_endpoint() : std::string("off"))
                              << "; " << pool_.threads() << " data threads";
  if (!config_.cluster.slurm_job.empty())
    RS_LOG(info, "daemon") << "a step of Slurm job " << config_.cluster.slurm_job << " (node "
                           << config_.cluster.slurm_node << "): the job's trainers find this socket by SLURM_JOB_ID "
                           << "and the other nodes' daemons at " << config_.cluster.control_address;
  return Status::Ok();
}

Status Daemon::serve_rendezvous() {
  if (config_.serve_rendezvous.empty()) return Status::Ok();
  served_store_ = std::make_unique<rendezvous::ServedStore>();
  observe::MetricsServerOptions options;
  options.flag = "--serve-rendezvous";
  options.body_limit = 2 * rendezvous::ServedStore::kMaxValueBytes;
  options.post = [store = served_store_.get()](std::string_view path, const std::string& body) -> Result<std::string> {
    const nlohmann::json request = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (request.is_discarded()) return Status::InvalidArgument("the request body is not JSON");
    auto answer = store->handle(std::string(path), request, std::chrono::steady_clock::now());
    if (!answer.ok()) return answer.status();
    return answer->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  auto server = observe::MetricsServer::start(
      io_, config_.serve_rendezvous,
      [store = served_store_.get()] {
        return "# HELP ringsync_rendezvous_store_keys Keys in the rendezvous store this daemon serves.\n"
               "# TYPE ringsync_rendezvous_store_keys gauge\n"
               "ringsync_rendezvous_store_keys " + std::to_string(store->keys()) + "\n"
               "# HELP ringsync_rendezvous_store_leases Live leases in the rendezvous store this daemon serves.\n"
               "# TYPE ringsync_rendezvous_store_leases gauge\n"
               "ringsync_rendezvous_store_leases " + std::to_string(store->leases()) + "\n";
      },
      std::move(options));
  if (!server.ok()) return server.status();
  store_server_ = std::move(server).value();
  const auto ep = store_server_->endpoint();
  RS_LOG(info, "rendezvous") << "serving a rendezvous store at " << ep.address().to_string() << ":" << ep.port()
                             << " (in this daemon's memory): jobs name it as etcd://HOST:" << ep.port()
                             << " with this node's address";
  return Status::Ok();
}

std::string Daemon::not_ready() {
  if (stopping_) return "shutting down";
  if (!serving_) return "starting";
  if (!config_.cluster.enabled()) return "";
  const cluster::JobRing* ring = ring_of(config_.cluster.job_id);
  if (ring == nullptr || !ring->formed())
    return "the ring of the pre-configured job '" + config_.cluster.job_id + "' is not formed (see the log for the "
           "nodes it waits for)";
  return "";
}

std::string Daemon::metrics_endpoint() const {
  if (!metrics_server_) return "";
  const auto ep = metrics_server_->endpoint();
  const std::string host = ep.address().is_v6() ? "[" + ep.address().to_string() + "]"
                                                 : ep.address().to_string();
  return "http://" + host + ":" + std::to_string(ep.port()) + "/metrics";
}

Status Daemon::listen() {
  const std::string& path = config_.socket_path;
  if (path.size() >= sizeof(sockaddr_un::sun_path))
    return Status::InvalidArgument("socket path '" + path + "' is longer than " +
                                   std::to_string(sizeof(sockaddr_un::sun_path) - 1) +
                                   " bytes; choose a shorter --socket");
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::error_code fs_ec;
  if (!dir.empty() && !std::filesystem::exists(dir, fs_ec)) {
    std::filesystem::create_directories(dir, fs_ec);
    if (fs_ec)
      return Status::InvalidArgument("cannot create the socket directory " + dir.string() + ": " +
                                     fs_ec.message());
    // Others allowed in (--allow-uid/--allow-gid) must be able to reach the socket.
    ::chmod(dir.c_str(), config_.access.shared() ? 0711 : 0700);
  }
  const auto existing = std::filesystem::symlink_status(path, fs_ec);
  if (std::filesystem::exists(existing)) {
    if (existing.type() != std::filesystem::file_type::socket)
      return Status::InvalidArgument(path + " exists and is not a socket; refusing to replace it. "
                                     "Choose another --socket");
    if (socket_is_live(path))
      return Status::InvalidArgument("another ringsyncd is already listening on " + path +
                                     "; stop it or choose another --socket");
    ::unlink(path.c_str());  // left over from a daemon that did not shut down cleanly
  }
  boost::system::error_code ec;
  acceptor_.open(local_stream(), ec);
  // Only the owner may connect: trainers run as the daemon's user.
  const mode_t old_mask = ::umask(0177);
  if (!ec) acceptor_.bind(local_stream::endpoint(path), ec);
  ::umask(old_mask);
  if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return Status::InvalidArgument("cannot listen on " + path + ": " + ec.message());
  // Who may connect is checked per connection (SO_PEERCRED); the mode only
  // keeps out early those who could never pass.
  if (const auto group = config_.access.socket_group(); group && ::chown(path.c_str(), static_cast<uid_t>(-1), *group) != 0)
    return Status::InvalidArgument("cannot give " + path + " the group " + std::to_string(*group) + " of --allow-gid: " +
                                   std::strerror(errno));
  if (config_.access.socket_mode() != 0600 && ::chmod(path.c_str(), config_.access.socket_mode()) != 0)
    return Status::InvalidArgument("cannot open " + path + " to --allow-uid/--allow-gid: " + std::strerror(errno));
  owns_socket_file_ = true;
  return Status::Ok();
}

void Daemon::accept_next() {
  acceptor_.async_accept([this](boost::system::error_code ec, local_stream::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || stopping_) return;
      // Out of descriptors or memory: retrying at once would spin; wait a little.
      RS_LOG(warn, "daemon") << "accept failed: " << ec.message() << "; retrying in 100 ms";
      metrics_.error(observe::ErrorKind::kAccept);
      accept_retry_.expires_after(std::chrono::milliseconds(100));
      accept_retry_.async_wait([this](boost::system::error_code wait_ec) {
        if (!wait_ec && !stopping_) accept_next();
      });
      return;
    } else if (stopping_) {
      return;
    } else {
      const std::uint64_t id = next_session_id_++;
      local::SessionHost& host = *this;
      auto session = std::make_shared<local::ClientSession>(
          host, local::SessionLimits{config_.client_handshake_timeout, config_.max_frame_bytes}, std::move(socket), id);
      sessions_.emplace(id, session);
      metrics_.clients.with().set(static_cast<double>(sessions_.size()));
      RS_LOG(debug, "session") << "client " << id << " connected";
      session->start();
    }
    accept_next();
  });
}

Status Daemon::write_ready_file() const {
  if (config_.ready_file.empty()) return Status::Ok();
  const std::string tmp = config_.ready_file + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << "socket=" << config_.socket_path << "\n";
    if (metrics_server_) {
      const auto ep = metrics_server_->endpoint();
      const std::string host = ep.address().is_v6() ? "[" + ep.address().to_string() + "]"
                                                     : ep.address().to_string();
      out << "metrics=" << host << ":" << ep.port() << "\n";
    }
    out << "pid=" << ::getpid() << "\n";
    if (!out.flush())
      return Status::InvalidArgument("cannot write the ready file " + tmp);
  }
  if (std::rename(tmp.c_str(), config_.ready_file.c_str()) != 0)
    return Status::InvalidArgument("cannot rename " + tmp + " to " + config_.ready_file + ": " +
                                   std::strerror(errno));
  return Status::Ok();
}

void Daemon::schedule_sweep() {
  // Fine enough to honour both deadlines to within a quarter of the shorter one.
  auto shorter = std::min(config_.collective_timeout, config_.stall_warning);
  if (config_.rank_liveness_timeout.count() > 0) shorter = std::min(shorter, config_.rank_liveness_timeout);
  if (config_.cluster.progress_timeout.count() > 0) shorter = std::min(shorter, config_.cluster.progress_timeout);
  const auto period = std::clamp<std::chrono::nanoseconds>(
      shorter / 4, std::chrono::milliseconds(10), std::chrono::seconds(1));
  sweep_timer_.expires_after(period);
  sweep_timer_.async_wait([this](boost::system::error_code ec) {
    if (ec || stopping_) return;
    sweep();
    schedule_sweep();
  });
}

void Daemon::run() {
  busy_.set_hooks({[this] { return poll_channels(); }, [this] { return channels_may_sleep(); },
                   [this] { channels_woke(); }});
  // A handler that throws is a bug, but one bug must not end every job on the
  // node: the loop logs it, counts it and goes on (Asio consumes the handler
  // that threw, so run() resumes with the next).
  for (;;) {
    try {
      busy_.run(io_);
      return;
    } catch (const std::exception& e) {
      RS_LOG(error, "daemon") << "internal error (a bug: please report it with this line): " << e.what()
                              << "; the daemon serves on";
      metrics_.error(observe::ErrorKind::kInternal);
    }
  }
}

std::size_t Daemon::poll_channels() {
  // A closed session drains nothing and leaves channels_ in on_disconnect,
  // which never runs inside drain(): no sweep here, on the polling path.
  std::size_t handled = 0;
  for (std::size_t i = 0; i < channels_.size(); ++i) {
    auto session = channels_[i];
    handled += session->drain();
  }
  return handled;
}

bool Daemon::channels_may_sleep() {
  bool arrived = false;
  for (auto& session : channels_) arrived = session->set_sleeping(true) || arrived;
  if (arrived) channels_woke();
  return !arrived;
}

void Daemon::channels_woke() {
  for (auto& session : channels_) session->set_sleeping(false);
}

void Daemon::stop() {
  asio::post(io_, [this] { shutdown(); });
}

void Daemon::shutdown() {
  if (stopping_) return;
  stopping_ = true;
  boost::system::error_code ec;
  acceptor_.close(ec);
  signals_.clear(ec);  // default handling again: a second SIGTERM ends the process at once
  sweep_timer_.cancel();
  accept_retry_.cancel();
  if (metrics_server_) metrics_server_->stop();
  if (store_server_) store_server_->stop();
  pool_.cancel();  // queued data movement is skipped; running pieces finish
  if (control_) control_->close();
  for (auto& [id, hosted] : rings_)
    hosted.ring->stop(Status::Closed("ringsyncd is shutting down"),
                      Status::Closed(cluster::node_name(hosted.ring->job(), hosted.ring->node_rank()) + " of job '" +
                                     id + "' shut down"));
  for (auto& [name, job] : jobs_)
    for (auto& pending : job.take_expired(Clock::time_point::max(), Clock::duration::zero()))
      fail(pending, Status::Closed("ringsyncd is shutting down"), observe::ErrorKind::kShutdown);
  // Each client gets what is queued for it (the errors above), then EOF.
  for (auto& [id, session] : sessions_) session->close_after_flush();
  if (owns_socket_file_) {
    ::unlink(config_.socket_path.c_str());
    owns_socket_file_ = false;
  }
  if (!config_.ready_file.empty()) ::unlink(config_.ready_file.c_str());
  // run() returns when the last session is gone, or after a grace period for
  // clients that do not read.
  if (sessions_.empty()) asio::post(io_, [this] { io_.stop(); });
  shutdown_deadline_.expires_after(std::chrono::seconds(2));
  shutdown_deadline_.async_wait([this](boost::system::error_code wait_ec) {
    if (!wait_ec) io_.stop();
  });
}

}  // namespace ringsync::service
