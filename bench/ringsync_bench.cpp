// ringsync-bench: nccl-tests for ringsync. One process per rank, launched like any
// trainer (ringsync launch ... -- ringsync-bench -t all); see bench_options.cpp for
// the flags and the exit statuses.
//
// For each collective, element type and reduction, and each size: warm-up
// iterations, then a barrier, then the timed iterations back to back, each one
// submitted and waited for (nccl-tests' blocking mode). A rank's time is the mean
// per iteration; the row shows the slowest rank's, agreed through ringsync itself
// after the timed loop. Buffers come from rs_alloc (zero copy), and with -c 1 the
// result of the timed loop is checked element by element (bench_check.h).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "bench/bench_check.h"
#include "bench/bench_collective.h"
#include "bench/bench_options.h"
#include "bench/bench_report.h"
#include "ringsync/ringsync.h"

namespace ringsync::bench {
namespace {

namespace exit_code {
constexpr int kOk = 0;
constexpr int kWrong = 1;       // some result element differs from the exact value
constexpr int kUsage = 2;       // bad flags, a root outside the job, an unwritable file
constexpr int kConnect = 3;     // no daemon answered
constexpr int kFailed = 4;      // a collective (or an allocation) failed
constexpr int kWriteFiles = 5;  // --csv / --json could not be written at the end
}  // namespace exit_code

class Bench {
 public:
  Bench(const Options& options, rs_context_t* ctx, void* send, void* recv, std::size_t send_bytes)
      : o_(options),
        ctx_(ctx),
        send_(send),
        recv_(recv),
        send_bytes_(send_bytes),
        rank_(rs_rank(ctx)),
        ranks_(rs_size(ctx)) {}

  // Every row, in order; false when a collective failed (already reported).
  bool run(const RunInfo& info, std::vector<Row>* rows) {
    for (Collective c : o_.collectives) {
      if (rank_ == 0) print_section(c, info);
      for (DType d : o_.dtypes) {
        // Only allreduce and reduce_scatter reduce; the others run once per type.
        const std::vector<ReduceOp> ops =
            reduces(c) ? o_.ops : std::vector<ReduceOp>{ReduceOp::kSum};
        for (ReduceOp op : ops) {
          fill_input(c, d, op);
          for (std::uint64_t bytes : sizes_of(o_)) {
            Row row;
            if (!measure(c, d, op, shape_of(c, bytes, dtype_size(d), ranks_), &row)) return false;
            if (rank_ == 0) print_row(row);
            rows->push_back(row);
          }
        }
      }
    }
    return true;
  }

 private:
  void fill_input(Collective c, DType d, ReduceOp op) {
    const std::size_t count = send_bytes_ / dtype_size(d);
    if (reduces(c))
      fill_allreduce_input(send_, count, d, op, rank_, ranks_);
    else
      fill_rank_data(send_, count, d, rank_);
  }

