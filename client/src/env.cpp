#include "client/src/env.h"

#include <sys/un.h>

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string_view>

#include "client/src/launcher_env.h"
#include "common/job_token_file.h"

namespace ringsync::client {
namespace {

constexpr const char* kSocketEnv = "RINGSYNC_SOCKET";
constexpr const char* kJobEnv = "RINGSYNC_JOB_ID";
constexpr const char* kRankEnv = "RINGSYNC_LOCAL_RANK";
constexpr const char* kSizeEnv = "RINGSYNC_LOCAL_SIZE";
constexpr const char* kBusyPollEnv = "RINGSYNC_BUSY_POLL_US";
constexpr const char* kChannelEnv = "RINGSYNC_CHANNEL";
constexpr const char* kNodeRankEnv = "RINGSYNC_NODE_RANK";
constexpr const char* kNumNodesEnv = "RINGSYNC_NUM_NODES";
constexpr const char* kNodesEnv = "RINGSYNC_NODES";
constexpr const char* kRendezvousEnv = "RINGSYNC_RENDEZVOUS";
constexpr const char* kMinNodesEnv = "RINGSYNC_MIN_NODES";
constexpr const char* kMaxNodesEnv = "RINGSYNC_MAX_NODES";
constexpr const char* kTokenEnv = "RINGSYNC_JOB_TOKEN";
constexpr const char* kTokenFileEnv = "RINGSYNC_JOB_TOKEN_FILE";
constexpr const char* kRuntimeDirEnv = "XDG_RUNTIME_DIR";

// The variable's value when it is set and not empty.
std::optional<std::string> lookup(const Environment& env, const char* name) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return std::nullopt;
  return it->second;
}

// A rank or size from the environment: a decimal integer in [minimum, INT_MAX].
Result<int> parse_count(const char* name, const std::string& text, int minimum) {
  int value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || value < minimum)
    return Status::InvalidArgument(std::string(name) + "='" + text +
                                   "' is not an integer >= " + std::to_string(minimum));
  return value;
}

// Rank from the config (>= 0) or the environment; nullopt when neither sets it.
Result<std::optional<int>> resolve_rank(const rs_config_t* config, const Environment& env) {
  if (config && config->local_rank >= 0) return std::optional<int>(config->local_rank);
  if (config && config->local_rank != -1)
    return Status::InvalidArgument("config.local_rank is " + std::to_string(config->local_rank) +
                                   "; use a rank >= 0, or -1 to read " + kRankEnv);
  auto text = lookup(env, kRankEnv);
  if (!text) return std::optional<int>();
  auto rank = parse_count(kRankEnv, *text, 0);
  if (!rank.ok()) return rank.status();
  return std::optional<int>(*rank);
}

// Size from the config (> 0) or the environment; nullopt when neither sets it.
Result<std::optional<int>> resolve_size(const rs_config_t* config, const Environment& env) {
  if (config && config->local_size > 0) return std::optional<int>(config->local_size);
  if (config && config->local_size < -1)
    return Status::InvalidArgument("config.local_size is " + std::to_string(config->local_size) +
                                   "; use a size >= 1, or 0 or -1 to read " + kSizeEnv);
  auto text = lookup(env, kSizeEnv);
  if (!text) return std::optional<int>();
  auto size = parse_count(kSizeEnv, *text, 1);
  if (!size.ok()) return size.status();
  return std::optional<int>(*size);
}

}  // namespace

Environment process_environment() {
  Environment env;
  for (const char* name : {kSocketEnv, kJobEnv, kRankEnv, kSizeEnv, kBusyPollEnv, kChannelEnv, kRuntimeDirEnv,
                           kNodeRankEnv, kNumNodesEnv, kNodesEnv, kRendezvousEnv, kTokenEnv, kTokenFileEnv,
                           kMinNodesEnv, kMaxNodesEnv}) {
    if (const char* value = std::getenv(name)) env[name] = value;
  }
  for (const char* name : launcher_variables())
    if (const char* value = std::getenv(name)) env[name] = value;
  return env;
}

