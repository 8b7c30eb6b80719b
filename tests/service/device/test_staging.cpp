// The multi-node GPU path (DeviceStaging) over host memory posing as device
// memory, for N nodes of L local ranks: stage_in, the ring emulated over
// what host_contributions() hands the ring path, stage_out; every rank's
// output must be what one big collective over all N*L inputs gives.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "service/collective/node_operation.h"
#include "service/execution/staged_allreduce.h"
#include "service/device/staging.h"
#include "service/host_device_backend.h"
#include "service/ring/alltoall.h"
#include "service/ring/reduce_scatter.h"
#include "service/test_ring_harness.h"
#include "service/transport/in_process.h"

namespace test_service_device_staging {

using namespace ringsync;
using namespace ringsync::service;
using ringsync::test::HostDeviceBackend;

namespace {

using Ints = std::vector<std::int32_t>;

struct Node {
  std::vector<Ints> send, recv;  // "device" buffers, by local rank
  std::unique_ptr<device::DeviceStaging> staging;
  std::vector<collective::Contribution> host;
};

struct Cluster {
  wire::CollectiveKind kind;
  ReduceOp op = ReduceOp::kSum;
  std::uint32_t root = 0;
  std::size_t nodes, local, count;
  std::size_t pipeline_chunk = 1 << 20;  // --gpu-staging-chunk (0: whole buffers)
  std::vector<Node> node;
  HostDeviceBackend backend;

  Cluster(wire::CollectiveKind k, std::size_t n, std::size_t l, std::size_t c,
          ReduceOp o = ReduceOp::kSum, std::uint32_t r = 0)
      : kind(k), op(o), root(r), nodes(n), local(l), count(c), node(n) {
    const std::size_t out =
        kind == wire::CollectiveKind::kAllgather ? count * nodes * local : count;
    std::mt19937 rng(static_cast<std::uint32_t>(n * 100 + l * 10 + c));
    std::uniform_int_distribution<std::int32_t> dist(-1000, 1000);
    for (std::size_t i = 0; i < nodes; ++i) {
      node[i].send.assign(local, Ints(count));
      node[i].recv.assign(local, Ints(out, -5));
      for (auto& s : node[i].send)
        for (auto& x : s) x = dist(rng);
    }
  }

  collective::LocalPlan plan(std::size_t n) {
    collective::LocalPlan p;
    p.kind = kind;
    p.dtype = DType::kI32;
    p.op = op;
    p.count = count;
    p.root = root;
    for (std::size_t r = 0; r < local; ++r)
      p.ranks.push_back(collective::Contribution{reinterpret_cast<const std::byte*>(node[n].send[r].data()),
                                     reinterpret_cast<std::byte*>(node[n].recv[r].data())});
    return p;
  }

  void stage_in() {
    for (std::size_t n = 0; n < nodes; ++n) {
      const device::NodeShape shape{static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(nodes),
                            static_cast<std::uint32_t>(local)};
      auto staging = device::DeviceStaging::create(plan(n), shape, backend, 0, pipeline_chunk);
      REQUIRE(staging.ok());
      node[n].staging = std::move(staging).value();
      auto queue = backend.queue(0);
      REQUIRE(node[n].staging->stage_in(**queue).ok());
      node[n].host = node[n].staging->host_contributions();
      REQUIRE(node[n].host.size() == local);
    }
  }

  void stage_out() {
    for (auto& n : node) {
      auto queue = backend.queue(0);
      REQUIRE(n.staging->stage_out(**queue).ok());
    }
  }