  bool measure(Collective c, DType d, ReduceOp op, const Shape& shape, Row* row) {
    // One name per row: each is a tensor of its own shape, repeated iteration after
    // iteration as a training step repeats its gradients.
    std::string name = "bench.";
    name.append(collective_name(c)).append(".").append(type_name(d));
    if (reduces(c)) name.append(".").append(op_name(op));
    name.append(".").append(std::to_string(shape.bytes));
    auto once = [&] {
      return finish(submit(ctx_, name.c_str(), c, shape, send_, recv_, d, op, o_.root, &request_),
                    name);
    };
    for (int w = 0; w < o_.warmup_iters; ++w)
      if (!once()) return false;
    // After the warm-up: what the check sees must come from the timed iterations.
    if (o_.check) mark_unwritten(recv_, shape.recv_count * dtype_size(d));
    if (!finish(rs_barrier_async(ctx_, "bench.start", &request_), "the barrier before " + name))
      return false;

    const auto start = std::chrono::steady_clock::now();
    auto last = start;
    for (int it = 0; it < o_.iters; ++it) {
      if (!once()) return false;
      const auto now = std::chrono::steady_clock::now();
      times_[static_cast<std::size_t>(it)] = std::chrono::duration<double>(now - last).count();
      last = now;
    }
    double seconds = std::chrono::duration<double>(last - start).count() / o_.iters;
    double median = median_of(times_);

    // The slowest rank's time is the collective's time.
    if (!finish(rs_allreduce_async(ctx_, "bench.time", &seconds, &seconds, 1, RS_F64, RS_MAX,
                                   &request_),
                "the time allreduce after " + name))
      return false;
    if (!finish(rs_allreduce_async(ctx_, "bench.median", &median, &median, 1, RS_F64, RS_MAX, &request_),
                "the median allreduce after " + name))
      return false;
    std::optional<std::int64_t> wrong;
    if (o_.check) {
      std::int64_t mine = count_wrong(c, d, op, shape);
      if (mine != 0)
        std::fprintf(stderr, "ringsync-bench: rank %d: %s: %lld of %zu elements wrong\n", rank_,
                     name.c_str(), static_cast<long long>(mine), shape.recv_count);
      if (!finish(
              rs_allreduce_async(ctx_, "bench.wrong", &mine, &mine, 1, RS_I64, RS_SUM, &request_),
              "the #wrong allreduce after " + name))
        return false;
      wrong = mine;
    }
    *row = make_row(c, shape, d, op, o_.root, ranks_, seconds, median, wrong);
    return true;
  }

  std::int64_t count_wrong(Collective c, DType d, ReduceOp op, const Shape& shape) const {
    switch (c) {
      case Collective::kAllreduce: return count_allreduce_wrong(recv_, shape.count, d, op, ranks_);
      case Collective::kBroadcast: return count_broadcast_wrong(recv_, shape.count, d, o_.root);
      case Collective::kAllgather: return count_allgather_wrong(recv_, shape.count, d, ranks_);
      case Collective::kReduceScatter:
        return count_reduce_scatter_wrong(recv_, shape.count, d, op, rank_, ranks_);
      case Collective::kAlltoall:
        return count_alltoall_wrong(recv_, shape.count, d, rank_, ranks_);
    }
    return 0;
  }

  // Waits for a submitted request; false (and a message saying which) on failure.
  bool finish(rs_status_t submitted, const std::string& what) {
    const rs_status_t s = submitted == RS_SUCCESS ? rs_wait(request_) : submitted;
    if (s == RS_SUCCESS) return true;
    std::fprintf(stderr, "ringsync-bench: rank %d: %s failed: %s: %s\n", rank_, what.c_str(),
                 rs_status_string(s), rs_last_error());
    return false;
  }

