// Job membership from a hostfile, as horovodrun's: one node per line,
// `host[:port] slots=L`, '#' comments. The line order is the node rank.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ringsync {

struct HostEntry {
  std::string host;
  std::uint16_t port = 0;  // 0: the default control port
  std::uint32_t slots = 1;
};

// Parses hostfile text; `origin` names the file in error messages.
Result<std::vector<HostEntry>> parse_hostfile(std::string_view text, std::string_view origin);
Result<std::vector<HostEntry>> read_hostfile(const std::string& path);

// horovodrun's -H form: "a:4,b:4" means hosts a and b with 4 slots each.
Result<std::vector<HostEntry>> parse_host_list(std::string_view list);

// The daemons of a job as its trainers name them (RINGSYNC_NODES):
// "host[:port],..." in node-rank order, "[v6]:port" for IPv6; every entry
// gets `slots`. At most 65536 entries.
Result<std::vector<HostEntry>> parse_node_list(std::string_view list, std::uint32_t slots);

}  // namespace ringsync
