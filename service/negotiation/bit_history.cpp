#include "service/negotiation/bit_history.h"

namespace ringsync::service::negotiation {

void BitHistory::record(std::uint32_t bit, std::uint64_t cycle, const peer_wire::ReadyTensor& tensor) {
  if (bit >= by_bit_.size()) return;
  auto& history = by_bit_[bit];
  if (!history.empty() && history.front().second == tensor) return;
  history.insert(history.begin(), {cycle, tensor});
  if (history.size() > kDepth) history.pop_back();
}

std::optional<peer_wire::ReadyTensor> BitHistory::resolve(std::uint32_t bit, std::uint64_t plans_seen) const {
  if (bit >= by_bit_.size()) return std::nullopt;
  for (const auto& [cycle, tensor] : by_bit_[bit])
    if (cycle <= plans_seen) return tensor;
  return std::nullopt;
}

}  // namespace ringsync::service::negotiation