  const Options& o_;
  rs_context_t* ctx_;
  void* send_;
  void* recv_;
  std::size_t send_bytes_;
  int rank_, ranks_;
  rs_request_t* request_ = nullptr;
  // Each timed iteration (for the median), sized once: no allocation while timing.
  std::vector<double> times_ = std::vector<double>(static_cast<std::size_t>(o_.iters));
};

// Opens --csv / --json on rank 0 before anything is measured, so a bad path fails
// at once rather than after the run.
bool open_outputs(const Options& o, std::ofstream& csv, std::ofstream& json) {
  for (auto [path, stream, flag] :
       {std::tuple{&o.csv_path, &csv, "--csv"}, std::tuple{&o.json_path, &json, "--json"}}) {
    if (path->empty()) continue;
    stream->open(*path, std::ios::out | std::ios::trunc);
    if (!*stream) {
      std::fprintf(stderr, "ringsync-bench: %s %s: cannot open it for writing: %s\n", flag,
                   path->c_str(), std::strerror(errno));
      return false;
    }
  }
  return true;
}

// Setup that can fail on one rank alone (a root outside the job, a file, an
// allocation): the ranks agree on the worst outcome, so none of them waits forever
// for one that gave up. Returns the exit code they agree on.
int agree_on_setup(rs_context_t* ctx, int mine) {
  std::int32_t worst = mine;
  const rs_status_t s = rs_allreduce(ctx, "bench.setup", &worst, &worst, 1, RS_I32, RS_MAX);
  if (s != RS_SUCCESS) {
    std::fprintf(stderr, "ringsync-bench: rank %d: agreeing on the setup failed: %s: %s\n",
                 rs_rank(ctx), rs_status_string(s), rs_last_error());
    return exit_code::kFailed;
  }
  return worst;
}

int run(const Options& o, rs_context_t* ctx) {
  const int rank = rs_rank(ctx);
  const RunInfo info{rs_size(ctx), rs_num_nodes(ctx), rs_local_size(ctx), utc_now()};
  const bool has_broadcast =
      std::count(o.collectives.begin(), o.collectives.end(), Collective::kBroadcast) > 0;
  int setup = exit_code::kOk;
  if (has_broadcast && o.root >= info.ranks) {
    if (rank == 0)
      std::fprintf(stderr, "ringsync-bench: -r %d is not a rank of this job (%d ranks: 0 to %d)\n",
                   o.root, info.ranks, info.ranks - 1);
    setup = exit_code::kUsage;
  }
  std::ofstream csv, json;
  if (setup == exit_code::kOk && rank == 0 && !open_outputs(o, csv, json))
    setup = exit_code::kUsage;

  const Capacity cap = capacity_of(o, info.ranks);
  void* send = nullptr;
  void* recv = nullptr;
  if (setup == exit_code::kOk && (rs_alloc(ctx, cap.send_bytes, &send) != RS_SUCCESS ||
                                  rs_alloc(ctx, cap.recv_bytes, &recv) != RS_SUCCESS)) {
    std::fprintf(stderr, "ringsync-bench: rank %d: rs_alloc of %zu + %zu bytes failed: %s\n", rank,
                 cap.send_bytes, cap.recv_bytes, rs_last_error());
    setup = exit_code::kFailed;
  }
  setup = agree_on_setup(ctx, setup);
  if (setup != exit_code::kOk) return setup;

  if (rank == 0) print_preamble(o, info);
  std::vector<Row> rows;
  Bench bench(o, ctx, send, recv, cap.send_bytes);
  if (!bench.run(info, &rows)) return exit_code::kFailed;
  if (rank == 0) print_summary(rows);
  rs_free(ctx, send);
  rs_free(ctx, recv);

  int code = std::any_of(rows.begin(), rows.end(),
                         [](const Row& r) { return r.wrong.value_or(0) != 0; })
                 ? exit_code::kWrong
                 : exit_code::kOk;
  if (rank == 0) {
    const bool written = (o.csv_path.empty() || write_csv(csv, rows, info)) &&
                         (o.json_path.empty() || write_json(json, rows, info, o));
    if (!written) {
      std::fprintf(stderr, "ringsync-bench: writing --csv or --json failed: %s\n",
                   std::strerror(errno));
      code = exit_code::kWriteFiles;
    }
  }
  // Wrong results make every rank exit 1, and a launcher stops the others at the
  // first failure: wait here until rank 0 has written its files.
  if (rs_barrier(ctx, "bench.end") != RS_SUCCESS) {
    std::fprintf(stderr, "ringsync-bench: rank %d: the final barrier failed: %s\n", rank,
                 rs_last_error());
    if (code == exit_code::kOk) code = exit_code::kFailed;
  }
  return code;
}

}  // namespace
}  // namespace ringsync::bench

int main(int argc, char** argv) {
  using namespace ringsync::bench;
  auto options = parse_options(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    std::fprintf(stderr, "ringsync-bench: %s\n", options.status().message().c_str());
    return exit_code::kUsage;
  }
  if (options->help) {
    std::fputs(kUsage, stdout);
    return exit_code::kOk;
  }
  rs_context_t* ctx = nullptr;
  if (rs_status_t s = rs_connect(nullptr, &ctx); s != RS_SUCCESS) {
    std::fprintf(stderr, "ringsync-bench: cannot connect to ringsyncd: %s: %s\n",
                 rs_status_string(s), rs_last_error());
    return exit_code::kConnect;
  }
  const int code = run(*options, ctx);
  rs_disconnect(ctx);
  return code;
}
