// Every collective kind across the nodes of whole job rings in one process
// (job_ring_harness.h): N nodes of L local ranks, every dtype and op, in and
// out of place, counts that take every path between the nodes (direct
// exchange, inline, direct, halving-doubling, ring with uneven segments), each
// rank's result checked against a reference. The daemons' processes would
// add the client's side only, which integration.test_collectives covers.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/half.h"
#include "common/reduce.h"
#include "service/cluster/job_ring_harness.h"

namespace test_service_cluster_job_ring_collectives {

using namespace ringsync;
using namespace ringsync::service;
using namespace ringsync::test::job_ring;
using wire::CollectiveKind;

namespace {

// Global rank g's input: values whose every partial sum or product is exact in
// the element type (f16 and bf16 too), so a ring that rounds at each step
// matches the one-shot reference bit for bit.
std::vector<std::byte> input(std::size_t g, std::size_t count, DType dtype, ReduceOp op, std::uint32_t salt) {
  std::mt19937 rng(static_cast<std::uint32_t>(g * 7919 + count * 31 + salt));
  std::vector<std::byte> out(count * dtype_size(dtype));
  const bool prod = op == ReduceOp::kProd;
  const bool half = dtype == DType::kF16 || dtype == DType::kBF16;
  for (std::size_t i = 0; i < count; ++i) {
    const int small = prod ? static_cast<int>(rng() % (half ? 2 : 3)) + 1
                           : (half ? static_cast<int>(rng() % 32) - 16 : static_cast<int>(rng() % 200) - 100);
    const float f = prod ? static_cast<float>(small) : static_cast<float>(small) / 8.0f;
    std::byte* p = out.data() + i * dtype_size(dtype);
    switch (dtype) {
      case DType::kF32: std::memcpy(p, &f, 4); break;
      case DType::kF64: { const double d = f; std::memcpy(p, &d, 8); break; }
      case DType::kF16: { const std::uint16_t h = f32_to_f16(f); std::memcpy(p, &h, 2); break; }
      case DType::kBF16: { const std::uint16_t h = f32_to_bf16(f); std::memcpy(p, &h, 2); break; }
      case DType::kI32: { const std::int32_t v = small; std::memcpy(p, &v, 4); break; }
      case DType::kI64: { const std::int64_t v = small * 1000003LL; std::memcpy(p, &v, 8); break; }
      case DType::kU8: { const auto v = static_cast<std::uint8_t>(small); std::memcpy(p, &v, 1); break; }
    }
  }
  return out;
}

struct Case {
  CollectiveKind kind = CollectiveKind::kAllreduce;
  DType dtype = DType::kF32;
  ReduceOp op = ReduceOp::kSum;
  std::size_t count = 0;   // as each rank's call passes it
  std::uint32_t root = 0;  // the rooted kinds: a global rank
  bool in_place = false;   // allreduce, reduce, allgather and gather
};

std::string describe(const Case& c) {
  return std::string(wire::collective_kind_name(c.kind)) + "." + std::string(dtype_name(c.dtype)) + "." +
         std::string(reduce_op_name(c.op)) + "." + std::to_string(c.count) + ".root" + std::to_string(c.root) +
         (c.in_place ? ".inplace" : "");
}

// What every global rank's receive buffer holds after `c` over `inputs`.
std::vector<std::vector<std::byte>> expected(const Case& c, const std::vector<std::vector<std::byte>>& inputs) {
  const std::size_t ranks = inputs.size(), elem = dtype_size(c.dtype), block = c.count * elem;
  std::vector<std::vector<std::byte>> out(ranks);
  std::vector<const void*> srcs;
  for (const auto& in : inputs) srcs.push_back(in.data());
  switch (c.kind) {
    case CollectiveKind::kAllreduce: {
      std::vector<std::byte> sum(block);
      reduce::reduce_reference(sum.data(), srcs.data(), ranks, c.count, c.dtype, c.op);
      for (auto& o : out) o = sum;
      break;
    }
    case CollectiveKind::kBroadcast:
      for (auto& o : out) o = inputs[c.root];
      break;
    case CollectiveKind::kAllgather:
      for (auto& o : out)
        for (const auto& in : inputs) o.insert(o.end(), in.begin(), in.end());
      break;
    case CollectiveKind::kReduceScatter: {
      std::vector<std::byte> sum(block * ranks);
      reduce::reduce_reference(sum.data(), srcs.data(), ranks, c.count * ranks, c.dtype, c.op);
      for (std::size_t g = 0; g < ranks; ++g) out[g].assign(sum.begin() + g * block, sum.begin() + (g + 1) * block);
      break;
    }
    case CollectiveKind::kAlltoall:
      for (std::size_t to = 0; to < ranks; ++to)
        for (std::size_t from = 0; from < ranks; ++from)
          out[to].insert(out[to].end(), inputs[from].begin() + to * block, inputs[from].begin() + (to + 1) * block);
      break;
    case CollectiveKind::kBarrier: break;
    case CollectiveKind::kReduce:
      out[c.root].resize(block);
      reduce::reduce_reference(out[c.root].data(), srcs.data(), ranks, c.count, c.dtype, c.op);
      break;
    case CollectiveKind::kGather:
      for (const auto& in : inputs) out[c.root].insert(out[c.root].end(), in.begin(), in.end());
      break;
    case CollectiveKind::kScatter:
      for (std::size_t g = 0; g < ranks; ++g)
        out[g].assign(inputs[c.root].begin() + g * block, inputs[c.root].begin() + (g + 1) * block);
      break;
  }
  return out;
}

// Runs `c` on every rank of `job` (its nodes of `slots` ranks each) and checks
// every rank's answer and result; `salt` varies the inputs.
void run(Job& job, std::uint32_t slots, const Case& c, std::uint32_t salt) {
  CAPTURE(describe(c));
  const std::size_t nodes = job.nodes.size(), ranks = nodes * slots, elem = dtype_size(c.dtype);
  const wire::Extent extent = wire::extent(c.kind, c.count, ranks);
  std::vector<std::vector<std::byte>> inputs, outputs;
  for (std::size_t g = 0; g < ranks; ++g) inputs.push_back(input(g, extent.send, c.dtype, c.op, salt));
  auto want = expected(c, inputs);
  // In place: the input is the result's buffer (allreduce, reduce), or this
  // rank's slot of it (allgather, gather).
  const bool whole_in_place =
      c.in_place && (c.kind == CollectiveKind::kAllreduce || c.kind == CollectiveKind::kReduce);
  const bool slot_in_place =
      c.in_place && (c.kind == CollectiveKind::kAllgather || c.kind == CollectiveKind::kGather);
  for (std::size_t g = 0; g < ranks; ++g) {
    std::vector<std::byte> buffer(extent.recv * elem, std::byte{0xab});
    if (whole_in_place) buffer = inputs[g];
    if (slot_in_place)
      std::copy(inputs[g].begin(), inputs[g].end(), buffer.begin() + static_cast<std::ptrdiff_t>(g * c.count * elem));
    // A rank whose output the collective does not write (a non-root's reduce
    // or gather) passes none, and its buffer stays as it was.
    if (!wire::writes_recv(c.kind, g, c.root)) want[g] = buffer;
    outputs.push_back(std::move(buffer));
  }
  const std::string name = describe(c) + "." + std::to_string(salt);
  std::vector<std::optional<Status>> answers(ranks);
  for (std::size_t n = 0; n < nodes; ++n) {
    local::PendingCollective p;
    p.name = name;
    p.job_id = "j";
    p.present.assign(slots, true);
    p.first_submit = Clock::now();
    for (std::uint32_t r = 0; r < slots; ++r) {
      const std::size_t g = n * slots + r;
      local::Submission s;
      s.local_rank = r;
      s.request.kind = c.kind;
      s.request.name = name;
      s.request.dtype = c.dtype;
      s.request.op = c.op;
      s.request.count = c.count;
      s.request.root = c.root;
      const std::byte* send = inputs[g].data();
      if (whole_in_place) send = outputs[g].data();
      if (slot_in_place) send = outputs[g].data() + g * c.count * elem;
      // As the daemon resolves them: a buffer the rank's part does not use is null.
      if (!wire::reads_send(c.kind, g, c.root)) send = nullptr;
      std::byte* recv = wire::writes_recv(c.kind, g, c.root) ? outputs[g].data() : nullptr;
      s.where = collective::Contribution{send, recv};
      s.submitted = Clock::now();
      s.complete = [&answers, g](const Status& status) { answers[g] = status; };
      p.submissions.push_back(std::move(s));
    }
    job.submit(static_cast<int>(n), std::move(p));
  }
  REQUIRE(job.run_until(
      [&] {
        for (const auto& a : answers)
          if (!a) return false;
        return true;
      },
      60s));
  for (std::size_t g = 0; g < ranks; ++g) {
    CAPTURE(g);
    CHECK_MESSAGE(answers[g]->ok(), answers[g]->message());
    CHECK(outputs[g] == want[g]);
  }
}

// Reduce, gather and scatter at `count`, with roots on every node (the first
// local rank of each, and the job's last rank), in place and not; reduce with
// every op and a sample of dtypes.
void rooted_collectives(Job& job, std::uint32_t slots, std::size_t count, std::uint32_t& salt) {
  const std::uint32_t ranks = static_cast<std::uint32_t>(job.nodes.size()) * slots;
  const bool large = count > (1u << 16);
  std::vector<std::uint32_t> roots;
  for (std::uint32_t root = 0; root < ranks; root += slots) roots.push_back(root);
  if (slots > 1) roots.push_back(ranks - 1);
  for (int o = 0; o < kNumReduceOps; ++o) {
    const auto dtype = static_cast<DType>((o * 3) % kNumDTypes);
    const std::uint32_t root = roots[static_cast<std::size_t>(o) % roots.size()];
    run(job, slots, {CollectiveKind::kReduce, dtype, static_cast<ReduceOp>(o), count, root, o % 2 == 0}, ++salt);
  }
  const std::size_t per_rank = large ? count / ranks + 1 : count;
  for (std::size_t i = 0; i < roots.size(); ++i) {
    run(job, slots, {CollectiveKind::kGather, i % 2 ? DType::kF16 : DType::kI64, ReduceOp::kSum, per_rank, roots[i], i % 2 == 0},
        ++salt);
    run(job, slots, {CollectiveKind::kScatter, i % 2 ? DType::kU8 : DType::kF32, ReduceOp::kSum, per_rank, roots[i], false},
        ++salt);
  }
}

// Every kind, every dtype with every op it takes, at `count`; past 64K
// elements a sample that still covers every dtype and every op.
void every_collective(Job& job, std::uint32_t slots, std::size_t count, std::uint32_t& salt) {
  const std::uint32_t ranks = static_cast<std::uint32_t>(job.nodes.size()) * slots;
  const bool large = count > (1u << 16);
  for (int t = 0; t < kNumDTypes; ++t) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      const auto dtype = static_cast<DType>(t);
      const auto op = static_cast<ReduceOp>(o);
      if (!large || (t + 2 * o) % 5 == 0)
        run(job, slots, {CollectiveKind::kAllreduce, dtype, op, count, 0, (t + o) % 2 == 0}, ++salt);
      // Reduce-scatter's input is count per rank: large counts are divided among them.
      const std::size_t per_rank = large ? count / ranks + 1 : count;
      if ((t + 2 * o) % (large ? 11 : 3) == 0)
        run(job, slots, {CollectiveKind::kReduceScatter, dtype, op, per_rank, 0, false}, ++salt);
    }
  }
  // Roots on every node (the first rank of each, and the last rank).
  for (std::uint32_t root = 0; root < ranks; root += slots)
    run(job, slots, {CollectiveKind::kBroadcast, DType::kI32, ReduceOp::kSum, count, root, false}, ++salt);
  run(job, slots, {CollectiveKind::kBroadcast, DType::kF16, ReduceOp::kSum, count, ranks - 1, false}, ++salt);
  run(job, slots, {CollectiveKind::kAllgather, DType::kI64, ReduceOp::kSum, count, 0, false}, ++salt);
  run(job, slots, {CollectiveKind::kAllgather, DType::kU8, ReduceOp::kSum, count, 0, true}, ++salt);
  const std::size_t per_rank = large ? count / ranks + 1 : count;
  run(job, slots, {CollectiveKind::kAlltoall, DType::kF32, ReduceOp::kSum, per_rank, 0, false}, ++salt);
  run(job, slots, {CollectiveKind::kBarrier, DType::kF32, ReduceOp::kSum, 0, 0, false}, ++salt);
  rooted_collectives(job, slots, count, salt);
}

