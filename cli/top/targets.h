// Which daemons `ringsync top` watches: the addresses a user gives (HOST:PORT or
// http:// URLs), or those a `ringsync launch` recorded in its directory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "common/status.h"

namespace ringsync::cli::top {

struct Target {
  std::string host;  // without brackets
  std::uint16_t port = 0;
  std::string path = "/metrics";
  // HOST:PORT, IPv6 in brackets: the daemon's name on screen (Prometheus'
  // `instance`).
  std::string instance() const;
  std::string url() const { return "http://" + instance() + path; }
};

// "HOST:PORT", "[::1]:PORT", "http://HOST:PORT" or "http://HOST:PORT/path" (the
// path defaults to /metrics), several joined by commas.
Result<std::vector<Target>> parse_targets(const std::string& list);

// The daemons of a `ringsync launch` run: DIR/metrics-addresses (see
// kMetricsAddressesFile), where DIR is its --log-dir or its run directory.
Result<std::vector<Target>> launch_targets(const std::filesystem::path& dir);

// The run directory of the newest `ringsync launch` of this user on this machine
// (temp dir/ringsync-launch-*/metrics-addresses); an error when there is none.
Result<std::filesystem::path> newest_launch_dir();

}  // namespace ringsync::cli::top
