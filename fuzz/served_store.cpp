// The rendezvous store a daemon serves (service/rendezvous/served_store.cpp):
// POST bodies from anyone who reaches --serve-rendezvous. The first byte picks
// the path, the rest is the body, parsed as the daemon parses it; every
// answer is an object or an error, never an exception. A few requests run
// against one store, so later ones meet the state earlier ones left.
#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "canary.h"
#include "service/rendezvous/served_store.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringsync;
  fuzz::crash_on_canary(data, size);
  static const char* const kPaths[] = {"/v3/lease/grant", "/v3/lease/keepalive", "/v3/lease/revoke",
                                       "/v3/kv/range", "/v3/kv/txn", "/v3/kv/put", "/v3/other"};
  service::rendezvous::ServedStore store;
  const auto now = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  // Requests are separated by newlines: "<path digit><json>\n...".
  std::size_t at = 0;
  for (int request = 0; request < 8 && at < size; ++request) {
    std::size_t end = at;
    while (end < size && data[end] != '\n') ++end;
    const std::string path = kPaths[data[at] % (sizeof(kPaths) / sizeof(kPaths[0]))];
    const std::string body(reinterpret_cast<const char*>(data) + at + 1, end > at ? end - at - 1 : 0);
    at = end + 1;
    const nlohmann::json json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) continue;
    try {
      auto answer = store.handle(path, json, now + std::chrono::seconds(request));
      if (answer.ok()) fuzz::require(answer->is_object());
    } catch (const std::exception&) {
      fuzz::require(false);  // a client's body must never throw in the daemon
    }
  }
  return 0;
}
