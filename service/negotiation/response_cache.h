// Horovod's response cache: once a tensor has run, every node remembers it
// under the same bit position, so later steps can announce "ready" as one bit
// instead of a full description, and the coordinator finds the tensors ready
// everywhere by AND-ing bit vectors. Positions stay identical on all nodes
// because every node records the same plans in the same order, and eviction
// (least recently run) depends on nothing else.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/peer_wire.h"

namespace ringsync::service::negotiation {

using Bits = std::vector<std::uint64_t>;

class ResponseCache {
 public:
  explicit ResponseCache(std::size_t capacity);

  // The bit of a cached tensor with exactly this description; nullopt when
  // absent or when the description changed (then it must be negotiated again).
  std::optional<std::uint32_t> lookup(const peer_wire::ReadyTensor& tensor) const;
  // Records a tensor that just ran (call in plan order, on every node).
  void record(const peer_wire::ReadyTensor& tensor);
  // The tensor cached at `bit`; null when the bit is empty or out of range.
  const peer_wire::ReadyTensor* find(std::uint32_t bit) const;
  bool occupied(std::uint32_t bit) const;

  std::size_t capacity() const { return slots_.size(); }
  std::size_t size() const { return by_name_.size(); }

 private:
  struct Slot {
    std::optional<peer_wire::ReadyTensor> tensor;
    std::list<std::uint32_t>::iterator recency;
  };
  std::vector<Slot> slots_;
  std::map<std::string, std::uint32_t> by_name_;
  std::list<std::uint32_t> recency_;  // most recently run first
  std::vector<std::uint32_t> free_;   // unused bits, lowest last
};

// Bit-vector helpers for the ready sets nodes exchange.
Bits to_bits(const std::vector<std::uint32_t>& positions, std::size_t capacity);
std::vector<std::uint32_t> from_bits(const Bits& bits);
// Bits set in every vector (the tensors cached and ready on all nodes).
Bits intersect(const std::vector<Bits>& per_node);

}  // namespace ringsync::service::negotiation
