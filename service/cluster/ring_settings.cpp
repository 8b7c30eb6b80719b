#include "service/cluster/ring_settings.h"

namespace ringsync::service::cluster {

std::string difference(const RingSettings& ours, const RingSettings& theirs, const std::string& who) {
  if (theirs == ours) return "";
  const auto differs = [&](const char* flag, const std::string& theirs_text, const std::string& ours_text,
                           const char* also = "") {
    return who + " runs " + flag + " " + theirs_text + ", node 0 " + ours_text + "; every node must use the same" +
           also;
  };
  if (theirs.chunk_bytes != ours.chunk_bytes)
    return differs("--ring-chunk-bytes", std::to_string(theirs.chunk_bytes), std::to_string(ours.chunk_bytes));
  if (theirs.response_cache != ours.response_cache)
    return differs("--response-cache", std::to_string(theirs.response_cache), std::to_string(ours.response_cache));
  if (theirs.inline_bytes != ours.inline_bytes)
    return differs("--inline-bytes", std::to_string(theirs.inline_bytes), std::to_string(ours.inline_bytes));
  if (!(theirs.routes == ours.routes))
    return differs("--algorithm", route::describe(theirs.routes), route::describe(ours.routes),
                   " (--algorithm, --direct-max-bytes, --rhd-max-bytes)");
  // Otherwise the nodes that check would wait for the others' check words.
  return differs("--verify-results", std::string(integrity::verify_results_name(theirs.verify_results)),
                 std::string(integrity::verify_results_name(ours.verify_results)));
}

void put(const RingSettings& s, peer_wire::PeerHello& hello) {
  hello.ring_chunk_bytes = s.chunk_bytes;
  hello.response_cache = s.response_cache;
  hello.inline_bytes = s.inline_bytes;
  hello.direct_bytes = s.routes.direct_bytes;
  hello.halving_doubling_bytes = s.routes.halving_doubling_bytes;
  hello.halving_doubling_folds = s.routes.fold;
  hello.verify_results = static_cast<std::uint8_t>(s.verify_results);
}

RingSettings settings_of(const peer_wire::PeerHello& h) {
  return RingSettings{h.ring_chunk_bytes, h.response_cache, h.inline_bytes,
                      route::DataRoutes{h.direct_bytes, h.halving_doubling_bytes, h.halving_doubling_folds},
                      static_cast<integrity::VerifyResults>(h.verify_results)};
}

}  // namespace ringsync::service::cluster
