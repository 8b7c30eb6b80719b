// A ring task whose shared result is checked before it counts as done: runs
// the data task (allreduce, broadcast, allgather), then digests this node's
// copy of the result (checked_ranges.h), exchanges one word per node with the
// others by a ring allgather under tag steps of its own, and compares
// (verdict.h). Every node compares the same words, so a difference fails the
// collective on every node with the same error. An i32/i64 sum checked whole
// (spec.linear) also sends the linear sum of its input, taken at post(), and
// every node checks that the inputs' sums add up to the result's
// (linear_sum.h): a wrong reduction that reached every node alike.
//
// Tags: the data task's sequence, steps kCheckFirstStep .. + N-2. Data tasks
// use steps from 0 and stay below kCheckFirstStep for any ring of fewer than
// 16384 nodes, so the check's words never match a data message.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "service/integrity/verify_results.h"
#include "service/ring/task.h"
#include "service/transport/transport.h"

namespace ringsync::service::integrity {

inline constexpr std::uint16_t kCheckFirstStep = 0x8000;

struct CheckSpec {
  VerifyResults mode = VerifyResults::kAll;
  std::string collective;     // for the error: "allreduce 'grad'"
  bool corrupt_first = false; // test only: flip a bit first (test_corruption.h)
  // The data task sums `dtype` (linear_applies) in place over `result`, which
  // holds this node's input at post(): check the sum too.
  bool linear = false;
  DType dtype = DType::kF32;
};

// What the control thread learns besides the task's status: whether a failure
// was the check's (the ring itself is fine), not the data path's.
struct CheckOutcome {
  bool mismatch = false;
};

class CheckedResult final : public ring::Task {
 public:
  // `result`: the `result_bytes` the data task leaves identical on every node.
  CheckedResult(transport::Transport& transport, std::unique_ptr<ring::Task> data, std::byte* result,
                std::size_t result_bytes, const ring::RingOptions& options, CheckSpec spec,
                std::shared_ptr<CheckOutcome> outcome);
  ~CheckedResult() override;

  Status post() override;
  ring::TaskState progress() override;
  void abort(const Status& why) override;
  const Status& status() const override;

 private:
  // The data task finished: digest, and post the exchange of words.
  ring::TaskState start_exchange();

  transport::Transport& transport_;
  std::unique_ptr<ring::Task> data_;
  std::byte* result_;
  std::size_t result_bytes_;
  ring::RingOptions options_;
  CheckSpec spec_;
  std::shared_ptr<CheckOutcome> outcome_;
  std::uint64_t input_sum_ = 0;            // spec.linear: L of this node's input
  std::vector<std::uint64_t> words_;       // node n's check word at 2n, its input's L at 2n+1
  std::unique_ptr<ring::Task> exchange_;  // after the data task
  Status status_ = Status::Ok();           // the exchange's or the comparison's failure
};

}  // namespace ringsync::service::integrity
