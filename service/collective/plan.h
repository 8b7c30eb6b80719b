// One collective's shape and the local ranks' buffers, as this daemon maps them:
// what every layout of a kind (kind.h) works on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/collective_kind.h"
#include "common/dtype.h"

namespace ringsync::service::collective {

// One local rank's buffers, already resolved to this process's mappings (host
// memory, or device addresses on the GPU path).
struct Contribution {
  const std::byte* send = nullptr;  // may equal recv (in place)
  std::byte* recv = nullptr;
};

struct LocalPlan {
  wire::CollectiveKind kind = wire::CollectiveKind::kAllreduce;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  std::size_t count = 0;  // elements per rank: the count of the ranks' calls
  std::uint32_t root = 0;
  std::vector<Contribution> ranks;  // index = local rank
};

}  // namespace ringsync::service::collective
