#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <vector>

#include "service/ring/allgather.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_ring_allgather {

using namespace ringsync;
using namespace ringsync::service::ring;
using namespace ringsync::service::ring::testing;
using ringsync::service::transport::InProcessFabric;

TEST_CASE("ring allgather: every node ends with every node's segment") {
  for (int n : {1, 2, 3, 4, 7, 11}) {
    for (std::size_t count : {std::size_t{0}, std::size_t{1}, static_cast<std::size_t>(n - 1),
                              std::size_t{61}, std::size_t{100003}}) {
      for (DType dtype : {DType::kU8, DType::kF64}) {
        for (std::size_t window : {std::size_t{1}, std::size_t{4}}) {
          CAPTURE(n);
          CAPTURE(count);
          CAPTURE(dtype_name(dtype));
          CAPTURE(window);
          const std::size_t elem = dtype_size(dtype);
          // The gathered buffer everyone must end with.
          const Bytes expected = ring_input(dtype, ReduceOp::kMax, count, 99);
          RingOptions options;
          options.sequence = 12;
          options.chunk_bytes = count > 1000 ? 8192 : 2 * elem;
          options.window = window;
          InProcessFabric fabric(n);
          std::vector<Bytes> buffers(static_cast<std::size_t>(n));
          std::vector<TaskState> states(static_cast<std::size_t>(n));
          spawn(n, [&](int r) {
            const auto i = static_cast<std::size_t>(r);
            // Only the node's own segment is in place; the rest is junk.
            buffers[i].assign(count * elem, std::byte{0xEE});
            Allgather task(fabric.endpoint(r), buffers[i].data(), count, dtype, options);
            const Range own = task.partition().segment(r);
            if (own.count != 0) {
              std::memcpy(buffers[i].data() + own.begin * elem, expected.data() + own.begin * elem,
                          own.count * elem);
            }
            states[i] = task.post().ok() ? drive_one(fabric.endpoint(r), task) : TaskState::kError;
          });
          for (std::size_t r = 0; r < static_cast<std::size_t>(n); ++r) {
            CAPTURE(r);
            CHECK(states[r] == TaskState::kDone);
            CHECK(buffers[r] == expected);
            // Each node forwards every segment but its right neighbour's.
            const Partition p(count, n, options.chunk_bytes / elem);
            const std::size_t right = (r + 1) % static_cast<std::size_t>(n);
            CHECK(fabric.bytes_sent(static_cast<int>(r)) ==
                  (count - p.segment(static_cast<int>(right)).count) * elem);
          }
        }
      }
    }
  }
}

}  // namespace test_service_ring_allgather