// The harness's settings, with the daemon's peer timeout: the nodes share the
// test's thread, which computes the references between collectives.
ClusterConfig quiet_settings() {
  ClusterConfig c = settings();
  c.heartbeat_interval = 500ms;
  c.peer_timeout = 5s;
  return c;
}

// The daemon's defaults, with limits small enough that the counts below take
// every path: 32 KiB inline (direct exchange up to 32 KiB x 2/(N(N-1)), the
// plan up to x 2/N), the direct algorithm up to 64 KiB, halving-doubling to 1 MiB.
ClusterConfig every_path() {
  ClusterConfig c = quiet_settings();
  c.ring.routes = *route::data_routes("auto", 64 * 1024, 1024 * 1024);
  return c;
}

double counted(metrics::CounterFamily& family, std::string_view label) { return family.with({label}).value(); }

}  // namespace

TEST_CASE("job ring collectives: 2 nodes x 2 ranks, every kind, dtype and op, through every path") {
  Job job(2, every_path(), -1, 2);
  REQUIRE(job.run_until([&] { return job.formed(); }));
  std::uint32_t salt = 0;
  // 1 and 1001 f32 are exchanged directly, 5001 answered with the plan at 3
  // nodes (directly at 2), 10001 take the direct algorithm, 100003
  // halving-doubling, 300001 (odd: uneven segments) the ring.
  for (std::size_t count : {std::size_t{1}, std::size_t{3}, std::size_t{1001}, std::size_t{10001},
                            std::size_t{100003}, std::size_t{300001}})
    every_collective(job, 2, count, salt);
  CHECK(counted(job.metrics.inline_operations, "direct") > 0);
  CHECK(counted(job.metrics.data_operations, "direct") > 0);
  CHECK(counted(job.metrics.data_operations, "halving-doubling") > 0);
  CHECK(counted(job.metrics.data_operations, "ring") > 0);
}