  // What every rank's output must hold.
  Ints expected() const {
    Ints all;
    switch (kind) {
      case wire::CollectiveKind::kAllreduce: {
        Ints out(count);
        for (std::size_t i = 0; i < count; ++i) {
          std::int64_t acc = op == ReduceOp::kMax ? INT32_MIN : 0;
          for (const auto& n : node)
            for (const auto& s : n.send)
              acc = op == ReduceOp::kMax ? std::max<std::int64_t>(acc, s[i]) : acc + s[i];
          if (op == ReduceOp::kAvg) acc /= static_cast<std::int64_t>(nodes * local);
          out[i] = static_cast<std::int32_t>(acc);
        }
        return out;
      }
      case wire::CollectiveKind::kBroadcast:
        return node[root / local].send[root % local];
      case wire::CollectiveKind::kAllgather:
        for (const auto& n : node)
          for (const auto& s : n.send) all.insert(all.end(), s.begin(), s.end());
        return all;
      case wire::CollectiveKind::kBarrier:
      case wire::CollectiveKind::kReduceScatter:  // per-rank layouts: their own case below
      case wire::CollectiveKind::kAlltoall:
      case wire::CollectiveKind::kReduce:  // not staged: refused (the case at the end)
      case wire::CollectiveKind::kGather:
      case wire::CollectiveKind::kScatter:
        break;
    }
    return all;
  }

  // The ring's effect on per-node host buffers of `elements` int32s: what each
  // node holds after the ring, given what it held before.
  void ring(std::vector<std::int32_t*> buffers, std::size_t elements) const {
    switch (kind) {
      case wire::CollectiveKind::kAllreduce:
        for (std::size_t i = 0; i < elements; ++i) {
          std::int64_t acc = op == ReduceOp::kMax ? INT32_MIN : 0;
          for (auto* b : buffers)
            acc = op == ReduceOp::kMax ? std::max<std::int64_t>(acc, b[i]) : acc + b[i];
          if (op == ReduceOp::kAvg) acc /= static_cast<std::int64_t>(nodes * local);
          for (auto* b : buffers) b[i] = static_cast<std::int32_t>(acc);
        }
        break;
      case wire::CollectiveKind::kBroadcast:
        for (auto* b : buffers)
          std::copy(buffers[root / local], buffers[root / local] + elements, b);
        break;
      case wire::CollectiveKind::kAllgather: {
        const std::size_t segment = elements / nodes;  // node n owns segment n
        for (std::size_t n = 0; n < nodes; ++n)
          for (auto* b : buffers)
            std::copy(buffers[n] + n * segment, buffers[n] + (n + 1) * segment, b + n * segment);
        break;
      }
      case wire::CollectiveKind::kBarrier:
      case wire::CollectiveKind::kReduceScatter:  // per-rank layouts: their own case below
      case wire::CollectiveKind::kAlltoall:
      case wire::CollectiveKind::kReduce:  // not staged: refused (the case at the end)
      case wire::CollectiveKind::kGather:
      case wire::CollectiveKind::kScatter:
        break;
    }
  }

  void check_outputs() {
    const Ints want = expected();
    for (std::size_t n = 0; n < nodes; ++n)
      for (std::size_t r = 0; r < local; ++r) {
        CAPTURE(n);
        CAPTURE(r);
        CHECK(node[n].recv[r] == want);
      }
  }
};

std::int32_t* ints(const std::byte* p) {
  return reinterpret_cast<std::int32_t*>(const_cast<std::byte*>(p));
}

}  // namespace

TEST_CASE("staged allreduce: the node reduces on the device, one carrier goes around the ring") {
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax, ReduceOp::kAvg}) {
    for (std::size_t nodes : {1u, 2u, 3u}) {
      for (std::size_t local : {1u, 2u, 3u}) {
        CAPTURE(static_cast<int>(op));
        CAPTURE(nodes);
        CAPTURE(local);
        Cluster c(wire::CollectiveKind::kAllreduce, nodes, local, 7, op);
        c.stage_in();
        std::vector<std::int32_t*> carriers;
        for (auto& n : c.node) {
          CHECK(n.host[0].send != nullptr);
          CHECK(n.host[0].send == n.host[0].recv);
          for (std::size_t r = 1; r < local; ++r) {
            CHECK(n.host[r].send == nullptr);
            CHECK(n.host[r].recv == nullptr);
          }
          carriers.push_back(ints(n.host[0].recv));
        }
        c.ring(carriers, c.count);
        c.stage_out();
        c.check_outputs();
      }
    }
  }
}

