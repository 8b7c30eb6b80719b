#include "service/transport/ucx_offer.h"

#include "service/transport/packed_bytes.h"

namespace ringsync::service::transport {

namespace {
constexpr std::uint8_t kOfferFormat = 1;
}  // namespace

std::vector<std::uint8_t> UcxOffer::encode() const {
  return Packer()
      .u8(kOfferFormat)
      .bytes(where.encode())
      .bytes(worker)
      .bytes(network_worker)
      .u8(offers_shared_memory ? 1 : 0)
      .take();
}

Result<UcxOffer> UcxOffer::decode(std::span<const std::uint8_t> bytes) {
  Unpacker in(bytes);
  UcxOffer offer;
  std::uint8_t format = 0;
  std::uint8_t shared = 0;
  std::vector<std::uint8_t> where;
  if (!in.u8(format) || format != kOfferFormat)
    return Status::ProtocolError("a peer's data-plane address has an unknown format (same ringsync version everywhere?)");
  if (!in.bytes(where) || !in.bytes(offer.worker) || !in.bytes(offer.network_worker) || !in.u8(shared) ||
      shared > 1 || !in.at_end() || offer.worker.empty())
    return Status::ProtocolError("a peer's data-plane address is truncated or malformed");
  auto locality = Locality::decode(where);
  if (!locality.ok()) return locality.status();
  offer.where = std::move(locality).value();
  offer.offers_shared_memory = shared != 0;
  return offer;
}

Result<std::vector<WorkerChoice>> choose_workers(const std::vector<UcxOffer>& offers,
                                                 const std::vector<std::string>& names) {
  const auto name = [&](std::size_t k) { return k < names.size() ? names[k] : "node " + std::to_string(k); };
  std::vector<WorkerChoice> choices(offers.size());
  for (std::size_t k = 0; k < offers.size(); ++k) {
    if (!offers[k].offers_shared_memory) continue;  // its one worker is a network one already
    for (std::size_t j = 0; j < offers.size(); ++j) {
      if (j == k) continue;
      const std::string unshared = shared_memory_refusal(offers[k].where, offers[j].where);
      if (unshared.empty()) continue;
      const std::string host = offers[j].where.hostname.empty() ? "" : " (hostname " + offers[j].where.hostname + ")";
      const std::string why = name(j) + host + " runs on the same kernel as " + name(k) + " but does not share its " +
                              unshared + ", which UCX's shared memory needs";
      if (offers[k].network_worker.empty())
        return Status::InvalidArgument(why + ", and " + name(k) +
                                       "'s --ucx-transports allow nothing else: add tcp (or run the two daemons in "
                                       "one network, IPC, PID and user namespace with one /dev/shm)");
      choices[k] = {true, why};
      break;
    }
  }
  return choices;
}

}  // namespace ringsync::service::transport
