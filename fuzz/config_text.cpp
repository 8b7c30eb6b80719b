// Config files (common/config_file.cpp): a ringsyncd.conf as an operator
// wrote it. Parsed settings have names; errors say something.
#include <string>

#include "canary.h"
#include "common/config_file.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringsync;
  fuzz::crash_on_canary(data, size);
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto parsed = config::parse_config_text(text, "fuzz.conf");
  if (!parsed.ok()) {
    fuzz::require(!parsed.status().message().empty());
    return 0;
  }
  for (const auto& setting : *parsed) fuzz::require(!setting.name.empty());
  return 0;
}