TEST_CASE("job ring collectives: 3 nodes x 2 ranks, every kind, dtype and op, through every path") {
  Job job(3, every_path(), -1, 2);
  REQUIRE(job.run_until([&] { return job.formed(); }));
  std::uint32_t salt = 100;
  for (std::size_t count : {std::size_t{1}, std::size_t{1001}, std::size_t{5001}, std::size_t{100003},
                            std::size_t{300001}})
    every_collective(job, 2, count, salt);
  CHECK(counted(job.metrics.inline_operations, "direct") > 0);
  CHECK(counted(job.metrics.inline_operations, "plan") > 0);
  // 3 nodes, auto: the direct algorithm up to --rhd-max-bytes (halving-doubling would fold).
  CHECK(counted(job.metrics.data_operations, "direct") > 0);
  CHECK(counted(job.metrics.data_operations, "halving-doubling") == 0);
  CHECK(counted(job.metrics.data_operations, "ring") > 0);
}

TEST_CASE("job ring collectives: 3 nodes x 1 rank, every allreduce around the ring (one local input, read where it lies)") {
  ClusterConfig c = quiet_settings();
  c.ring.inline_bytes = 0;  // every allreduce goes around the ring
  Job job(3, c, -1, 1);
  REQUIRE(job.run_until([&] { return job.formed(); }));
  std::uint32_t salt = 200;
  for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{262147}})
    every_collective(job, 1, count, salt);
  CHECK(counted(job.metrics.inline_operations, "direct") == 0);
  CHECK(counted(job.metrics.data_operations, "ring") > 0);
}