TEST_CASE("staged allreduce, pipelined: the ring copies the node's reduction in and the result out as it goes") {
  // Past kPipelinedBytes, odd; 1, 2 and 3 local ranks (1: the input itself goes
  // around; more: their reduction in rank 0's output).
  const std::size_t count = device::DeviceStaging::kPipelinedBytes / sizeof(std::int32_t) + 3;
  {
    // --gpu-staging-chunk 0: whole buffers, before the ring.
    Cluster whole(wire::CollectiveKind::kAllreduce, 2, 2, count);
    whole.pipeline_chunk = 0;
    whole.stage_in();
    for (auto& n : whole.node) CHECK(!n.staging->pipelined());
    CHECK(whole.backend.log.to_host == 2);
    CHECK(whole.backend.log.copiers == 0);
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg}) {
    for (std::size_t nodes : {2u, 3u}) {
      for (std::size_t local : {1u, 2u, 3u}) {
        CAPTURE(static_cast<int>(op));
        CAPTURE(nodes);
        CAPTURE(local);
        Cluster c(wire::CollectiveKind::kAllreduce, nodes, local, count, op);
        c.stage_in();
        for (auto& n : c.node) REQUIRE(n.staging->pipelined());
        CHECK(c.backend.log.to_host == 0);  // nothing copied whole: the ring does it
        service::transport::InProcessFabric fabric(static_cast<int>(nodes));
        std::vector<ring::TaskState> states(nodes);
        ring::RingOptions options;
        options.chunk_bytes = 64 * 1024;
        ring::testing::spawn(static_cast<int>(nodes), [&](int r) {
          device::DeviceStaging& staging = *c.node[static_cast<std::size_t>(r)].staging;
          execution::StagedAllreduce task(fabric.endpoint(r), staging.copier(), staging.staged_buffers(), count,
                                        DType::kI32, op, nodes * local, options, 192 * 1024);
          states[static_cast<std::size_t>(r)] =
              task.post().ok() ? ring::testing::drive_one(fabric.endpoint(r), task) : ring::TaskState::kError;
        });
        for (auto state : states) CHECK(state == ring::TaskState::kDone);
        for (auto& n : c.node) n.staging->result_on_device();
        c.stage_out();
        CHECK(c.backend.log.to_device == 0);
        c.check_outputs();
      }
    }
  }
}

TEST_CASE("staged broadcast: the root's input rides on its own rank of its node") {
  for (std::size_t nodes : {1u, 2u, 3u}) {
    for (std::size_t local : {1u, 3u}) {
      for (std::uint32_t root = 0; root < nodes * local; ++root) {
        CAPTURE(nodes);
        CAPTURE(local);
        CAPTURE(root);
        Cluster c(wire::CollectiveKind::kBroadcast, nodes, local, 5, ReduceOp::kSum, root);
        c.stage_in();
        std::vector<std::int32_t*> carriers;
        for (std::size_t n = 0; n < nodes; ++n) {
          const std::size_t carrier = n == root / local ? root % local : 0;
          REQUIRE(c.node[n].host[carrier].recv != nullptr);
          carriers.push_back(ints(c.node[n].host[carrier].recv));
        }
        c.ring(carriers, c.count);
        c.stage_out();
        c.check_outputs();
      }
    }
  }
}

TEST_CASE("staged allgather: each rank's input sits at its global slot of the node's buffer") {
  for (std::size_t nodes : {1u, 2u, 3u}) {
    for (std::size_t local : {1u, 2u, 3u}) {
      CAPTURE(nodes);
      CAPTURE(local);
      Cluster c(wire::CollectiveKind::kAllgather, nodes, local, 4);
      c.stage_in();
      std::vector<std::int32_t*> carriers;
      for (std::size_t n = 0; n < nodes; ++n) {
        const auto& host = c.node[n].host;
        for (std::size_t r = 0; r < local; ++r)
          CHECK(host[r].send == host[0].recv + (n * local + r) * c.count * sizeof(std::int32_t));
        carriers.push_back(ints(host[0].recv));
      }
      c.ring(carriers, c.count * nodes * local);
      c.stage_out();
      c.check_outputs();
    }
  }
}

