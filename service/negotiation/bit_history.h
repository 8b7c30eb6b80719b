// The coordinator's memory of which tensor held each response-cache bit, and
// since which plan. A node announces a bit as its cache stood after the plans
// it had applied (ReadyList.plans_seen); the coordinator may already be
// plans ahead, with that bit given to another tensor. The history answers
// "which tensor did bit b mean after plan k?" for the last few occupants.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "common/peer_wire.h"

namespace ringsync::service::negotiation {

class BitHistory {
 public:
  // Occupants remembered per bit: a node further behind than this many
  // reassignments of one bit cannot be understood (the ring re-forms).
  static constexpr std::size_t kDepth = 4;

  explicit BitHistory(std::size_t bits) : by_bit_(bits) {}

  // `tensor` holds `bit` as of plan `cycle` (no change if it already did).
  void record(std::uint32_t bit, std::uint64_t cycle, const peer_wire::ReadyTensor& tensor);
  // The tensor `bit` meant to a node that had applied plans up to `plans_seen`.
  std::optional<peer_wire::ReadyTensor> resolve(std::uint32_t bit, std::uint64_t plans_seen) const;

 private:
  std::vector<std::vector<std::pair<std::uint64_t, peer_wire::ReadyTensor>>> by_bit_;  // newest first
};

}  // namespace ringsync::service::negotiation
