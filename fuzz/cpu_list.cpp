// CPU lists (common/cpu_list.cpp): --control-cpus and friends. A parsed list
// formats to text that parses back to the same CPUs.
#include <string_view>

#include "canary.h"
#include "common/cpu_list.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringsync;
  fuzz::crash_on_canary(data, size);
  auto parsed = parse_cpu_list(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!parsed.ok()) return 0;
  auto again = parse_cpu_list(format_cpu_list(*parsed));
  fuzz::require(again.ok());
  fuzz::require(*again == *parsed);
  return 0;
}
