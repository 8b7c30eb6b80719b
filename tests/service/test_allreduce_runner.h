// One allreduce task type run over `n` nodes as threads (the ring's and
// halving-doubling's tests), and the check that every node ended with the
// expected bytes. Include after doctest.
#pragma once

#include <cstddef>
#include <vector>

#include "common/dtype.h"
#include "common/reduce.h"
#include "service/ring/task.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace ringsync::service::ring::testing {

inline constexpr DType kAllDTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                                       DType::kI32, DType::kI64, DType::kU8};
inline constexpr ReduceOp kAllOps[] = {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax,
                                       ReduceOp::kProd};

struct Outcome {
  std::vector<Bytes> buffers;  // every node's buffer afterwards
  std::vector<TaskState> states;
  std::vector<Status> statuses;
};

// One AllreduceTask over `n` nodes as threads, each starting from inputs[rank].
template <class AllreduceTask>
Outcome run_allreduce(int n, const std::vector<Bytes>& inputs, std::size_t count, DType dtype, ReduceOp op,
                      std::size_t divisor, const RingOptions& options,
                      transport::InProcessFabric* shared_fabric = nullptr) {
  transport::InProcessFabric own_fabric(n);
  transport::InProcessFabric& fabric = shared_fabric != nullptr ? *shared_fabric : own_fabric;
  Outcome out{inputs, std::vector<TaskState>(static_cast<std::size_t>(n)),
              std::vector<Status>(static_cast<std::size_t>(n))};
  spawn(n, [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    AllreduceTask task(fabric.endpoint(r), out.buffers[i].data(), count, dtype, op, divisor, options);
    const Status posted = task.post();
    out.states[i] = posted.ok() ? drive_one(fabric.endpoint(r), task) : TaskState::kError;
    out.statuses[i] = task.status();
  });
  return out;
}

inline void check_all_equal(const Outcome& out, const Bytes& expected) {
  for (std::size_t r = 0; r < out.buffers.size(); ++r) {
    CAPTURE(r);
    CHECK(out.states[r] == TaskState::kDone);
    CHECK(out.statuses[r].ok());
    CHECK(same_bytes(out.buffers[r], expected));
  }
}

}  // namespace ringsync::service::ring::testing
