// One trainer rank of `ringsync demo`: f32 sum allreduce over a range of sizes in
// shared buffers (zero copy), every element checked, nccl-tests-style rows
// printed by global rank 0. The allreduce spans every rank of every node, so
// inputs and expected sums use the global rank and size. The slowest rank's time
// is what counts: ranks agree on it with a max-allreduce of their own timings.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "ringsync/ringsync.h"

namespace ringsync::cli {
namespace {

struct Range {
  std::uint64_t min_bytes = 4;
  std::uint64_t max_bytes = 64ull << 20;
  int iters = 0;  // 0: adaptive
};

bool check(rs_status_t s, const char* what) {
  if (s == RS_SUCCESS) return true;
  std::fprintf(stderr, "demo rank: %s failed: %s: %s\n", what, rs_status_string(s), rs_last_error());
  return false;
}

// The value rank r contributes at element i; sums stay exact in f32.
float contribution(int rank, std::size_t i) {
  return static_cast<float>((rank + 1) * static_cast<int>(i % 13 + 1));
}

}  // namespace

int demo_rank(const std::vector<std::string>& args) {
  Range range;
  if (!bytes_option(args, "--min-bytes", range.min_bytes) ||
      !bytes_option(args, "--max-bytes", range.max_bytes))
    return 2;
  if (auto v = option(args, "--iters")) range.iters = std::atoi(v->c_str());

  rs_config_t config;
  rs_config_init(&config);
  rs_context_t* ctx = nullptr;
  if (!check(rs_connect(&config, &ctx), "connect")) return 1;
  const int rank = rs_rank(ctx);
  const int size = rs_size(ctx);
  const std::size_t max_count = std::max<std::uint64_t>(1, range.max_bytes / 4);
  void* send_mem = nullptr;
  void* recv_mem = nullptr;
  if (!check(rs_alloc(ctx, max_count * 4, &send_mem), "alloc") ||
      !check(rs_alloc(ctx, max_count * 4, &recv_mem), "alloc")) {
    rs_disconnect(ctx);
    return 1;
  }
  auto* send = static_cast<float*>(send_mem);
  auto* recv = static_cast<float*>(recv_mem);
  for (std::size_t i = 0; i < max_count; ++i) send[i] = contribution(rank, i);
  const float ranks_sum = static_cast<float>(size * (size + 1) / 2);

  if (rank == 0) {
    std::printf("# ringsync demo: allreduce, %d ranks (%d node(s) x %d local), shared-memory buffers "
                "(zero copy)\n", size, rs_num_nodes(ctx), rs_local_size(ctx));
    std::printf("#\n#%12s %12s %6s %6s %10s %8s %8s %7s\n", "size", "count", "type", "redop",
                "time", "algbw", "busbw", "#wrong");
    std::printf("#%12s %12s %6s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "(us)",
                "(GB/s)", "(GB/s)", "");
    std::fflush(stdout);  // a pipe to the launcher: say who we are before the first row
  }
  double busbw_sum = 0;
  int rows = 0;
  std::int64_t total_wrong = 0;
  bool ok = true;
  for (std::uint64_t bytes = range.min_bytes; bytes <= range.max_bytes && ok; bytes *= 2) {
    const std::size_t count = std::max<std::uint64_t>(1, bytes / 4);
    const int iters = range.iters > 0
                          ? range.iters
                          : static_cast<int>(std::clamp<std::uint64_t>((256ull << 20) / bytes, 5, 200));
    const std::string tag = std::to_string(bytes);
    for (int w = 0; w < 2 && ok; ++w)
      ok = check(rs_allreduce(ctx, ("warmup." + tag).c_str(), send, recv, count, RS_F32, RS_SUM),
                 "warm-up allreduce");
    ok = ok && check(rs_barrier(ctx, ("start." + tag).c_str()), "barrier");
    const auto t0 = std::chrono::steady_clock::now();
    for (int it = 0; it < iters && ok; ++it)
      ok = check(rs_allreduce(ctx, "grad", send, recv, count, RS_F32, RS_SUM), "allreduce");
    const auto t1 = std::chrono::steady_clock::now();
    if (!ok) break;
    std::int64_t wrong = 0;
    for (std::size_t i = 0; i < count; ++i)
      if (recv[i] != ranks_sum * static_cast<float>(i % 13 + 1)) ++wrong;
    double seconds = std::chrono::duration<double>(t1 - t0).count() / iters;
    ok = check(rs_allreduce(ctx, ("time." + tag).c_str(), &seconds, &seconds, 1, RS_F64, RS_MAX),
               "time allreduce") &&
         check(rs_allreduce(ctx, ("wrong." + tag).c_str(), &wrong, &wrong, 1, RS_I64, RS_SUM),
               "check allreduce");
    if (!ok) break;
    total_wrong += wrong;
    const double algbw = static_cast<double>(count * 4) / seconds / 1e9;
    const double busbw = algbw * (size > 1 ? 2.0 * (size - 1) / size : 1.0);
    busbw_sum += busbw;
    ++rows;
    if (rank == 0)
      std::printf(" %12zu %12zu %6s %6s %10.1f %8.2f %8.2f %7" PRId64 "\n", count * 4, count,
                  "float", "sum", seconds * 1e6, algbw, busbw, wrong);
    std::fflush(stdout);
  }
  if (rank == 0 && ok) {
    std::printf("# Out of bounds values : %" PRId64 " %s\n", total_wrong, total_wrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %.3f GB/s\n", rows ? busbw_sum / rows : 0.0);
  }
  rs_free(ctx, send_mem);
  rs_free(ctx, recv_mem);
  rs_disconnect(ctx);
  return ok && total_wrong == 0 ? 0 : 1;
}

}  // namespace ringsync::cli