namespace {
// The settings that do not depend on where the ranks came from.
Result<Settings> finish_elastic(const Environment& env, Settings s);
Result<Settings> finish_settings(const rs_config_t* config, const Environment& env, Settings s);
}  // namespace

Result<Settings> resolve_settings(const rs_config_t* config, const Environment& env, uid_t uid) {
  Settings s;

  if (config && config->socket_path && config->socket_path[0] != '\0') {
    s.socket_path = config->socket_path;
  } else if (auto path = lookup(env, kSocketEnv)) {
    s.socket_path = *path;
  } else if (const std::string slurm = slurm_socket_path(env, uid); !slurm.empty() && std::filesystem::exists(slurm)) {
    s.socket_path = slurm;  // the ringsyncd that `srun ringsyncd` started for this job
  } else {
    s.socket_path = default_socket_path(env, uid);
  }
  if (s.socket_path.size() >= sizeof(sockaddr_un{}.sun_path))
    return Status::InvalidArgument("socket path '" + s.socket_path + "' is " +
                                   std::to_string(s.socket_path.size()) +
                                   " bytes; Unix socket paths must be shorter than " +
                                   std::to_string(sizeof(sockaddr_un{}.sun_path)) + " bytes");

  auto rank = resolve_rank(config, env);
  if (!rank.ok()) return rank.status();
  auto size = resolve_size(config, env);
  if (!size.ok()) return size.status();
  std::optional<LauncherPlace> launcher;
  if (!rank->has_value() && !size->has_value()) {
    auto place = launcher_place(env);
    if (!place.ok()) return place.status();
    launcher = std::move(place).value();
  }

  if (config && config->job_id && config->job_id[0] != '\0') {
    s.job_id = config->job_id;
  } else if (auto id = lookup(env, kJobEnv)) {
    s.job_id = *id;
  } else if (launcher && !launcher->job_id.empty()) {
    s.job_id = launcher->job_id.substr(0, 256);
  } else {
    s.job_id = "default";
  }
  s.nodes = lookup(env, kNodesEnv).value_or("");
  s.rendezvous = lookup(env, kRendezvousEnv).value_or("");
  s.job_token = lookup(env, kTokenEnv).value_or("");
  if (auto file = lookup(env, kTokenFileEnv)) {
    if (!s.job_token.empty())
      return Status::InvalidArgument(std::string("give the job token with ") + kTokenEnv + " or with " +
                                     kTokenFileEnv + ", not both");
    auto token = read_job_token_file(*file);
    if (!token.ok()) return Status::InvalidArgument(token.status().message() + " (" + kTokenFileEnv + ")");
    s.job_token = std::move(token).value();
  }
  if (!s.rendezvous.empty() && s.rendezvous.rfind("etcd://", 0) != 0)
    return Status::InvalidArgument(std::string(kRendezvousEnv) + "='" + s.rendezvous +
                                   "' is not etcd://HOST:PORT[,HOST:PORT]");
  if (launcher) {
    if (s.nodes.empty() && s.rendezvous.empty() && !launcher->nodes.empty()) {
      s.nodes = launcher->nodes;
      s.nodes_from = launcher->nodes_from;
    }
    s.local_rank = launcher->local_rank;
    s.local_size = launcher->local_size;
    s.node_rank = launcher->node_rank;
    s.num_nodes = launcher->num_nodes;
    s.place_from = launcher->launcher;
    return finish_settings(config, env, std::move(s));
  }
  if (auto text = lookup(env, kNodeRankEnv)) {
    auto node = parse_count(kNodeRankEnv, *text, 0);
    if (!node.ok()) return node.status();
    s.node_rank = *node;
  }
  if (auto text = lookup(env, kNumNodesEnv)) {
    auto nodes = parse_count(kNumNodesEnv, *text, 1);
    if (!nodes.ok()) return nodes.status();
    s.num_nodes = *nodes;
    if (s.node_rank >= s.num_nodes)
      return Status::InvalidArgument(std::string(kNodeRankEnv) + "=" + std::to_string(s.node_rank) +
                                     " is out of range for " + kNumNodesEnv + "=" + std::to_string(s.num_nodes));
  }
  if (rank->has_value() != size->has_value()) {
    if (!rank->has_value())
      return Status::InvalidArgument("the local size is " + std::to_string(**size) +
                                     " but the local rank is not set; set config.local_rank or " +
                                     kRankEnv);
    return Status::InvalidArgument("the local rank is " + std::to_string(**rank) +
                                   " but the local size is not set; set config.local_size or " +
                                   kSizeEnv);
  }
  s.local_rank = rank->value_or(0);
  s.local_size = size->value_or(1);
  if (rank->has_value()) s.place_from = "ringsync";
  if (s.local_rank >= s.local_size)
    return Status::InvalidArgument(
        "local rank " + std::to_string(s.local_rank) + " is out of range for local size " +
        std::to_string(s.local_size) + "; ranks are 0.." + std::to_string(s.local_size - 1));

  return finish_settings(config, env, std::move(s));
}

