#include "service/negotiation/response_cache.h"

#include <algorithm>
#include <bit>
#include <stdexcept>

namespace ringsync::service::negotiation {

ResponseCache::ResponseCache(std::size_t capacity) : slots_(capacity) {
  for (std::size_t i = capacity; i-- > 0;) free_.push_back(static_cast<std::uint32_t>(i));
}

std::optional<std::uint32_t> ResponseCache::lookup(const peer_wire::ReadyTensor& tensor) const {
  auto it = by_name_.find(tensor.name);
  if (it == by_name_.end() || !(*slots_[it->second].tensor == tensor)) return std::nullopt;
  return it->second;
}

void ResponseCache::record(const peer_wire::ReadyTensor& tensor) {
  if (slots_.empty()) return;
  if (auto it = by_name_.find(tensor.name); it != by_name_.end()) {
    Slot& slot = slots_[it->second];
    slot.tensor = tensor;  // a changed description takes the same bit
    recency_.erase(slot.recency);
    recency_.push_front(it->second);
    slot.recency = recency_.begin();
    return;
  }
  if (free_.empty()) {  // evict the least recently run
    const std::uint32_t victim = recency_.back();
    recency_.pop_back();
    by_name_.erase(slots_[victim].tensor->name);
    slots_[victim].tensor.reset();
    free_.push_back(victim);
  }
  const std::uint32_t bit = free_.back();
  free_.pop_back();
  slots_[bit].tensor = tensor;
  recency_.push_front(bit);
  slots_[bit].recency = recency_.begin();
  by_name_[tensor.name] = bit;
}

const peer_wire::ReadyTensor* ResponseCache::find(std::uint32_t bit) const {
  return occupied(bit) ? &*slots_[bit].tensor : nullptr;
}

bool ResponseCache::occupied(std::uint32_t bit) const {
  return bit < slots_.size() && slots_[bit].tensor.has_value();
}

Bits to_bits(const std::vector<std::uint32_t>& positions, std::size_t capacity) {
  Bits bits((capacity + 63) / 64, 0);
  for (auto p : positions)
    if (p < capacity) bits[p / 64] |= std::uint64_t{1} << (p % 64);
  return bits;
}

std::vector<std::uint32_t> from_bits(const Bits& bits) {
  std::vector<std::uint32_t> positions;
  for (std::size_t w = 0; w < bits.size(); ++w)
    for (std::uint64_t word = bits[w]; word != 0; word &= word - 1)
      positions.push_back(static_cast<std::uint32_t>(w * 64 + std::countr_zero(word)));
  return positions;
}

Bits intersect(const std::vector<Bits>& per_node) {
  if (per_node.empty()) return {};
  std::size_t words = per_node.front().size();
  for (const auto& b : per_node) words = std::min(words, b.size());
  Bits out(words, ~std::uint64_t{0});
  for (const auto& b : per_node)
    for (std::size_t w = 0; w < words; ++w) out[w] &= b[w];
  return out;
}

}  // namespace ringsync::service::negotiation
