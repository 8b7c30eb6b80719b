// ringsync-bench's command line, in the style of nccl-tests: which collectives,
// the range of sizes, element type, reduction, iterations, checking, root, and
// where to write the rows besides the table.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench_collective.h"
#include "common/dtype.h"
#include "common/status.h"

namespace ringsync::bench {

struct Options {
  std::vector<Collective> collectives = {Collective::kAllreduce};
  std::uint64_t min_bytes = 8;
  std::uint64_t max_bytes = 256ull << 20;
  std::uint64_t step_factor = 2;
  std::vector<DType> dtypes = {DType::kF32};
  std::vector<ReduceOp> ops = {ReduceOp::kSum};
  int iters = 20;
  int warmup_iters = 5;
  bool check = true;
  int root = 0;
  std::string csv_path;   // empty: no CSV
  std::string json_path;  // empty: no JSON
  bool help = false;
};

// The usage text (--help).
extern const char* const kUsage;

// args without the program name. An error says which flag was wrong and what it takes.
Result<Options> parse_options(const std::vector<std::string>& args);

// The sizes to measure: min_bytes, then times step_factor while <= max_bytes.
std::vector<std::uint64_t> sizes_of(const Options& options);

// The largest send and receive sizes of any row of a run, so two buffers serve
// every row.
struct Capacity {
  std::size_t send_bytes = 1;
  std::size_t recv_bytes = 1;
};
Capacity capacity_of(const Options& options, int ranks);

// nccl-tests' names: "float", "double", "half", "bfloat16", "int32", "int64", "uint8".
std::string_view type_name(DType dtype);
// "sum", "prod", "max", "min", "avg".
std::string_view op_name(ReduceOp op);

}  // namespace ringsync::bench
