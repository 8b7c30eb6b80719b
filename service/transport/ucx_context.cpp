#include "service/transport/ucx_context.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <initializer_list>
#include <mutex>
#include <string_view>
#include <utility>

#include "common/log.h"

namespace ringsync::service::transport {

Status ucx_error(ucs_status_t status, const std::string& what) {
  return Status::Internal(what + ": " + ucs_status_string(status) + " (UCX status " +
                          std::to_string(static_cast<int>(status)) + ")");
}

namespace {

// Whether a UCX_TLS list may select one of `names` (a transport or an alias
// of some). Setting a transport's option when it is not opened makes UCX warn.
bool may_use(std::string_view tls, std::initializer_list<std::string_view> names) {
  if (tls.empty()) tls = "all";
  const bool exclusions = tls.front() == '^';
  if (exclusions) tls.remove_prefix(1);
  bool named = false;
  while (!tls.empty()) {
    const std::size_t comma = tls.find(',');
    const std::string_view item = tls.substr(0, comma);
    tls = comma == std::string_view::npos ? std::string_view{} : tls.substr(comma + 1);
    for (std::string_view name : names) named = named || item == name;
    if (item == "all" && !exclusions) named = true;
  }
  return exclusions ? !named : named;
}

}  // namespace

std::size_t tcp_segment_for(std::size_t message_bytes) {
  return std::min((message_bytes + 1) / 2 + kTcpHeaderRoom, kMaxTcpSegmentBytes);
}

std::vector<std::string> verbs_devices(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) names.push_back(entry.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// The UCX configuration with `options` applied; released by the caller.
Result<ucp_config_t*> read_config(const UcxOptions& options) {
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = ucp_config_read(nullptr, nullptr, &config); s != UCS_OK) {
    return ucx_error(s, "cannot read the UCX configuration (check the UCX_* environment variables)");
  }
  std::vector<std::pair<const char*, std::string>> settings;
  if (!options.transports.empty()) settings.emplace_back("TLS", options.transports);
  if (!options.net_devices.empty()) settings.emplace_back("NET_DEVICES", options.net_devices);
  const char* env_tls = std::getenv("UCX_TLS");
  const std::string_view tls = !options.transports.empty() ? std::string_view(options.transports)
                               : env_tls != nullptr        ? std::string_view(env_tls)
                                                           : std::string_view{};
  // UCX matches these against each transport's own table, without its prefix
  // (SYSV_, POSIX_, TCP_); MM_ names the table the shared-memory ones share.
  if (options.shm_error_handling && may_use(tls, {"sm", "shm", "mm", "posix", "sysv"})) {
    settings.emplace_back("MM_ERROR_HANDLING", "y");
  }
  if (options.tcp_nonblocking_connect && may_use(tls, {"tcp"})) settings.emplace_back("CONN_NB", "y");
  // RDMA needs a verbs transport allowed and a verbs device on this host: with
  // UCX free to choose (the default) on a host without one, every link is tcp.
  const bool rdma = may_use(tls, {"rc", "rc_v", "rc_x", "rc_verbs", "rc_mlx5", "ud", "ud_v", "ud_x", "ud_verbs",
                                  "ud_mlx5", "dc", "dc_x", "dc_mlx5", "ib", "rdmacm"}) &&
                    !verbs_devices(options.verbs_device_dir).empty();
  if (options.eager_without_rdma && !rdma) {
    if (std::getenv("UCX_RNDV_THRESH") == nullptr) settings.emplace_back("RNDV_THRESH", "inf");
    if (std::getenv("UCX_ZCOPY_THRESH") == nullptr) settings.emplace_back("ZCOPY_THRESH", "inf");
  }
  // Both or neither: UCX refuses a receive segment smaller than the send segment, so
  // one set in the environment leaves the pair to the environment and UCX's defaults.
  if (options.tcp_segment_bytes != 0 && may_use(tls, {"tcp"}) &&
      std::getenv("UCX_TCP_TX_SEG_SIZE") == nullptr && std::getenv("UCX_TCP_RX_SEG_SIZE") == nullptr) {
    const std::string bytes = std::to_string(options.tcp_segment_bytes);
    settings.emplace_back("TX_SEG_SIZE", bytes);
    settings.emplace_back("RX_SEG_SIZE", bytes);
  }
  for (const auto& [name, value] : settings) {
    if (ucs_status_t s = ucp_config_modify(config, name, value.c_str()); s != UCS_OK) {
      ucp_config_release(config);
      return ucx_error(s, std::string("cannot set the UCX option ") + name + "=" + value);
    }
  }
  return config;
}

}  // namespace

Result<std::unique_ptr<UcxContext>> UcxContext::create(const UcxOptions& options) {
  auto config = read_config(options);
  if (!config.ok()) return config.status();

  std::unique_ptr<UcxContext> ucx(new UcxContext());
  ucp_params_t params;
  std::memset(&params, 0, sizeof(params));
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  ucs_status_t s = ucp_init(&params, *config, &ucx->context_);
  ucp_config_release(*config);
  if (s != UCS_OK) {
    const auto named = [](const std::string& v) { return v.empty() ? std::string("UCX's choice") : "'" + v + "'"; };
    return ucx_error(s, "cannot initialize UCX with transports " + named(options.transports) + " on devices " +
                            named(options.net_devices) +
                            " (is a listed transport or device missing on this host? see ucx_info -d)");
  }

  ucp_context_attr_t attributes;
  std::memset(&attributes, 0, sizeof(attributes));
  attributes.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  if (ucp_context_query(ucx->context_, &attributes) == UCS_OK)
    ucx->cuda_memory_ = (attributes.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
  static std::once_flag said;
  std::call_once(said, [cuda = ucx->cuda_memory_] {
    if (cuda) {
      RS_LOG(info, "ucx") << "UCX can move CUDA memory itself; GPU buffers still go through "
                             "pinned host memory (direct transfers are not done yet)";
    } else {
      RS_LOG(debug, "ucx") << "UCX moves host memory only (built without CUDA support); GPU "
                              "buffers go through pinned host memory";
    }
  });

  ucp_worker_params_t worker_params;
  std::memset(&worker_params, 0, sizeof(worker_params));
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;
  if (s = ucp_worker_create(ucx->context_, &worker_params, &ucx->worker_); s != UCS_OK) {
    return ucx_error(s, "cannot create a UCX worker");
  }
  if (s = ucp_worker_get_efd(ucx->worker_, &ucx->event_fd_); s != UCS_OK) {
    return ucx_error(s, "cannot get the UCX worker's wakeup descriptor");
  }

  ucp_address_t* address = nullptr;
  std::size_t length = 0;
  if (s = ucp_worker_get_address(ucx->worker_, &address, &length); s != UCS_OK) {
    return ucx_error(s, "cannot get the UCX worker's address");
  }
  const auto* bytes = reinterpret_cast<const std::byte*>(address);
  ucx->address_.assign(bytes, bytes + length);
  ucp_worker_release_address(ucx->worker_, address);
  return ucx;
}

UcxContext::~UcxContext() {
  if (worker_ != nullptr) ucp_worker_destroy(worker_);
  if (context_ != nullptr) ucp_cleanup(context_);
}

}  // namespace ringsync::service::transport
