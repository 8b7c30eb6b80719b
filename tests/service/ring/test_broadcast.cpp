#include <doctest/doctest.h>

#include <cstddef>
#include <set>
#include <vector>

#include "service/ring/broadcast.h"
#include "service/ring/partition.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_ring_broadcast {

using namespace ringsync;
using namespace ringsync::service::ring;
using namespace ringsync::service::ring::testing;
using ringsync::service::transport::InProcessFabric;

TEST_CASE("ring broadcast: the root's buffer reaches every node, from several roots") {
  for (int n : {1, 2, 3, 4, 7, 11}) {
    const std::set<int> roots{0, n / 2, n - 1};
    for (int root : roots) {
      for (std::size_t count :
           {std::size_t{0}, std::size_t{1}, std::size_t{19}, std::size_t{100003}}) {
        CAPTURE(n);
        CAPTURE(root);
        CAPTURE(count);
        const DType dtype = DType::kI32;
        const Bytes expected = ring_input(dtype, ReduceOp::kSum, count, root);
        RingOptions options;
        options.sequence = 40;
        options.chunk_bytes = count > 1000 ? 4096 : 8;  // 2 elements per small chunk
        options.window = 2;
        InProcessFabric fabric(n);
        std::vector<Bytes> buffers(static_cast<std::size_t>(n));
        std::vector<TaskState> states(static_cast<std::size_t>(n));
        spawn(n, [&](int r) {
          const auto i = static_cast<std::size_t>(r);
          buffers[i] = r == root ? expected : Bytes(expected.size(), std::byte{0xAB});
          Broadcast task(fabric.endpoint(r), buffers[i].data(), count, dtype, root, options);
          states[i] = task.post().ok() ? drive_one(fabric.endpoint(r), task) : TaskState::kError;
        });
        const Partition chunks(count, 1, options.chunk_bytes / 4);
        for (int r = 0; r < n; ++r) {
          CAPTURE(r);
          const auto i = static_cast<std::size_t>(r);
          CHECK(states[i] == TaskState::kDone);
          CHECK(buffers[i] == expected);
          // A chain: every node but the last (the root's left neighbour) sends the buffer once.
          const bool last = (r + 1) % n == root;
          CHECK(fabric.bytes_sent(r) == (last ? 0 : count * 4));
          CHECK(fabric.messages_sent(r) == (last ? 0 : chunks.chunks(0)));
        }
      }
    }
  }
}

}  // namespace test_service_ring_broadcast
