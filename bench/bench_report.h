// ringsync-bench's output: the nccl-tests-style table on stdout, and the same rows
// as CSV or JSON files.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "bench/bench_collective.h"
#include "bench/bench_options.h"

namespace ringsync::bench {

// One measured size.
struct Row {
  Collective collective = Collective::kAllreduce;
  std::uint64_t bytes = 0;
  std::size_t count = 0;
  std::string type;                   // "float", ...
  std::string redop;                  // "sum", ... or "none"
  int root = -1;                      // broadcast's root, else -1 (as nccl-tests prints them)
  double seconds = 0;                 // mean per iteration, slowest rank
  double median_seconds = 0;          // median iteration, the slowest rank's median
  double algbw = 0;                   // GB/s
  double busbw = 0;                   // GB/s
  std::optional<std::int64_t> wrong;  // summed over ranks; none with -c 0
};

// What the rows were measured on.
struct RunInfo {
  int ranks = 1;
  int nodes = 1;
  int local_size = 1;
  std::string date;  // UTC, ISO 8601
};

// Now, as "2024-05-01T12:34:56Z".
std::string utc_now();

// Row for one measurement; algbw and busbw from the shape's size and the time.
Row make_row(Collective c, const Shape& shape, DType dtype, ReduceOp op, int root, int ranks,
             double seconds, double median_seconds, std::optional<std::int64_t> wrong);

// The median of per-iteration times (0 for none). Takes a copy: it reorders.
double median_of(std::vector<double> times);

// The table, printed to stdout as the rows come (flushed: the launcher's pipe
// should show progress).
void print_preamble(const Options& options, const RunInfo& info);
void print_section(Collective c, const RunInfo& info);
void print_row(const Row& row);
// "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth    : X" (GB/s, over
// every row).
void print_summary(const std::vector<Row>& rows);

// The same rows as files. false when the stream failed.
bool write_csv(std::ostream& out, const std::vector<Row>& rows, const RunInfo& info);
bool write_json(std::ostream& out, const std::vector<Row>& rows, const RunInfo& info,
                const Options& options);

}  // namespace ringsync::bench