TEST_CASE("job ring collectives: 3 nodes x 2 ranks by halving-doubling (folding) or the direct algorithm, results compared") {
  // 3 nodes is not a power of two: halving-doubling folds node 1 into node 0
  // and sends it the result back; the direct algorithm has each node reduce a
  // third. Every shared result is also compared across the nodes
  // (--verify-results all, the linear sums of integer sums too).
  struct Routes {
    const char* algorithm;
    const char* label;
  };
  std::uint32_t salt = 300;
  for (const Routes& r : {Routes{"rhd", "halving-doubling"}, Routes{"direct", "direct"}}) {
    CAPTURE(r.algorithm);
    ClusterConfig c = quiet_settings();
    c.ring.inline_bytes = 0;
    c.ring.routes = *route::data_routes(r.algorithm, 0, 0);
    c.ring.verify_results = integrity::VerifyResults::kAll;
    Job job(3, c, -1, 2);
    REQUIRE(job.run_until([&] { return job.formed(); }));
    for (std::size_t count : {std::size_t{1}, std::size_t{7}, std::size_t{4000}, std::size_t{100003}})
      every_collective(job, 2, count, salt);
    CHECK(counted(job.metrics.data_operations, r.label) > 0);
    CHECK(job.metrics.integrity_failures.with({"j"}).value() == 0);
  }
}

}  // namespace test_service_cluster_job_ring_collectives