TEST_CASE("staging failures are reported, not hidden") {
  Cluster c(wire::CollectiveKind::kAllreduce, 2, 2, 3);
  const device::NodeShape shape{0, 2, 2};
  auto staging = device::DeviceStaging::create(c.plan(0), shape, c.backend, 0);
  REQUIRE(staging.ok());
  auto queue = c.backend.queue(0);
  c.backend.fail_operation(2);  // the copy to the host, after the reduction
  Status failed = (*staging)->stage_in(**queue);
  CHECK(failed.message() == "injected device failure");
  auto wrong = device::DeviceStaging::create(c.plan(0), device::NodeShape{0, 2, 3}, c.backend, 0);
  CHECK(wrong.status().code() == StatusCode::kInternal);
}

TEST_CASE("reduce, gather and scatter are not staged: their GPU buffers are refused, saying so") {
  for (auto kind : {wire::CollectiveKind::kReduce, wire::CollectiveKind::kGather, wire::CollectiveKind::kScatter}) {
    Cluster c(kind, 2, 2, 3);
    auto staging = device::DeviceStaging::create(c.plan(0), device::NodeShape{0, 2, 2}, c.backend, 0);
    REQUIRE_FALSE(staging.ok());
    CHECK(staging.status().code() == StatusCode::kInvalidArgument);
    CHECK(staging.status().message().find("GPU buffers in a job of several nodes is not served yet") !=
          std::string::npos);
  }
}

TEST_CASE("staged collectives through the ring path's NodeOperation") {
  for (auto kind : {wire::CollectiveKind::kAllreduce, wire::CollectiveKind::kBroadcast,
                    wire::CollectiveKind::kAllgather}) {
    for (std::size_t local : {1u, 3u}) {
      CAPTURE(static_cast<int>(kind));
      CAPTURE(local);
      const std::size_t nodes = 3;
      Cluster c(kind, nodes, local, 6, ReduceOp::kAvg,
                4 % static_cast<std::uint32_t>(nodes * local));
      c.stage_in();
      std::vector<std::unique_ptr<collective::NodeOperation>> ops;
      std::vector<std::int32_t*> buffers;
      for (std::size_t n = 0; n < nodes; ++n) {
        collective::OperationShape shape{kind,
                                      DType::kI32,
                                      c.op,
                                      c.root,
                                      static_cast<std::uint32_t>(n),
                                      static_cast<std::uint32_t>(nodes),
                                      static_cast<std::uint32_t>(local)};
        ops.push_back(std::make_unique<collective::NodeOperation>(
            shape, std::vector<std::size_t>{c.count},
            std::vector<std::vector<collective::Contribution>>{c.node[n].host}, 8));
        for (std::size_t i = 0; i < ops.back()->gather_pieces(); ++i) ops.back()->gather_piece(i);
        buffers.push_back(reinterpret_cast<std::int32_t*>(ops.back()->buffer()));
      }
      c.ring(buffers, ops.front()->buffer_count());
      for (auto& op : ops)
        for (std::size_t i = 0; i < op->scatter_pieces(); ++i) op->scatter_piece(i);
      c.stage_out();
      c.check_outputs();
    }
  }
}