namespace {

Result<Settings> finish_settings(const rs_config_t* config, const Environment& env, Settings s) {
  if (config && config->connect_timeout_ms < 0)
    return Status::InvalidArgument("config.connect_timeout_ms is " +
                                   std::to_string(config->connect_timeout_ms) +
                                   "; use a positive number of milliseconds, or 0 for the default");
  if (config && config->connect_timeout_ms > 0)
    s.connect_timeout = std::chrono::milliseconds(config->connect_timeout_ms);

  if (auto text = lookup(env, kBusyPollEnv)) {
    auto us = parse_count(kBusyPollEnv, *text, 0);
    if (!us.ok() || *us > kMaxBusyPollUs)
      return Status::InvalidArgument(std::string(kBusyPollEnv) + "='" + *text + "' is not a number of "
                                     "microseconds from 0 (never poll) to " + std::to_string(kMaxBusyPollUs));
    s.busy_poll = std::chrono::microseconds(*us);
  }
  if (auto text = lookup(env, kChannelEnv)) {
    if (*text != "shm" && *text != "socket")
      return Status::InvalidArgument(std::string(kChannelEnv) + "='" + *text +
                                     "' is neither shm (a shared-memory channel, the default) nor socket");
    s.shm_channel = *text == "shm";
  }
  return finish_elastic(env, std::move(s));
}

// RINGSYNC_MIN_NODES / RINGSYNC_MAX_NODES: an elastic job, whose nodes the
// rendezvous places anew for every run (docs/elastic.md).
Result<Settings> finish_elastic(const Environment& env, Settings s) {
  const auto min_text = lookup(env, kMinNodesEnv), max_text = lookup(env, kMaxNodesEnv);
  if (!min_text && !max_text) return s;
  int min = 1, max = 0;
  if (min_text) {
    auto parsed = parse_count(kMinNodesEnv, *min_text, 1);
    if (!parsed.ok()) return parsed.status();
    min = *parsed;
  }
  if (max_text) {
    auto parsed = parse_count(kMaxNodesEnv, *max_text, 1);
    if (!parsed.ok()) return parsed.status();
    max = *parsed;
  } else {
    max = std::max(min, s.num_nodes);
  }
  if (max < min)
    return Status::InvalidArgument(std::string(kMaxNodesEnv) + "=" + std::to_string(max) + " is below " +
                                   kMinNodesEnv + "=" + std::to_string(min));
  if (s.num_nodes == 0) s.num_nodes = max;
  if (s.num_nodes < min || s.num_nodes > max)
    return Status::InvalidArgument(std::string(kNumNodesEnv) + "=" + std::to_string(s.num_nodes) +
                                   " (the nodes the first run waits for) is outside " + kMinNodesEnv + ".." +
                                   kMaxNodesEnv + " = " + std::to_string(min) + ".." + std::to_string(max));
  if (!s.nodes.empty() || s.node_rank >= 0)
    return Status::InvalidArgument(std::string("an elastic job (") + kMinNodesEnv + "/" + kMaxNodesEnv +
                                   ") takes its nodes and node ranks from its rendezvous; unset RINGSYNC_NODES "
                                   "and RINGSYNC_NODE_RANK, and set RINGSYNC_RENDEZVOUS=etcd://HOST:PORT");
  s.min_nodes = min;
  s.max_nodes = max;
  return s;
}

}  // namespace

}  // namespace ringsync::client
