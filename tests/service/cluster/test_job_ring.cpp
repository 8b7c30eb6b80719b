// Whole job rings in one process (job_ring_harness.h). What a job sees:
// results, a rank that leaves, a node that goes.
#include <doctest/doctest.h>

#include "service/cluster/job_ring_harness.h"

namespace test_service_cluster_job_ring {

using namespace ringsync;
using namespace ringsync::service;
using namespace ringsync::service::cluster;
using namespace ringsync::service::formation;
using namespace ringsync::service::execution;
using namespace ringsync::service::negotiation;
namespace asio = boost::asio;
using namespace std::chrono_literals;
using namespace ringsync::test::job_ring;

namespace {

// Node 0 plans what is ready once per cycle: tensors ready together fuse.
ClusterConfig fused_settings() {
  ClusterConfig c = settings();
  c.cycle_time = 200ms;
  return c;
}

// Two GPU tensors per node of 2 nodes, past DeviceStaging::kPipelinedBytes:
// a = node + 1, b = 10 * (node + 1), so their sums are 3 and 30.
std::pair<std::vector<std::vector<float>>, std::vector<std::vector<float>>> fused_pair() {
  const std::size_t count = device::DeviceStaging::kPipelinedBytes / sizeof(float) + 7;
  std::vector<std::vector<float>> a, b;
  for (int i = 0; i < 2; ++i) {
    a.emplace_back(count, static_cast<float>(i + 1));
    b.emplace_back(count, static_cast<float>(10 * (i + 1)));
  }
  return {std::move(a), std::move(b)};
}

}  // namespace

TEST_CASE("job ring: the UCX data plane takes the settings' transports, and tcp segments for its ring chunks") {
  ClusterConfig c = settings();
  c.ucx_transports = "tcp,self";
  c.ucx_net_devices = "lo";
  for (std::uint64_t chunk : {std::uint64_t{4096}, std::uint64_t{512} * 1024, std::uint64_t{3} * 1024 * 1024}) {
    CAPTURE(chunk);
    c.ring.chunk_bytes = chunk;
    const auto plane = UcxDataPlane::for_daemon(c);  // what JobRing makes without a test's data plane
    const auto& options = plane->options();
    CHECK(options.transports == "tcp,self");
    CHECK(options.net_devices == "lo");
    CHECK(options.tcp_segment_bytes == service::transport::tcp_segment_for(chunk));
    CHECK(2 * (options.tcp_segment_bytes - service::transport::kTcpHeaderRoom) >= chunk);  // two fragments
  }
}

TEST_CASE("job ring: 3 nodes form over loopback links and an in-process fabric; every path sums right") {
  Job job(3);
  REQUIRE(job.run_until([&] { return job.formed(); }));
  // 4 floats go directly between the nodes, 3000 with the plan, 100000 around the ring.
  for (std::size_t count : {4u, 3000u, 100000u}) {
    CAPTURE(count);
    std::vector<std::vector<float>> data;
    for (int n = 0; n < 3; ++n) data.emplace_back(count, static_cast<float>(n + 1));
    std::vector<std::shared_ptr<Outcome>> outcomes;
    for (int n = 0; n < 3; ++n) outcomes.push_back(job.allreduce(n, "t" + std::to_string(count), data[n]));
    REQUIRE(job.run_until([&] {
      for (auto& o : outcomes)
        if (!o->status) return false;
      return true;
    }));
    for (int n = 0; n < 3; ++n) {
      CHECK_MESSAGE(outcomes[n]->status->ok(), outcomes[n]->status->message());
      CHECK(data[n].front() == 6.0f);
      CHECK(data[n].back() == 6.0f);
    }
  }
}

TEST_CASE("job ring: a rank that leaves fails what waits on every node with one reason; the run then closes quietly") {
  Job job(3);
  REQUIRE(job.run_until([&] { return job.formed(); }));
  for (auto& n : job.nodes) n.ring->set_local_ranks(1);
  // Nodes 0 and 2 are ready with "t"; node 1's rank dies before it submits.
  std::vector<float> a(100000, 1.0f), c(100000, 1.0f);
  auto on0 = job.allreduce(0, "t", a);
  auto on2 = job.allreduce(2, "t", c);
  job.io.run_for(50ms);
  const Status why = Status::PeerLost("rank 1 of job 'j' (node 1) died");
  job.nodes[1].ring->rank_left(1, why);
  REQUIRE(job.run_until([&] { return on0->status && on2->status; }));
  CHECK(on0->status->message() == why.message());
  CHECK(on2->status->message() == why.message());
  for (auto& n : job.nodes) {
    CHECK(n.ring->broken());
    REQUIRE(n.losses.size() == 1);
    CHECK(n.losses[0].message() == why.message());
  }
  // Later tensors fail at once with the same words.
  std::vector<float> late(4, 1.0f);
  auto after = job.allreduce(2, "late", late);
  REQUIRE(after->status.has_value());
  CHECK(after->status->message() == why.message());
  // Every node's ranks go: node 0 closes the ring quietly, everywhere.
  for (auto& n : job.nodes) n.ring->set_local_ranks(0);
  REQUIRE(job.run_until([&] {
    for (auto& n : job.nodes)
      if (!n.finished) return false;
    return true;
  }));
  for (auto& n : job.nodes) CHECK(n.losses.size() == 1);  // a quiet close is no loss
}

TEST_CASE("job ring: a node that shuts down is named by every other node, which fails what waits") {
  Job job(3);
  REQUIRE(job.run_until([&] { return job.formed(); }));
  std::vector<float> a(100000, 1.0f), b(100000, 1.0f);
  auto on0 = job.allreduce(0, "t", a);
  auto on1 = job.allreduce(1, "t", b);
  job.io.run_for(50ms);
  job.nodes[2].ring->stop(Status::Closed("shutting down"), Status::Closed("node 2 of job 'j' shut down"));
  REQUIRE(job.run_until([&] { return on0->status && on1->status; }));
  for (auto* o : {on0.get(), on1.get()}) {
    CHECK(o->status->code() == StatusCode::kPeerLost);
    CHECK_MESSAGE(o->status->message() == "node 2 of job 'j' shut down", o->status->message());
  }
  CHECK(job.nodes[0].losses.size() == 1);
  CHECK(job.nodes[1].losses.size() == 1);
}

TEST_CASE("job ring: GPU buffers are staged chunk by chunk while the ring runs, on 2 and 3 nodes") {
  for (int n : {2, 3}) {
    CAPTURE(n);
    Job job(n);
    test::HostDeviceBackend backend;
    REQUIRE(job.run_until([&] { return job.formed(); }));
    // Odd, and past DeviceStaging::kPipelinedBytes.
    const std::size_t count = device::DeviceStaging::kPipelinedBytes / sizeof(float) + 12345;
    std::vector<std::vector<float>> data;
    for (int i = 0; i < n; ++i) {
      data.emplace_back(count);
      for (std::size_t k = 0; k < count; ++k) data[i][k] = static_cast<float>((k % 17) * (i + 1));
    }
    std::vector<std::shared_ptr<Outcome>> outcomes;
    for (int i = 0; i < n; ++i) outcomes.push_back(job.device_allreduce(i, "g", data[i], backend));
    REQUIRE(job.run_until([&] {
      for (auto& o : outcomes)
        if (!o->status) return false;
      return true;
    }));
    const float scale = static_cast<float>(n * (n + 1) / 2);
    for (int i = 0; i < n; ++i) {
      CAPTURE(i);
      CHECK_MESSAGE(outcomes[i]->status->ok(), outcomes[i]->status->message());
      bool right = true;
      for (std::size_t k = 0; k < count && right; ++k) right = data[i][k] == static_cast<float>(k % 17) * scale;
      CHECK(right);
    }
    // Each node took a copy engine and never copied its buffer whole.
    CHECK(backend.log.copiers == n);
    CHECK(backend.log.to_host == 0);
    CHECK(backend.log.to_device == 0);
  }
}

TEST_CASE("job ring: GPU tensors fused with others are copied in whole first, and still sum right") {
  Job job(2, fused_settings());
  test::HostDeviceBackend backend;
  REQUIRE(job.run_until([&] { return job.formed(); }));
  auto [a, b] = fused_pair();
  // Both ready on both nodes before the plan is made: fused into one operation.
  std::vector<std::shared_ptr<Outcome>> outcomes;
  for (int i = 0; i < 2; ++i) {
    outcomes.push_back(job.device_allreduce(i, "a", a[i], backend));
    outcomes.push_back(job.device_allreduce(i, "b", b[i], backend));
  }
  REQUIRE(job.run_until([&] {
    for (auto& o : outcomes)
      if (!o->status) return false;
    return true;
  }));
  for (auto& o : outcomes) CHECK_MESSAGE(o->status->ok(), o->status->message());
  for (int i = 0; i < 2; ++i) {
    CHECK(std::all_of(a[i].begin(), a[i].end(), [](float x) { return x == 3.0f; }));
    CHECK(std::all_of(b[i].begin(), b[i].end(), [](float x) { return x == 30.0f; }));
  }
  // Fused: every tensor was copied in whole and back whole (staged alone, a tensor
  // is copied chunk by chunk and never whole).
  CHECK(backend.log.to_host == 4);
  CHECK(backend.log.to_device == 4);
}

TEST_CASE("job ring: a fused GPU tensor whose copy back to the GPU fails fails alone") {
  Job job(2, fused_settings());
  test::HostDeviceBackend gpu0, gpu1;  // one "GPU" per node
  REQUIRE(job.run_until([&] { return job.formed(); }));
  auto [a, b] = fused_pair();
  // Node 1's queued device work: the two whole copies in, then the two copies
  // back; the first copy back fails.
  gpu1.fail_operation(3);
  auto a0 = job.device_allreduce(0, "a", a[0], gpu0);
  auto b0 = job.device_allreduce(0, "b", b[0], gpu0);
  auto a1 = job.device_allreduce(1, "a", a[1], gpu1);
  auto b1 = job.device_allreduce(1, "b", b[1], gpu1);
  REQUIRE(job.run_until([&] { return a0->status && b0->status && a1->status && b1->status; }));
  REQUIRE(gpu1.log.to_host == 2);  // fused: filled whole
  CHECK(gpu1.log.to_device == 2);  // both copies back were tried
  // Node 0 got both results.
  CHECK_MESSAGE(a0->status->ok(), a0->status->message());
  CHECK_MESSAGE(b0->status->ok(), b0->status->message());
  CHECK(std::all_of(a[0].begin(), a[0].end(), [](float x) { return x == 3.0f; }));
  CHECK(std::all_of(b[0].begin(), b[0].end(), [](float x) { return x == 30.0f; }));
  // On node 1 exactly one failed, with the device's words; the other has its result.
  const bool a_failed = !a1->status->ok();
  CHECK(a_failed != !b1->status->ok());
  const Status& failed = a_failed ? *a1->status : *b1->status;
  CHECK_MESSAGE(failed.message().find("injected device failure") != std::string::npos, failed.message());
  const std::vector<float>& kept = a_failed ? b[1] : a[1];
  const float want = a_failed ? 30.0f : 3.0f;
  CHECK(std::all_of(kept.begin(), kept.end(), [&](float x) { return x == want; }));
  // The ring stands: the next allreduce goes through on both nodes.
  std::vector<float> c0(100, 1.0f), c1(100, 2.0f);
  auto next0 = job.allreduce(0, "c", c0);
  auto next1 = job.allreduce(1, "c", c1);
  REQUIRE(job.run_until([&] { return next0->status && next1->status; }));
  CHECK_MESSAGE(next0->status->ok(), next0->status->message());
  CHECK(c1.front() == 3.0f);
}

TEST_CASE("job ring: a data-plane message lost: the progress deadline fails the allreduce on every node, naming the peer") {
  ClusterConfig c = settings();
  c.progress_timeout = 300ms;
  Job job(2, c, /*drop_node=*/1);
  REQUIRE(job.run_until([&] { return job.formed(); }));
  // 100000 floats go around the ring; node 1's first message never arrives.
  std::vector<std::vector<float>> data;
  for (int n = 0; n < 2; ++n) data.emplace_back(100000, static_cast<float>(n + 1));
  std::vector<std::shared_ptr<Outcome>> outcomes;
  for (int n = 0; n < 2; ++n) outcomes.push_back(job.allreduce(n, "lost", data[n]));
  bool seen_waiting = false;
  REQUIRE(job.run_until([&] {
    for (auto& n : job.nodes) {
      const auto now = Clock::now();
      for (const auto& op : n.ring->in_flight(now).operations)
        if (op.waiting && op.phase == "data plane") seen_waiting = true;
      n.ring->sweep(now, 10s, 30s);
    }
    return outcomes[0]->status && outcomes[1]->status;
  }));
  CHECK(seen_waiting);  // the view named what it waited for before the deadline
  for (int n = 0; n < 2; ++n) {
    const Status& s = *outcomes[n]->status;
    CHECK_MESSAGE(s.code() == StatusCode::kTimeout, s.to_string());
    CHECK_MESSAGE(s.message().find("moved no data for ") != std::string::npos, s.to_string());
    CHECK_MESSAGE(s.message().find("(--progress-timeout): node ") != std::string::npos, s.to_string());
    CHECK_MESSAGE(s.message().find(" waits in its ring, step ") != std::string::npos, s.to_string());
  }
  // Every node's ring ended with the deadline (a job its trainers described
  // gets its next ring with its next run), counted as a timeout.
  for (auto& n : job.nodes) {
    REQUIRE_FALSE(n.losses.empty());
    CHECK(n.losses.back().code() == StatusCode::kTimeout);
  }
  CHECK_FALSE(job.formed());
}

}  // namespace test_service_cluster_job_ring
