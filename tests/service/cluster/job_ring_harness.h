// A whole job ring in one process, for tests: N JobRings (membership,
// negotiator, executor) on one io_context, their control links real TCP on
// loopback, their data plane an in-process fabric instead of UCX.
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/io_context.hpp>
#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include <doctest/doctest.h>

#include "common/metrics.h"
#include "service/borrowed_transport.h"
#include "service/cluster/job_ring.h"
#include "service/device/staging.h"
#include "service/formation/control_listener.h"
#include "service/host_device_backend.h"
#include "service/one_rank_collective.h"
#include "service/transport/in_process.h"
#include "service/transport/test_drop.h"

namespace ringsync::test::job_ring {

using namespace ringsync::service;
using namespace ringsync::service::cluster;
using namespace ringsync::service::formation;
namespace asio = boost::asio;
using namespace std::chrono_literals;
using transport::Borrowed;

class FabricPlane final : public DataPlane {
 public:
  // drop_nth: the first ring of this node drops its n-th data-plane send (0: none).
  FabricPlane(transport::InProcessFabric& fabric, int rank, std::uint64_t drop_nth = 0)
      : fabric_(fabric), rank_(rank), drop_nth_(drop_nth) {}
  Result<std::vector<std::uint8_t>> open() override { return std::vector<std::uint8_t>{static_cast<std::uint8_t>(rank_)}; }
  Result<std::unique_ptr<transport::Transport>> connect(int rank, const std::vector<std::vector<std::uint8_t>>&,
                                                        std::uint64_t) override {
    std::unique_ptr<transport::Transport> endpoint = std::make_unique<Borrowed>(fabric_.endpoint(rank));
    if (std::exchange(drop_nth_, 0) > 0)
      endpoint = std::make_unique<transport::DroppingTransport>(std::move(endpoint), 1, sends_);
    return endpoint;
  }

 private:
  transport::InProcessFabric& fabric_;
  int rank_;
  std::uint64_t drop_nth_;
  std::shared_ptr<std::atomic<std::uint64_t>> sends_ = std::make_shared<std::atomic<std::uint64_t>>(0);
};

inline ClusterConfig settings() {
  ClusterConfig c;
  c.join_timeout = 5s;
  c.heartbeat_interval = 50ms;
  c.peer_timeout = 500ms;
  c.cycle_time = 0ms;
  c.fusion_threshold_bytes = 128 << 20;
  c.ring.inline_bytes = 32 * 1024;
  c.ring.response_cache = 64;
  c.ring.chunk_bytes = 64 * 1024;
  c.ring_window = 4;
  c.rendezvous_timeout = 1s;
  c.rendezvous_lease = 2s;
  return c;
}

struct Outcome {
  std::optional<Status> status;
};

struct Node {
  std::unique_ptr<ControlListener> listener;
  std::unique_ptr<JobRing> ring;
  std::vector<Status> losses;
  bool finished = false;
};

// Answers every rank of a collective, as the daemon does (without metrics).
struct RankAnswers final : Answers {
  void fail(local::PendingCollective& p, const Status& s, observe::ErrorKind) override {
    for (auto& sub : p.submissions) sub.complete(s);
  }
  void succeed(local::PendingCollective& p, Clock::time_point, std::size_t) override {
    for (auto& sub : p.submissions) sub.complete(Status::Ok());
  }
};

struct Job {
  asio::io_context io;
  RankAnswers answers;
  ClusterConfig config = settings();
  metrics::Registry registry;
  observe::DaemonMetrics metrics{registry};
  threads::WorkPool pool{2};
  transport::InProcessFabric fabric;
  std::vector<Node> nodes;

