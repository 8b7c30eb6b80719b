// ringsync-test-rank: one trainer rank for the integration tests, driven by a
// scenario name. Local rank, local size, socket and job come from the
// environment, as for any trainer; the global rank and size from the daemon.
// Exit code 0 means every check passed; failures are printed; the other codes
// are rank_exit:: in cluster_fixture.h. Every wait is bounded, so a rank whose
// peers never answer exits on its own.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "common/dtype.h"
#include "rank_checks.h"
#include "ringsync/ringsync.h"

namespace {

namespace rank_exit = ringsync::test::rank_exit;
using namespace ringsync::test::rank;

std::string g_mark_id;  // names this rank's marks: $RINGSYNC_TEST_ID (or $RINGSYNC_RANK) as the test knows it, else g_rank

// Touches RINGSYNC_TEST_MARK_DIR/<name>.<rank> so the test knows where we are.
void mark(const char* name) {
  const char* dir = std::getenv("RINGSYNC_TEST_MARK_DIR");
  if (!dir) return;
  const std::string path = std::string(dir) + "/" + name + "." + g_mark_id;
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) ::close(fd);
}

rs_context_t* connect_or_die() {
  rs_config_t cfg;
  rs_config_init(&cfg);
  rs_context_t* ctx = nullptr;
  rs_status_t s = rs_connect(&cfg, &ctx);
  if (s != RS_SUCCESS) {
    std::fprintf(stderr, "rank %d: connect failed: %s: %s\n", g_rank, rs_status_string(s),
                 rs_last_error());
    std::exit(rank_exit::kConnectFailed);
  }
  return ctx;
}

rs_status_t barrier(rs_context_t* ctx, const std::string& name) {
  rs_request_t* req = nullptr;
  return finish(rs_barrier_async(ctx, name.c_str(), &req), &req, name.c_str());
}

// Every collective, every dtype x op, zero-copy and staged, for the given counts.
// Counts past kLargeCount get a sample of dtype x op pairs that still covers
// every dtype and op once, to keep a run of several ranks short.
void scenario_collectives(rs_context_t* ctx, const std::vector<std::size_t>& counts) {
  constexpr std::size_t kLargeCount = 1 << 16;
  for (std::size_t count : counts) {
    const bool large = count > kLargeCount;
    for (bool shared : {true, false}) {
      for (int t = 0; t < ringsync::kNumDTypes; ++t)
        for (int o = 0; o < ringsync::kNumReduceOps; ++o)
          if (!large || (t + 2 * o + (shared ? 0 : 1)) % 5 == 0)
            check_allreduce(ctx, shared, count, static_cast<ringsync::DType>(t),
                            static_cast<ringsync::ReduceOp>(o), (t + o) % 2 == 0);
      // Roots spread over the ranks, so across nodes some root is on another node.
      for (int root = 0; root < g_size; root += std::max(1, g_size / 3))
        if (!large || root == g_size - 1) check_broadcast(ctx, shared, count, root);
      check_allgather(ctx, shared, count, false);
      if (!large) check_allgather(ctx, shared, count, true);
      // Reduce-scatter and alltoall inputs hold count per rank: a large count
      // is divided among the ranks, so that the whole stays about as large.
      const std::size_t per_rank = large ? count / static_cast<std::size_t>(g_size) + 1 : count;
      for (int t = 0; t < ringsync::kNumDTypes; ++t)
        for (int o = 0; o < ringsync::kNumReduceOps; ++o)
          if ((t + 2 * o + (shared ? 0 : 1)) % (large ? 11 : 3) == 0)
            check_reduce_scatter(ctx, shared, per_rank, static_cast<ringsync::DType>(t),
                                 static_cast<ringsync::ReduceOp>(o));
      check_alltoall(ctx, shared, per_rank);
      // Rooted: roots spread over the ranks (across nodes, some on another
      // node); a large count once, to the last rank.
      if (large && !shared) continue;
      for (int root = shared ? 0 : g_size - 1; root >= 0 && root < g_size; root += shared ? 2 : -2) {
        if (large) root = g_size - 1;
        check_reduce(ctx, shared, count, static_cast<ringsync::DType>((root * 3) % ringsync::kNumDTypes),
                     static_cast<ringsync::ReduceOp>(root % ringsync::kNumReduceOps), root);
        if (large) break;
      }
      check_gather(ctx, shared, per_rank, shared ? 0 : g_size - 1);
      check_scatter(ctx, shared, per_rank, shared ? g_size - 1 : 0);
    }
    expect_ok(barrier(ctx, "barrier." + std::to_string(count)), "barrier");
  }
}