TEST_CASE("staged reduce-scatter and alltoall: every rank's own input and output go through the host") {
  for (auto kind : {wire::CollectiveKind::kReduceScatter, wire::CollectiveKind::kAlltoall}) {
    for (std::size_t nodes : {1u, 2u, 3u}) {
      for (std::size_t local : {1u, 2u, 3u}) {
        CAPTURE(static_cast<int>(kind));
        CAPTURE(nodes);
        CAPTURE(local);
        const std::size_t count = 3, ranks = nodes * local;
        const wire::Extent extent = wire::extent(kind, count, ranks);
        // "Device" buffers by global rank.
        std::vector<Ints> send(ranks, Ints(extent.send)), recv(ranks, Ints(extent.recv, -5));
        for (std::size_t g = 0; g < ranks; ++g)
          for (std::size_t e = 0; e < extent.send; ++e) send[g][e] = static_cast<std::int32_t>(g * 100 + e);
        std::vector<HostDeviceBackend> backends(nodes);  // one per node: their logs are not shared
        service::transport::InProcessFabric fabric(static_cast<int>(nodes));
        std::vector<ring::TaskState> states(nodes);
        ring::testing::spawn(static_cast<int>(nodes), [&](int n) {
          collective::LocalPlan plan{kind, DType::kI32, ReduceOp::kSum, count, 0, {}};
          for (std::size_t l = 0; l < local; ++l) {
            const std::size_t g = static_cast<std::size_t>(n) * local + l;
            plan.ranks.push_back({reinterpret_cast<const std::byte*>(send[g].data()),
                                  reinterpret_cast<std::byte*>(recv[g].data())});
          }
          const device::NodeShape shape{static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(nodes),
                                static_cast<std::uint32_t>(local)};
          // Threads only record what happened; the test thread checks it.
          const auto i = static_cast<std::size_t>(n);
          states[i] = ring::TaskState::kError;
          HostDeviceBackend& backend = backends[i];
          auto staging = device::DeviceStaging::create(plan, shape, backend, 0);
          if (!staging.ok()) return;
          auto queue = backend.queue(0);
          if (!queue.ok() || !(*staging)->stage_in(**queue).ok()) return;
          const auto host = (*staging)->host_contributions();
          for (const auto& c : host)
            if (c.send == nullptr || c.recv == nullptr) return;  // every rank has its own
          const collective::OperationShape op_shape{kind, DType::kI32, ReduceOp::kSum, 0, shape.node_rank,
                                                 shape.num_nodes, shape.local_size};
          collective::NodeOperation work(op_shape, {count}, {host}, 8);
          for (std::size_t i = 0; i < work.gather_pieces(); ++i) work.gather_piece(i);
          std::unique_ptr<ring::Task> task;
          if (kind == wire::CollectiveKind::kReduceScatter)
            task = std::make_unique<ring::ReduceScatter>(fabric.endpoint(n), work.buffer(), work.buffer_count(),
                                                         DType::kI32, ReduceOp::kSum, ranks, ring::RingOptions{});
          else
            task = std::make_unique<ring::Alltoall>(fabric.endpoint(n), work.buffer(),
                                                    work.buffer() + work.buffer_bytes() / 2,
                                                    work.node_block_count(), DType::kI32, ring::RingOptions{});
          const ring::TaskState ran =
              task->post().ok() ? ring::testing::drive_one(fabric.endpoint(n), *task) : ring::TaskState::kError;
          if (ran != ring::TaskState::kDone) return;
          for (std::size_t p = 0; p < work.scatter_pieces(); ++p) work.scatter_piece(p);
          auto out_queue = backend.queue(0);
          if (out_queue.ok() && (*staging)->stage_out(**out_queue).ok()) states[i] = ran;
        });
        for (auto state : states) CHECK(state == ring::TaskState::kDone);
        for (std::size_t g = 0; g < ranks; ++g) {
          CAPTURE(g);
          Ints want(extent.recv);
          for (std::size_t e = 0; e < extent.recv; ++e) {
            if (kind == wire::CollectiveKind::kReduceScatter) {
              std::int32_t sum = 0;
              for (std::size_t h = 0; h < ranks; ++h) sum += send[h][g * count + e];
              want[e] = sum;
            } else {
              want[e] = send[e / count][g * count + e % count];  // block e / count from that rank
            }
          }
          CHECK(recv[g] == want);
        }
      }
    }
  }
}

}  // namespace test_service_device_staging