  // drop_node: that node's first ring drops its first data-plane send (-1: none).
  // slots: local ranks per node.
  explicit Job(int n, ClusterConfig c = settings(), int drop_node = -1, std::uint32_t slots = 1)
      : config(c), fabric(n), nodes(n) {
    std::vector<HostEntry> list;
    for (int i = 0; i < n; ++i) {
      auto listener = ControlListener::open(io, "127.0.0.1:0", {});
      REQUIRE(listener.ok());
      nodes[i].listener = std::move(listener).value();
      list.push_back({"127.0.0.1", nodes[i].listener->port(), 1});
    }
    for (int i = 0; i < n; ++i) {
      JobSpec spec;
      spec.id = "j";
      spec.token = "t";
      spec.slots = slots;
      spec.num_nodes = static_cast<std::uint32_t>(n);
      spec.node_rank = static_cast<std::uint32_t>(i);
      spec.nodes = list;
      JobRing::Hooks hooks;
      hooks.ring_lost = [this, i](const Status& why) { nodes[i].losses.push_back(why); };
      hooks.finished = [this, i] { nodes[i].finished = true; };
      nodes[i].ring = std::make_unique<JobRing>(io, spec, config, nodes[i].listener.get(), pool, metrics, nullptr,
                                                answers, std::move(hooks),
                                                std::make_unique<FabricPlane>(fabric, i, i == drop_node ? 1 : 0));
      REQUIRE(nodes[i].ring->start().ok());
    }
  }
  ~Job() {
    for (auto& n : nodes) n.ring->stop(Status::Closed("test over"), Status::Closed("test over"));
    for (int i = 0; i < 200; ++i) {
      bool done = true;
      for (auto& n : nodes) done = done && n.ring->done();
      if (done) break;
      io.run_for(10ms);
    }
  }

  bool run_until(const std::function<bool()>& done, std::chrono::milliseconds limit = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      io.run_for(5ms);
    }
    return true;
  }
  bool formed() {
    for (auto& n : nodes)
      if (!n.ring->formed()) return false;
    return true;
  }
  // Every local rank of node `node` submitted `collective` (its submissions by local rank).
  void submit(int node, local::PendingCollective collective) { nodes[node].ring->local_ready(std::move(collective)); }
  // An in-place f32 sum allreduce of `count` elements at `where` from node `node`'s
  // one rank; `done` runs when the job answers it.
  void submit(int node, const std::string& name, std::size_t count, collective::Contribution where, wire::Memory memory,
              std::shared_ptr<device::DeviceStaging> staging, std::function<void(const Status&)> done) {
    local::PendingCollective p =
        one_rank_collective(wire::CollectiveKind::kAllreduce, name, where, count, std::move(done));
    wire::Collective& request = p.submissions.front().request;
    request.memory = memory;
    request.dtype = DType::kF32;
    request.op = ReduceOp::kSum;
    p.staging = std::move(staging);
    nodes[node].ring->local_ready(std::move(p));
  }
  // Node `node`'s one rank submits an in-place f32 sum allreduce of `data`.
  std::shared_ptr<Outcome> allreduce(int node, const std::string& name, std::vector<float>& data) {
    auto out = std::make_shared<Outcome>();
    submit(node, name, data.size(),
           {reinterpret_cast<const std::byte*>(data.data()), reinterpret_cast<std::byte*>(data.data())},
           wire::Memory::kHost, nullptr, [out](const Status& status) { out->status = status; });
    return out;
  }
  // The same with `data` posing as GPU memory: staged as the daemon stages it
  // (DeviceStaging over a backend of host memory and a memcpy copy engine).
  std::shared_ptr<Outcome> device_allreduce(int node, const std::string& name, std::vector<float>& data,
                                            test::HostDeviceBackend& backend) {
    auto out = std::make_shared<Outcome>();
    collective::LocalPlan plan;
    plan.kind = wire::CollectiveKind::kAllreduce;
    plan.dtype = DType::kF32;
    plan.op = ReduceOp::kSum;
    plan.count = data.size();
    plan.ranks = {collective::Contribution{reinterpret_cast<const std::byte*>(data.data()), reinterpret_cast<std::byte*>(data.data())}};
    auto staging = device::DeviceStaging::create(plan, device::NodeShape{static_cast<std::uint32_t>(node), static_cast<std::uint32_t>(nodes.size()), 1},
                                         backend, 0, 1 << 20);
    REQUIRE(staging.ok());
    auto queue = backend.queue(0);
    REQUIRE((*staging)->stage_in(**queue).ok());
    std::shared_ptr<device::DeviceStaging> kept = std::move(staging).value();
    // The executor copies the result back to the "GPU" (its stage-out step).
    submit(node, name, data.size(), kept->host_contributions()[0], wire::Memory::kDevice, kept,
           [out](const Status& status) { out->status = status; });
    return out;
  }
};

}  // namespace ringsync::test::job_ring