// The soak (test_soak.cpp): random collectives, the same sequence on every
// rank (seeded alike), every kind, dtype and op, sizes log-uniform from 1 B to
// max_bytes (crossing every route: inline, direct exchange, halving-doubling,
// ring), every result checked; each must end within `bound` seconds or the
// rank exits with kStillWaiting. Runs until `seconds` pass on some rank: a
// one-int allreduce after each collective tells every rank to stop alike.
int scenario_soak(rs_context_t* ctx, std::uint64_t seed, int seconds, std::size_t max_bytes, int bound) {
  std::mt19937_64 rng(seed);
  const auto stop_at = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
  // By the draw: allreduce (0-2), broadcast, allgather, reduce-scatter, alltoall, barrier, reduce, gather, scatter.
  constexpr int kDraws = 11;
  int done[kDraws] = {};
  long collectives = 0;
  for (bool stop = false; !stop && g_failures == 0;) {
    g_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(bound);
    const int kind = static_cast<int>(rng() % kDraws);
    const auto dtype = static_cast<ringsync::DType>(rng() % ringsync::kNumDTypes);
    const auto op = static_cast<ringsync::ReduceOp>(rng() % ringsync::kNumReduceOps);
    const double exponent = std::uniform_real_distribution<double>(0, std::log(static_cast<double>(max_bytes)))(rng);
    const std::size_t bytes = static_cast<std::size_t>(std::exp(exponent));
    const bool shared = rng() % 2 == 0;
    const bool in_place = rng() % 2 == 0;
    const int root = static_cast<int>(rng() % static_cast<std::uint64_t>(g_size));
    const auto count = [&](std::size_t element) { return std::max<std::size_t>(1, bytes / element); };
    switch (kind) {
      case 0: case 1: case 2:
        check_allreduce(ctx, shared, count(ringsync::dtype_size(dtype)), dtype, op, in_place);
        break;
      case 3: check_broadcast(ctx, shared, count(4), root); break;
      case 4: check_allgather(ctx, shared, count(8 * static_cast<std::size_t>(g_size)), in_place); break;
      case 5:
        check_reduce_scatter(ctx, shared, count(ringsync::dtype_size(dtype) * static_cast<std::size_t>(g_size)), dtype, op);
        break;
      case 6: check_alltoall(ctx, shared, count(4 * static_cast<std::size_t>(g_size))); break;
      case 8: check_reduce(ctx, shared, count(ringsync::dtype_size(dtype)), dtype, op, root); break;
      case 9: check_gather(ctx, shared, count(8 * static_cast<std::size_t>(g_size)), root); break;
      case 10: check_scatter(ctx, shared, count(4 * static_cast<std::size_t>(g_size)), root); break;
      default: expect_ok(barrier(ctx, "soak.barrier"), "soak.barrier"); break;
    }
    ++done[kind];
    ++collectives;
    std::int32_t over = std::chrono::steady_clock::now() > stop_at ? 1 : 0;
    rs_request_t* req = nullptr;
    expect_ok(finish(rs_allreduce_async(ctx, "soak.stop", &over, &over, 1, RS_I32, RS_SUM, &req), &req, "soak.stop"),
              "soak.stop");
    stop = over > 0;
    if (collectives == 1) mark("looping");
  }
  std::printf("rank %d: soak seed %llu: %ld collectives checked (%d allreduce, %d broadcast, %d allgather, "
              "%d reduce-scatter, %d alltoall, %d barrier, %d reduce, %d gather, %d scatter)\n",
              g_rank, static_cast<unsigned long long>(seed), collectives, done[0] + done[1] + done[2], done[3],
              done[4], done[5], done[6], done[7], done[8], done[9], done[10]);
  return 0;
}

