#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "service/ring/alltoall.h"
#include "service/test_ring_data.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_ring_alltoall {

using namespace ringsync;
using namespace ringsync::service::ring;
using namespace ringsync::service::ring::testing;
using ringsync::service::transport::InProcessFabric;

namespace {

// Byte b of the block node `from` sends node `to`: distinct for every pair.
std::byte block_byte(int from, int to, std::size_t b) {
  return static_cast<std::byte>((from * 37 + to * 11 + static_cast<int>(b % 251)) & 0xFF);
}

}  // namespace

TEST_CASE("pairwise alltoall: block m of every node's input lands in its block of node m's output") {
  for (int n : {1, 2, 3, 4, 5, 7, 8, 11}) {
    for (std::size_t block : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1001}}) {
      for (DType dtype : {DType::kU8, DType::kF64}) {
        CAPTURE(n);
        CAPTURE(block);
        CAPTURE(dtype_name(dtype));
        const std::size_t elem = dtype_size(dtype);
        const std::size_t block_bytes = block * elem;
        RingOptions options;
        options.sequence = 3;
        options.chunk_bytes = 3 * elem;  // several chunks per message
        options.window = 2;
        InProcessFabric fabric(n);
        std::vector<Bytes> sends(static_cast<std::size_t>(n)), recvs(static_cast<std::size_t>(n));
        std::vector<TaskState> states(static_cast<std::size_t>(n));
        spawn(n, [&](int r) {
          const auto i = static_cast<std::size_t>(r);
          sends[i].resize(block_bytes * static_cast<std::size_t>(n));
          for (int to = 0; to < n; ++to)
            for (std::size_t b = 0; b < block_bytes; ++b)
              sends[i][static_cast<std::size_t>(to) * block_bytes + b] = block_byte(r, to, b);
          recvs[i].assign(block_bytes * static_cast<std::size_t>(n), std::byte{0xEE});
          Alltoall task(fabric.endpoint(r), sends[i].data(), recvs[i].data(), block, dtype, options);
          states[i] = task.post().ok() ? drive_one(fabric.endpoint(r), task) : TaskState::kError;
        });
        for (int r = 0; r < n; ++r) {
          CAPTURE(r);
          const auto i = static_cast<std::size_t>(r);
          CHECK(states[i] == TaskState::kDone);
          Bytes expected(block_bytes * static_cast<std::size_t>(n));
          for (int from = 0; from < n; ++from)
            for (std::size_t b = 0; b < block_bytes; ++b)
              expected[static_cast<std::size_t>(from) * block_bytes + b] = block_byte(from, r, b);
          CHECK(recvs[i] == expected);
          // Each node sends every block but its own, once.
          CHECK(fabric.bytes_sent(r) == block_bytes * static_cast<std::size_t>(n - 1));
        }
      }
    }
  }
}

TEST_CASE("pairwise alltoall: overlapping buffers are refused before anything is sent") {
  InProcessFabric fabric(2);
  std::vector<std::byte> buffer(64);
  RingOptions options;
  Alltoall task(fabric.endpoint(0), buffer.data(), buffer.data() + 8, 4, DType::kF32, options);
  const Status posted = task.post();
  CHECK(posted.code() == StatusCode::kInvalidArgument);
  CHECK(posted.message().find("overlap") != std::string::npos);
  CHECK(task.progress() == TaskState::kError);
  CHECK(fabric.bytes_sent(0) == 0);
}

}  // namespace test_service_ring_alltoall
