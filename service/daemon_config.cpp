#include "service/daemon_config.h"

#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <limits>
#include <thread>

#include "common/log.h"
#include "common/units.h"
#include "common/wire.h"

namespace ringsync::service {
namespace {

using config::Kind;

constexpr std::uint64_t kMinFrameBytes = 4 * 1024;
constexpr std::uint64_t kMinChunkBytes = 4 * 1024;
constexpr std::uint64_t kChunkAlignment = 64;  // a cache line; a multiple of every element size
constexpr std::uint64_t kMinClientBufferBytes = 4 * 1024;
constexpr std::int64_t kMaxReduceThreads = 1024;
constexpr std::size_t kMaxSocketPath = sizeof(sockaddr_un{}.sun_path) - 1;  // room for the NUL

// "--name ... (from SOURCE)", the suffix of every validation error.
std::string from(const config::Config& cfg, std::string_view name) {
  return " (" + config::flag_name(name) + " from " + cfg.source(name) + ")";
}

Status positive_duration(const config::Config& cfg, std::string_view name, std::chrono::nanoseconds& out) {
  out = cfg.get_duration(name);
  if (out.count() <= 0) {
    return Status::InvalidArgument(std::string(name) + " must be longer than 0, got '" + cfg.get_string(name) +
                                   "'" + from(cfg, name));
  }
  return Status::Ok();
}

Status bytes_in_range(const config::Config& cfg, std::string_view name, std::uint64_t min, std::uint64_t max,
                      std::uint64_t& out) {
  out = cfg.get_bytes(name);
  if (out < min || out > max) {
    return Status::InvalidArgument(std::string(name) + " must be between " + units::format_bytes(min) + " and " +
                                   units::format_bytes(max) + ", got '" + cfg.get_string(name) + "'" +
                                   from(cfg, name));
  }
  return Status::Ok();
}

}  // namespace

const std::vector<config::Tunable>& daemon_tunables() {
  static const std::vector<config::Tunable> table = {
      {"socket", Kind::kPath, "", "",
       "Unix socket that trainers connect to. Empty means $XDG_RUNTIME_DIR/ringsync/ringsyncd.sock when "
       "XDG_RUNTIME_DIR is set, else /run/ringsync/ringsyncd.sock as root, else "
       "/tmp/ringsync-<uid>/ringsyncd.sock."},
      {"metrics-address", Kind::kAddress, "127.0.0.1:9400", "",
       "Where the Prometheus /metrics endpoint listens; \"off\" turns it off."},
      {"collective-timeout", Kind::kDuration, "300s", "seconds",
       "A collective not completed by all local ranks in this time fails with a timeout error."},
      {"stall-warning", Kind::kDuration, "60s", "seconds",
       "The stall inspector reports the ranks and tensors still missing after this long."},
      {"max-frame-bytes", Kind::kBytes, "64KiB", "bytes",
       "Largest control message a client may send; larger frames are rejected."},
      {"max-client-buffer-bytes", Kind::kBytes, "64GiB", "bytes",
       "Total shared memory one client may allocate for its buffers."},
      {"reduce-threads", Kind::kInt, "0", "threads", "Threads that sum local buffers; 0 means one per core."},
      {"reduce-chunk-bytes", Kind::kBytes, "1MiB", "bytes",
       "Granularity of the work split across reduce threads (at least 4KiB, a multiple of 64)."},
      {"ready-file", Kind::kPath, "", "",
       "When set, written once the daemon is listening, with lines socket=PATH and metrics=HOST:PORT."},
      {"log-level", Kind::kString, "info", "", "Most verbose log level written: error, warn, info, debug, trace."},
      {"log-subsys", Kind::kString, "all", "",
       "Subsystems that log: a comma list, all, or ^name to exclude one (e.g. ^ucx,^shm)."},
      {"handshake-timeout", Kind::kDuration, "10s", "seconds",
       "A connection that has not said hello by then is closed."},
  };
  return table;
}

std::map<std::string, std::string> daemon_environment() { return config::environment_snapshot({"XDG_RUNTIME_DIR"}); }

Result<DaemonConfig> daemon_config_from(const config::Config& cfg) {
  DaemonConfig d;

  d.socket_path = cfg.get_string("socket");
  if (d.socket_path.empty()) d.socket_path = default_socket_path(cfg.environment(), ::getuid());
  if (d.socket_path.size() > kMaxSocketPath) {
    return Status::InvalidArgument("socket path '" + d.socket_path + "' is " + std::to_string(d.socket_path.size()) +
                                   " bytes; a Unix socket path must be at most " + std::to_string(kMaxSocketPath) +
                                   ": choose a shorter --socket" + from(cfg, "socket"));
  }

  const auto metrics = cfg.get_address("metrics-address");
  d.metrics_address = metrics ? metrics->to_string() : "";

  RINGSYNC_RETURN_IF_ERROR(positive_duration(cfg, "collective-timeout", d.collective_timeout));
  RINGSYNC_RETURN_IF_ERROR(positive_duration(cfg, "stall-warning", d.stall_warning));
  RINGSYNC_RETURN_IF_ERROR(positive_duration(cfg, "handshake-timeout", d.client_handshake_timeout));

  RINGSYNC_RETURN_IF_ERROR(bytes_in_range(cfg, "max-frame-bytes", kMinFrameBytes, wire::kMaxFrameBytes,
                                          d.max_frame_bytes));
  RINGSYNC_RETURN_IF_ERROR(bytes_in_range(cfg, "max-client-buffer-bytes", kMinClientBufferBytes,
                                          std::numeric_limits<std::uint64_t>::max(), d.max_client_buffer_bytes));
  RINGSYNC_RETURN_IF_ERROR(bytes_in_range(cfg, "reduce-chunk-bytes", kMinChunkBytes,
                                          std::numeric_limits<std::uint64_t>::max(), d.reduce_chunk_bytes));
  if (d.reduce_chunk_bytes % kChunkAlignment != 0) {
    return Status::InvalidArgument("reduce-chunk-bytes must be a multiple of 64 bytes so that no element or cache "
                                   "line is split between threads, got '" + cfg.get_string("reduce-chunk-bytes") +
                                   "'" + from(cfg, "reduce-chunk-bytes"));
  }

  const std::int64_t threads = cfg.get_int("reduce-threads");
  if (threads < 0 || threads > kMaxReduceThreads) {
    return Status::InvalidArgument("reduce-threads must be between 0 (one per core) and " +
                                   std::to_string(kMaxReduceThreads) + ", got " + std::to_string(threads) +
                                   from(cfg, "reduce-threads"));
  }
  d.reduce_threads = threads > 0 ? static_cast<int>(threads)
                                 : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));

  d.ready_file = cfg.get_string("ready-file");

  auto level = log::parse_level(cfg.get_string("log-level"));
  if (!level.ok()) return Status::InvalidArgument(level.status().message() + from(cfg, "log-level"));
  d.log_level = std::string(log::level_name(level.value()));
  auto filter = log::SubsystemFilter::parse(cfg.get_string("log-subsys"));
  if (!filter.ok()) return Status::InvalidArgument(filter.status().message() + from(cfg, "log-subsys"));
  d.log_subsys = filter.value().to_string();

  return d;
}

}  // namespace ringsync::service
