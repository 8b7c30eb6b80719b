// Data-plane offers (service/transport/ucx_offer.h): the bytes of a peer's
// roster entry, its locality and UCX worker addresses. An offer that decodes
// encodes back to the same bytes, and choosing workers over it never throws.
#include <string>
#include <vector>

#include "canary.h"
#include "service/transport/ucx_offer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringsync::service::transport;
  ringsync::fuzz::crash_on_canary(data, size);
  auto offer = UcxOffer::decode({data, size});
  if (!offer.ok()) {
    ringsync::fuzz::require(!offer.status().message().empty());
    return 0;
  }
  const std::vector<std::uint8_t> again = offer->encode();
  ringsync::fuzz::require(again == std::vector<std::uint8_t>(data, data + size));
  // The offer beside itself, and beside a copy in another network namespace.
  UcxOffer other = *offer;
  other.where.net += 1;
  for (const auto& offers : {std::vector<UcxOffer>{*offer, *offer}, std::vector<UcxOffer>{*offer, other}}) {
    auto chosen = choose_workers(offers, {"node 0", "node 1"});
    ringsync::fuzz::require(!chosen.ok() || chosen->size() == offers.size());
  }
  return 0;
}
