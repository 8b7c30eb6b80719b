#include "service/negotiation/bit_history.h"

namespace ringsync::service::negotiation {

namespace {
bool same(const peer_wire::ReadyTensor& a, const peer_wire::ReadyTensor& b) {
  return a.name == b.name && a.kind == b.kind && a.dtype == b.dtype && a.op == b.op &&
         a.count == b.count && a.root == b.root;
}
}  // namespace

void BitHistory::record(std::uint32_t bit, std::uint64_t cycle, const peer_wire::ReadyTensor& tensor) {
  if (bit >= by_bit_.size()) return;
  auto& history = by_bit_[bit];
  if (!history.empty() && same(history.front().second, tensor)) return;
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