// Async submission of several tensors in rank-dependent order, waited out of order.
void scenario_async(rs_context_t* ctx) {
  constexpr int kTensors = 6;
  std::vector<std::vector<float>> data(kTensors);
  std::vector<rs_request_t*> requests(kTensors, nullptr);
  for (int k = 0; k < kTensors; ++k) data[k].assign(1000 + k * 37, static_cast<float>(g_rank + k));
  for (int i = 0; i < kTensors; ++i) {
    const int k = (i + g_rank) % kTensors;  // every rank submits in another order
    const std::string name = "async." + std::to_string(k);
    expect_ok(rs_allreduce_async(ctx, name.c_str(), data[k].data(), data[k].data(), data[k].size(),
                                 RS_F32, RS_SUM, &requests[k]),
              name.c_str());
  }
  for (int k = kTensors - 1; k >= 0; --k) {
    rs_status_t s;
    while ((s = rs_test(requests[k])) == RS_IN_PROGRESS) {
      if (std::chrono::steady_clock::now() > g_deadline) {
        std::fprintf(stderr, "rank %d: async tensor %d still pending at the deadline\n", g_rank, k);
        std::exit(rank_exit::kStillWaiting);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    expect_ok(s, "rs_test");
    float expected = 0;
    for (int r = 0; r < g_size; ++r) expected += static_cast<float>(r + k);
    EXPECT(data[k].front() == expected && data[k].back() == expected, "async tensor %d", k);
  }
}

// `tensors` small allreduces submitted back to back, then waited: the daemons
// can fuse them into few ring operations. The barrier first lines the ranks up
// so every node reports the tensors in the same few negotiation cycles.
void scenario_fusion(rs_context_t* ctx, int tensors) {
  expect_ok(barrier(ctx, "fusion.start"), "fusion.start");
  std::vector<std::vector<float>> data(tensors);
  std::vector<rs_request_t*> requests(tensors, nullptr);
  for (int k = 0; k < tensors; ++k) {
    data[k].assign(16 + k % 7, static_cast<float>(g_rank + k));
    const std::string name = "fuse." + std::to_string(k);
    expect_ok(rs_allreduce_async(ctx, name.c_str(), data[k].data(), data[k].data(), data[k].size(),
                                 RS_F32, RS_SUM, &requests[k]),
              name.c_str());
  }
  for (int k = 0; k < tensors; ++k) {
    const std::string name = "fuse." + std::to_string(k);
    expect_ok(finish(RS_SUCCESS, &requests[k], name.c_str()), name.c_str());
    float expected = 0;
    for (int r = 0; r < g_size; ++r) expected += static_cast<float>(r + k);
    for (float v : data[k]) {
      if (v == expected) continue;
      EXPECT(false, "%s: got %g, wanted %g", name.c_str(), v, expected);
      break;
    }
  }
  expect_ok(barrier(ctx, "fusion.end"), "fusion.end");
}

// The same step — `tensors` allreduces with the same names and shapes — `steps`
// times: from the second step on the daemons can announce them as cache bits.
void scenario_repeat(rs_context_t* ctx, int steps, int tensors) {
  for (int step = 0; step < steps; ++step) {
    std::vector<std::vector<std::int32_t>> data(tensors);
    std::vector<rs_request_t*> requests(tensors, nullptr);
    for (int k = 0; k < tensors; ++k) {
      data[k].assign(100 + k, g_rank * 1000 + step * 10 + k);
      const std::string name = "step.grad" + std::to_string(k);
      expect_ok(rs_allreduce_async(ctx, name.c_str(), data[k].data(), data[k].data(),
                                   data[k].size(), RS_I32, RS_SUM, &requests[k]),
                name.c_str());
    }
    for (int k = 0; k < tensors; ++k) {
      expect_ok(finish(RS_SUCCESS, &requests[k], "step"), "step");
      std::int32_t expected = 0;
      for (int r = 0; r < g_size; ++r) expected += r * 1000 + step * 10 + k;
      EXPECT(data[k].front() == expected && data[k].back() == expected,
             "step %d tensor %d: got %d, wanted %d", step, k, data[k].front(), expected);
    }
    expect_ok(barrier(ctx, "step.end"), "step.end");
  }
}

// The ranks of node `odd_node` submit tensor 'mixed' with another count than
// everybody else: every rank gets a mismatch naming the tensor and the field,
// and the job goes on with the next tensors.
void scenario_node_mismatch(rs_context_t* ctx, int odd_node) {
  std::vector<float> buf(16, 1.0f);
  const std::size_t count = rs_node_rank(ctx) == odd_node ? 8 : 16;
  rs_request_t* req = nullptr;
  const rs_status_t s = finish(
      rs_allreduce_async(ctx, "mixed", buf.data(), buf.data(), count, RS_F32, RS_SUM, &req), &req,
      "mixed");
  const std::string text = rs_last_error();
  std::printf("rank %d: %s: %s\n", g_rank, rs_status_string(s), text.c_str());
  EXPECT(s == RS_MISMATCH, "got %s (%s), wanted mismatch", rs_status_string(s), text.c_str());
  EXPECT(text.find("'mixed'") != std::string::npos, "message '%s' does not name the tensor",
         text.c_str());
  EXPECT(text.find("count") != std::string::npos, "message '%s' does not name the field",
         text.c_str());
  // A reduce-scatter whose nodes disagree on the operator.
  std::vector<float> input(static_cast<std::size_t>(4 * g_size), 1.0f), output(4);
  const rs_op_t op = rs_node_rank(ctx) == odd_node ? RS_MAX : RS_SUM;
  const rs_status_t rs = finish(
      rs_reduce_scatter_async(ctx, "mixed.rs", input.data(), output.data(), 4, RS_F32, op, &req), &req, "mixed.rs");
  const std::string rs_text = rs_last_error();
  EXPECT(rs == RS_MISMATCH && rs_text.find("'mixed.rs'") != std::string::npos &&
             rs_text.find("op") != std::string::npos,
         "reduce-scatter: got %s (%s), wanted a mismatch naming the tensor and the op", rs_status_string(rs),
         rs_text.c_str());
  check_allreduce(ctx, false, 5, ringsync::DType::kI32, ringsync::ReduceOp::kSum, false);
  check_allreduce(ctx, true, 1001, ringsync::DType::kF32, ringsync::ReduceOp::kMax, false);
  expect_ok(barrier(ctx, "after.mismatch"), "after.mismatch");
}

// Exit code for a failed collective: was it the peer loss the test expects?
int classify(rs_status_t s, const std::string& expected_text) {
  const std::string text = rs_last_error();
  std::printf("rank %d: %s: %s\n", g_rank, rs_status_string(s), text.c_str());
  std::fflush(stdout);
  if (s != RS_PEER_LOST) return rank_exit::kOtherError;
  return text.find(expected_text) != std::string::npos ? rank_exit::kPeerLost
                                                       : rank_exit::kPeerLostUnnamed;
}

// Allreduce of `count` floats in a loop, each result checked, until an error or
// `seconds` pass. Marks "looping" after the first iteration, so the test can
// hurt a node while every rank is inside the loop. Exit: classify() on an error,
// kNoError when the time ran out without one.
int scenario_loop(rs_context_t* ctx, int seconds, const std::string& expected_text,
                  std::size_t count) {
  g_deadline =
      std::min(g_deadline, std::chrono::steady_clock::now() + std::chrono::seconds(seconds));
  std::vector<float> data(count);
  for (long iteration = 0;; ++iteration) {
    if (std::chrono::steady_clock::now() >= g_deadline) {
      std::printf("rank %d: %ld iterations, no error\n", g_rank, iteration);
      return rank_exit::kNoError;
    }
    const float mine = static_cast<float>(g_rank + iteration % 1000);
    std::fill(data.begin(), data.end(), mine);
    rs_request_t* req = nullptr;
    rs_status_t s =
        rs_allreduce_async(ctx, "loop", data.data(), data.data(), count, RS_F32, RS_SUM, &req);
    if (s == RS_SUCCESS) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          g_deadline - std::chrono::steady_clock::now());
      s = rs_wait_timeout(req, static_cast<int>(std::max<long long>(left.count(), 1)));
      if (s == RS_IN_PROGRESS) {
        std::printf("rank %d: iteration %ld still pending at the deadline\n", g_rank, iteration);
        return rank_exit::kStillWaiting;
      }
    }
    if (s != RS_SUCCESS) return classify(s, expected_text);
    float expected = 0;
    for (int r = 0; r < g_size; ++r) expected += static_cast<float>(r + iteration % 1000);
    if (data.front() != expected || data.back() != expected) {
      EXPECT(false, "iteration %ld: got %g, wanted %g", iteration, data.front(), expected);
      return 1;
    }
    if (iteration == 0) mark("looping");
  }
}

