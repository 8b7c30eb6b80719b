// Host lists (common/hostfile.cpp): --hostfile, --hosts and RINGSYNC_NODES
// text. Parsed entries have a host and at least one slot.
#include <string_view>

#include "canary.h"
#include "common/hostfile.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringsync;
  fuzz::crash_on_canary(data, size);
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (auto parsed : {parse_hostfile(text, "fuzz"), parse_host_list(text), parse_node_list(text, 2)}) {
    if (!parsed.ok()) {
      fuzz::require(!parsed.status().message().empty());
      continue;
    }
    for (const HostEntry& e : *parsed) fuzz::require(!e.host.empty() && e.slots >= 1);
  }
  return 0;
}
