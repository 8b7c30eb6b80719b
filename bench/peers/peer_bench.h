// The measurement loop of ringsync-bench, run on a peer library (peer_backend.h):
// the same flags (bench_options.h), the same sizes and exact inputs
// (bench_check.h), the same table and files (bench_report.h), and the same exit
// statuses, so one parser reads every tool's output and a row of one tool compares
// with the same row of another.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/bench_options.h"
#include "bench/bench_report.h"
#include "bench/peers/peer_backend.h"
#include "common/status.h"

namespace ringsync::bench::peers {

namespace exit_code {
constexpr int kOk = 0;
constexpr int kWrong = 1;       // some result element differs from the exact value
constexpr int kUsage = 2;       // bad flags, a root outside the job, an unwritable file
constexpr int kConnect = 3;     // the ranks could not find one another
constexpr int kFailed = 4;      // a collective failed
constexpr int kWriteFiles = 5;  // --csv / --json could not be written at the end
}  // namespace exit_code

// A flag of one harness only (Gloo's --rank, ...). Every one takes a value.
struct OwnFlag {
  char short_name;  // 0: long form only
  std::string_view long_name;
};

// A harness's command line: its own flags, by long name, and the rest parsed as
// ringsync-bench's.
struct PeerArgs {
  Options options;
  std::vector<std::pair<std::string, std::string>> own;  // (long name, value), in order
};

// args without the program name. Errors name `tool` where ringsync-bench's parser
// would name itself.
Result<PeerArgs> parse_peer_args(const std::vector<std::string>& args,
                                 const std::vector<OwnFlag>& own, std::string_view tool);

// What the table's first line says about the run.
struct Describe {
  std::string tool;     // "mpi-allreduce-bench"
  std::string details;  // "Open MPI 4.1.4, btl tcp,self" ...
  bool allreduce_in_place = false;  // Gloo's AllreduceRing, AllreduceRingChunked
};

// Measures every row on `backend` and prints the table on rank 0. Returns the exit
// status every rank agrees on.
int run_bench(const Options& options, Backend& backend, const RunInfo& info,
              const Describe& describe);

}  // namespace ringsync::bench::peers
