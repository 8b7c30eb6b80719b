#include <doctest/doctest.h>

#include <cstddef>
#include <vector>

#include "common/reduce.h"
#include "service/ring/reduce_scatter.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_ring_reduce_scatter {

using namespace ringsync;
using namespace ringsync::service::ring;
using namespace ringsync::service::ring::testing;
using ringsync::service::transport::InProcessFabric;

namespace {

// Runs a reduce-scatter on `n` nodes and checks that each node's own segment
// equals `expected` there (the rest of its buffer holds partial results).
void check_reduce_scatter(int n, const std::vector<Bytes>& inputs, std::size_t count, DType dtype,
                          ReduceOp op, std::size_t divisor, const RingOptions& options,
                          const Bytes& expected) {
  InProcessFabric fabric(n);
  std::vector<Bytes> buffers = inputs;
  std::vector<TaskState> states(static_cast<std::size_t>(n));
  std::vector<Range> owned(static_cast<std::size_t>(n));
  spawn(n, [&](int r) {
    const auto i = static_cast<std::size_t>(r);
    ReduceScatter task(fabric.endpoint(r), buffers[i].data(), count, dtype, op, divisor, options);
    owned[i] = task.partition().segment(r);
    states[i] = task.post().ok() ? drive_one(fabric.endpoint(r), task) : TaskState::kError;
  });
  const std::size_t elem = dtype_size(dtype);
  std::size_t covered = 0;
  for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r) {
    CAPTURE(r);
    CHECK(states[r] == TaskState::kDone);
    const Range seg = owned[r];
    CHECK(seg.begin == covered);  // node r owns segment r, in order
    covered += seg.count;
    const auto first = static_cast<std::ptrdiff_t>(seg.begin * elem);
    const auto last = static_cast<std::ptrdiff_t>((seg.begin + seg.count) * elem);
    CHECK(Bytes(buffers[r].begin() + first, buffers[r].begin() + last) ==
          Bytes(expected.begin() + first, expected.begin() + last));
  }
  CHECK(covered == count);
}

}  // namespace

TEST_CASE("ring reduce-scatter: each node ends with its own segment reduced over all nodes") {
  for (int n : {1, 2, 3, 4, 7, 11}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(n - 1),
                              std::size_t{53}, std::size_t{100003}}) {
      for (DType dtype : {DType::kI32, DType::kF32, DType::kF16}) {
        CAPTURE(n);
        CAPTURE(count);
        CAPTURE(dtype_name(dtype));
        std::vector<Bytes> inputs;
        for (int r = 0; r < n; ++r) inputs.push_back(ring_input(dtype, ReduceOp::kSum, count, r));
        RingOptions options;
        options.chunk_bytes = count > 1000 ? 4096 : 3 * dtype_size(dtype);
        options.window = 3;
        check_reduce_scatter(n, inputs, count, dtype, ReduceOp::kSum, 1, options,
                             reference(inputs, count, dtype, ReduceOp::kSum));
      }
    }
  }
}

TEST_CASE("ring reduce-scatter: min, max, prod and avg (divided on the owner)") {
  for (int n : {2, 5}) {
    for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProd, ReduceOp::kAvg}) {
      for (DType dtype : {DType::kF64, DType::kBF16, DType::kU8, DType::kI64}) {
        CAPTURE(n);
        CAPTURE(reduce_op_name(op));
        CAPTURE(dtype_name(dtype));
        std::vector<Bytes> inputs;
        for (int r = 0; r < n; ++r) inputs.push_back(ring_input(dtype, op, 77, r));
        RingOptions options;
        options.chunk_bytes = 5 * dtype_size(dtype);
        check_reduce_scatter(n, inputs, 77, dtype, op, static_cast<std::size_t>(n), options,
                             reference(inputs, 77, dtype, op));
      }
    }
  }
}

TEST_CASE("ring reduce-scatter: avg on one node divides the whole buffer, without messages") {
  InProcessFabric fabric(1);
  std::vector<double> data{3.0, -6.0, 1.5};
  ReduceScatter task(fabric.endpoint(0), data.data(), data.size(), DType::kF64, ReduceOp::kAvg, 3,
                     RingOptions{});
  REQUIRE(task.post().ok());
  CHECK(task.progress() == TaskState::kDone);
  CHECK(data == std::vector<double>{1.0, -2.0, 0.5});
  CHECK(fabric.messages_sent(0) == 0);
}

}  // namespace test_service_ring_reduce_scatter