int expect_status(rs_status_t got, const char* want_name, const char* want_text) {
  const std::string text = rs_last_error();
  EXPECT(std::string(rs_status_string(got)) == want_name, "got %s (%s), wanted %s",
         rs_status_string(got), text.c_str(), want_name);
  EXPECT(text.find(want_text) != std::string::npos, "message '%s' lacks '%s'", text.c_str(),
         want_text);
  std::printf("rank %d: %s: %s\n", g_rank, rs_status_string(got), text.c_str());
  return g_failures;
}

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

// The daemon's view of who we are must match the test's: global rank and size
// (RINGSYNC_RANK / RINGSYNC_SIZE, when the test sets them). Anything else would
// make every later check fail for a confusing reason.
bool identity_ok(rs_context_t* ctx) {
  const int want_rank = env_int("RINGSYNC_RANK", rs_rank(ctx));
  const int want_size = env_int("RINGSYNC_SIZE", rs_size(ctx));
  if (rs_rank(ctx) == want_rank && rs_size(ctx) == want_size &&
      rs_num_nodes(ctx) * rs_local_size(ctx) == rs_size(ctx) &&
      rs_node_rank(ctx) * rs_local_size(ctx) + rs_local_rank(ctx) == rs_rank(ctx))
    return true;
  std::fprintf(stderr,
               "rank %s: identity: rs_rank %d (wanted %d), rs_size %d (wanted %d), node %d of %d, "
               "local rank %d of %d\n",
               g_mark_id.c_str(), rs_rank(ctx), want_rank, rs_size(ctx), want_size,
               rs_node_rank(ctx), rs_num_nodes(ctx), rs_local_rank(ctx), rs_local_size(ctx));
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: ringsync-test-rank SCENARIO [ARGS]\n");
    return rank_exit::kUsage;
  }
  const std::string scenario = argv[1];
  auto arg = [&](int i, const char* fallback) {
    return std::string(argc > i ? argv[i] : fallback);
  };
  g_rank = env_int("RINGSYNC_LOCAL_RANK", 0);
  g_size = env_int("RINGSYNC_LOCAL_SIZE", 1);
  g_mark_id = std::to_string(env_int("RINGSYNC_TEST_ID", env_int("RINGSYNC_RANK", g_rank)));
  g_deadline = std::chrono::steady_clock::now() +
               std::chrono::seconds(env_int("RINGSYNC_TEST_DEADLINE_S", 300));

  rs_context_t* ctx = connect_or_die();
  g_rank = rs_rank(ctx);
  g_size = rs_size(ctx);
  if (!identity_ok(ctx)) return 1;
  mark("connected");
  if (scenario == "hang") {  // connect, then wait to be killed
    std::this_thread::sleep_for(std::chrono::seconds(120));
    rs_disconnect(ctx);
    return rank_exit::kHangEnded;
  }
  int code = 0;
  if (scenario == "collectives") {  // collectives COUNT...
    std::vector<std::size_t> counts;
    for (int i = 2; i < argc; ++i) counts.push_back(std::strtoull(argv[i], nullptr, 10));
    scenario_collectives(ctx, counts);
  } else if (scenario == "large") {  // one 64 MiB f32 sum allreduce, zero copy and staged
    const std::size_t count = (64u << 20) / 4;
    check_allreduce(ctx, true, count, ringsync::DType::kF32, ringsync::ReduceOp::kSum, false);
    check_allreduce(ctx, false, count, ringsync::DType::kF32, ringsync::ReduceOp::kSum, true);
  } else if (scenario == "async") {
    scenario_async(ctx);
  } else if (scenario == "fusion") {  // fusion TENSORS
    scenario_fusion(ctx, std::stoi(arg(2, "200")));
  } else if (scenario == "repeat") {  // repeat STEPS TENSORS
    scenario_repeat(ctx, std::stoi(arg(2, "3")), std::stoi(arg(3, "4")));
  } else if (scenario == "mismatch") {
    std::vector<double> buf(16, 1.0);
    rs_request_t* req = nullptr;
    rs_status_t s = finish(rs_allreduce_async(ctx, "mixed", buf.data(), buf.data(),
                                              g_rank == 0 ? 16 : 8, g_rank == 0 ? RS_F32 : RS_F64,
                                              RS_SUM, &req),
                           &req, "mixed");
    expect_status(s, "mismatch", "tensor 'mixed'");
    EXPECT(std::string(rs_last_error()).find("count") != std::string::npos, "no field named");
    // The job keeps working after a mismatch.
    check_allreduce(ctx, false, 5, ringsync::DType::kI32, ringsync::ReduceOp::kSum, false);
  } else if (scenario == "node-mismatch") {  // node-mismatch NODE
    scenario_node_mismatch(ctx, std::stoi(arg(2, "1")));
  } else if (scenario == "expect-error") {  // expect-error STATUS TEXT [COUNT [intact]]: one allreduce fails so
    std::vector<float> buf(std::stoul(arg(4, "1024")), 1.0f);
    rs_request_t* req = nullptr;
    expect_ok(rs_allreduce_async(ctx, "doomed", buf.data(), buf.data(), buf.size(), RS_F32, RS_SUM,
                                 &req),
              "submit");
    mark("submitted");
    expect_status(finish(RS_SUCCESS, &req, "doomed"), arg(2, "").c_str(), arg(3, "").c_str());
    // intact: the failure came after the data moved between the nodes (a
    // result check), and the in-place buffer still holds the rank's input.
    if (arg(5, "") == "intact")
      EXPECT(std::all_of(buf.begin(), buf.end(), [](float v) { return v == 1.0f; }),
             "doomed: the failed allreduce wrote into the rank's in-place buffer");
  } else if (scenario == "submit-wait") {  // submit-wait NAME SECONDS [COUNT]: one allreduce, bounded wait
    const std::string name = arg(2, "x");
    g_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(std::stoi(arg(3, "30")));
    std::vector<float> buf(std::stoul(arg(4, "1024")), 1.0f);
    rs_request_t* req = nullptr;
    expect_ok(rs_allreduce_async(ctx, name.c_str(), buf.data(), buf.data(), buf.size(), RS_F32,
                                 RS_SUM, &req),
              "submit");
    mark("submitted");
    const rs_status_t s = finish(RS_SUCCESS, &req, name.c_str());
    if (s != RS_SUCCESS) code = classify(s, "");
  } else if (scenario == "verify-loop") {  // verify-loop DTYPE COUNT ITERATIONS: sum allreduces, each checked
    const auto dtype = ringsync::parse_dtype(arg(2, "f32"));
    if (!dtype) return rank_exit::kUsage;
    const std::size_t count = std::strtoull(arg(3, "1024").c_str(), nullptr, 10);
    const int iterations = std::stoi(arg(4, "10"));
    for (int i = 0; i < iterations && g_failures == 0; ++i) {
      check_allreduce(ctx, true, count, *dtype, ringsync::ReduceOp::kSum, i % 2 == 0);
      if (i == 0) mark("looping");
    }
    std::printf("rank %d: %d %s allreduces of %zu elements checked\n", g_rank, iterations,
                std::string(ringsync::dtype_name(*dtype)).c_str(), count);
  } else if (scenario == "until-file") {  // until-file PATH COUNT MAX_SECONDS: checked allreduces until PATH exists
    // Every rank stops after the same iteration: a one-int allreduce after each
    // says whether any rank saw the file (or passed MAX_SECONDS).
    const std::string stop_file = arg(2, "");
    const std::size_t count = std::strtoull(arg(3, "1048576").c_str(), nullptr, 10);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(std::stoi(arg(4, "120")));
    int iterations = 0;
    for (bool stop = false; !stop && g_failures == 0; ++iterations) {
      check_allreduce(ctx, true, count, ringsync::DType::kF32, ringsync::ReduceOp::kSum, false);
      if (iterations == 0) mark("looping");
      std::int32_t seen = std::filesystem::exists(stop_file) || std::chrono::steady_clock::now() > deadline;
      rs_request_t* req = nullptr;
      expect_ok(finish(rs_allreduce_async(ctx, "until-file.stop", &seen, &seen, 1, RS_I32, RS_SUM, &req), &req,
                       "until-file.stop"),
                "until-file.stop");
      stop = seen > 0;
    }
    std::printf("rank %d: %d allreduces of %zu f32 checked\n", g_rank, iterations, count);
  } else if (scenario == "late") {  // late MS STEPS: rank 0 computes MS before each allreduce, the rest wait
    const int delay = std::stoi(arg(2, "1000"));
    const int steps = std::stoi(arg(3, "1"));
    for (int i = 0; i < steps; ++i) {
      if (g_rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      check_allreduce(ctx, true, 4099, ringsync::DType::kF32, ringsync::ReduceOp::kSum, false);
    }
  } else if (scenario == "soak") {  // soak SEED SECONDS MAX_BYTES BOUND_SECONDS
    code = scenario_soak(ctx, std::stoull(arg(2, "1")), std::stoi(arg(3, "30")),
                         std::strtoull(arg(4, "8388608").c_str(), nullptr, 10), std::stoi(arg(5, "120")));
  } else if (scenario == "loop") {  // loop SECONDS EXPECTED_TEXT [COUNT]
    code = scenario_loop(ctx, std::stoi(arg(2, "30")), arg(3, "peer lost"),
                         std::strtoull(arg(4, "262144").c_str(), nullptr, 10));
  } else {
    std::fprintf(stderr, "unknown scenario %s\n", scenario.c_str());
    return rank_exit::kUsage;
  }
  rs_disconnect(ctx);
  if (g_failures) std::fprintf(stderr, "rank %d: %d check(s) failed\n", g_rank, g_failures);
  if (code != 0) return code;
  return g_failures ? 1 : 0;
}
