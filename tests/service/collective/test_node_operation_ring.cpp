// NodeOperation and the ring task together, as the executor runs them: each
// node of an in-process fabric gathers its local ranks into the ring buffer,
// runs the task, and scatters; the outputs must be the collective's result.
#include <doctest/doctest.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "service/collective/node_operation.h"
#include "service/ring/alltoall.h"
#include "service/ring/reduce_scatter.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_collective_node_operation_ring {

using namespace ringsync;
using namespace ringsync::service;
using namespace ringsync::service::ring::testing;
using ringsync::service::collective::NodeOperation;
using ringsync::service::collective::OperationShape;
using ringsync::service::transport::InProcessFabric;

namespace {

using Floats = std::vector<float>;

// Element e of global rank g's input: small integers, so float sums are exact.
float input(std::size_t g, std::size_t e) { return static_cast<float>((g * 7 + e * 3) % 13) - 6.0f; }

// Runs one collective over `nodes` nodes of `local` ranks; returns every
// global rank's output.
std::vector<Floats> run(wire::CollectiveKind kind, ReduceOp op, int nodes, std::size_t local,
                        std::size_t count) {
  const std::size_t ranks = static_cast<std::size_t>(nodes) * local;
  const wire::Extent extent = wire::extent(kind, count, ranks);
  std::vector<Floats> send(ranks), recv(ranks);
  for (std::size_t g = 0; g < ranks; ++g) {
    send[g].resize(extent.send);
    for (std::size_t e = 0; e < extent.send; ++e) send[g][e] = input(g, e);
    recv[g].assign(extent.recv, -99.0f);
  }
  InProcessFabric fabric(nodes);
  std::vector<ring::TaskState> states(static_cast<std::size_t>(nodes));
  spawn(nodes, [&](int n) {
    std::vector<std::vector<collective::Contribution>> tensors(1);
    for (std::size_t l = 0; l < local; ++l) {
      const std::size_t g = static_cast<std::size_t>(n) * local + l;
      tensors[0].push_back({reinterpret_cast<const std::byte*>(send[g].data()),
                            reinterpret_cast<std::byte*>(recv[g].data())});
    }
    const OperationShape shape{kind, DType::kF32, op, 0, static_cast<std::uint32_t>(n),
                               static_cast<std::uint32_t>(nodes), static_cast<std::uint32_t>(local)};
    NodeOperation work(shape, {count}, tensors, 8);  // 2-element pieces
    for (std::size_t i = 0; i < work.gather_pieces(); ++i) work.gather_piece(i);
    ring::RingOptions options;
    options.chunk_bytes = 12;
    options.window = 2;
    std::unique_ptr<ring::Task> task;
    if (kind == wire::CollectiveKind::kReduceScatter)
      task = std::make_unique<ring::ReduceScatter>(fabric.endpoint(n), work.buffer(), work.buffer_count(),
                                                   DType::kF32, op, ranks, options);
    else
      task = std::make_unique<ring::Alltoall>(fabric.endpoint(n), work.buffer(),
                                              work.buffer() + work.buffer_bytes() / 2, work.node_block_count(),
                                              DType::kF32, options);
    const auto i = static_cast<std::size_t>(n);
    states[i] = task->post().ok() ? drive_one(fabric.endpoint(n), *task) : ring::TaskState::kError;
    if (states[i] == ring::TaskState::kDone)
      for (std::size_t p = 0; p < work.scatter_pieces(); ++p) work.scatter_piece(p);
  });
  for (auto s : states) CHECK(s == ring::TaskState::kDone);
  return recv;
}

}  // namespace

TEST_CASE("node operation + ring reduce-scatter: rank g gets block g reduced over every rank") {
  for (int nodes : {1, 2, 3, 5}) {
    for (std::size_t local : {1u, 2u, 3u}) {
      for (std::size_t count : {0u, 1u, 5u}) {
        for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
          CAPTURE(nodes);
          CAPTURE(local);
          CAPTURE(count);
          CAPTURE(reduce_op_name(op));
          const std::size_t ranks = static_cast<std::size_t>(nodes) * local;
          const auto out = run(wire::CollectiveKind::kReduceScatter, op, nodes, local, count);
          for (std::size_t g = 0; g < ranks; ++g) {
            for (std::size_t e = 0; e < count; ++e) {
              double sum = 0, max = -1e9;
              for (std::size_t h = 0; h < ranks; ++h) {
                sum += input(h, g * count + e);
                max = std::max<double>(max, input(h, g * count + e));
              }
              const double want = op == ReduceOp::kSum ? sum : op == ReduceOp::kMax ? max : sum / ranks;
              CHECK(out[g][e] == doctest::Approx(want).epsilon(1e-6));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("node operation + pairwise alltoall: block j of rank i lands in block i of rank j") {
  for (int nodes : {1, 2, 3, 5}) {
    for (std::size_t local : {1u, 2u, 3u}) {
      for (std::size_t count : {0u, 1u, 5u}) {
        CAPTURE(nodes);
        CAPTURE(local);
        CAPTURE(count);
        const std::size_t ranks = static_cast<std::size_t>(nodes) * local;
        const auto out = run(wire::CollectiveKind::kAlltoall, ReduceOp::kSum, nodes, local, count);
        for (std::size_t j = 0; j < ranks; ++j)
          for (std::size_t i = 0; i < ranks; ++i)
            for (std::size_t e = 0; e < count; ++e) {
              CAPTURE(i);
              CAPTURE(j);
              CHECK(out[j][i * count + e] == input(i, j * count + e));
            }
      }
    }
  }
}

}  // namespace test_service_collective_node_operation_ring
