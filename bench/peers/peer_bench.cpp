#include "bench/peers/peer_bench.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <tuple>

#include "bench/bench_check.h"

namespace ringsync::bench::peers {
namespace {

// The same flag spellings as ringsync-bench's: -a 1, -a1, --name 1, --name=1.
const OwnFlag* match(const std::string& arg, const std::vector<OwnFlag>& own,
                     std::optional<std::string>* value) {
  for (const OwnFlag& f : own) {
    const std::string long_form = "--" + std::string(f.long_name);
    if (arg == long_form) return &f;
    if (arg.rfind(long_form + "=", 0) == 0) {
      *value = arg.substr(long_form.size() + 1);
      return &f;
    }
    if (f.short_name && arg.size() >= 2 && arg[0] == '-' && arg[1] == f.short_name) {
      if (arg.size() > 2) *value = arg.substr(2);
      return &f;
    }
  }
  return nullptr;
}

std::string renamed(std::string message, std::string_view tool) {
  constexpr std::string_view kTheirs = "ringsync-bench";
  if (auto at = message.find(kTheirs); at != std::string::npos)
    message.replace(at, kTheirs.size(), tool);
  return message;
}

// Page-aligned, like the shared buffers ringsync-bench gets from rs_alloc.
struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, FreeDeleter>;

Buffer allocate(std::size_t bytes) {
  constexpr std::size_t kPage = 4096;
  return Buffer(std::aligned_alloc(kPage, (bytes + kPage - 1) / kPage * kPage));
}

class Bench {
 public:
  Bench(const Options& o, Backend& backend, void* send, void* recv, std::size_t send_bytes,
        const std::string& tool)
      : o_(o), backend_(backend), send_(send), recv_(recv), send_bytes_(send_bytes), tool_(tool) {}

  // Every row, in order; false when a collective failed (already reported).
  bool run(const RunInfo& info, std::vector<Row>* rows) {
    const int rank = backend_.rank();
    for (Collective c : o_.collectives) {
      if (rank == 0) print_section(c, info);
      for (DType d : o_.dtypes) {
        // Only allreduce and reduce_scatter reduce; the others run once per type.
        const std::vector<ReduceOp> ops =
            reduces(c) ? o_.ops : std::vector<ReduceOp>{ReduceOp::kSum};
        for (ReduceOp op : ops) {
          if (std::string why = backend_.unsupported(c, d, op); !why.empty()) {
            std::string what(collective_name(c));
            what.append(" ").append(type_name(d));
            if (reduces(c)) what.append(" ").append(op_name(op));
            if (rank == 0) std::printf("# skipped %s: %s\n", what.c_str(), why.c_str());
            continue;
          }
          fill_input(c, d, op);
          for (std::uint64_t bytes : sizes_of(o_)) {
            Row row;
            if (!measure(c, d, op, shape_of(c, bytes, dtype_size(d), backend_.ranks()), &row))
              return false;
            if (rank == 0) print_row(row);
            rows->push_back(row);
          }
        }
      }
    }
    std::fflush(stdout);
    return true;
  }

 private:
  void fill_input(Collective c, DType d, ReduceOp op) {
    const std::size_t count = send_bytes_ / dtype_size(d);
    if (reduces(c))
      fill_allreduce_input(send_, count, d, op, backend_.rank(), backend_.ranks());
    else
      fill_rank_data(send_, count, d, backend_.rank());
  }

  bool measure(Collective c, DType d, ReduceOp op, const Shape& shape, Row* row) {
    std::string name(collective_name(c));
    name.append(" ").append(type_name(d));
    if (reduces(c)) name.append(" ").append(op_name(op));
    name.append(" ").append(std::to_string(shape.bytes)).append(" B");

    if (!ok(backend_.prepare(c, shape, d, op, o_.root, send_, recv_), name)) return false;
    const std::size_t send_bytes = shape.send_count * dtype_size(d);
    const std::size_t recv_bytes = shape.recv_count * dtype_size(d);
    const bool in_place = backend_.in_place();
    if (in_place) std::memcpy(recv_, send_, send_bytes);
    for (int w = 0; w < o_.warmup_iters; ++w)
      if (!ok(backend_.run_once(), name)) return false;
    // After the warm-up: what the check sees must come from the timed iterations.
    if (o_.check && !in_place) mark_unwritten(recv_, recv_bytes);
    if (!ok(backend_.barrier(), "the barrier before " + name)) return false;

    const auto start = std::chrono::steady_clock::now();
    auto last = start;
    for (int it = 0; it < o_.iters; ++it) {
      if (!ok(backend_.run_once(), name)) return false;
      const auto now = std::chrono::steady_clock::now();
      times_[static_cast<std::size_t>(it)] = std::chrono::duration<double>(now - last).count();
      last = now;
    }
    const double mine = std::chrono::duration<double>(last - start).count() / o_.iters;

    // The slowest rank's time is the collective's time.
    auto seconds = backend_.max_over_ranks(mine);
    if (!ok(seconds.ok() ? Status::Ok() : seconds.status(), "the time allreduce after " + name))
      return false;
    auto median = backend_.max_over_ranks(median_of(times_));
    if (!ok(median.ok() ? Status::Ok() : median.status(), "the median allreduce after " + name)) return false;
    std::optional<std::int64_t> wrong;
    if (o_.check) {
      // An in-place algorithm has reduced its own results over and over: check one
      // more run from fresh inputs, as nccl-tests checks its in-place rows.
      if (in_place) {
        std::memcpy(recv_, send_, send_bytes);
        if (!ok(backend_.run_once(), "the checked run of " + name)) return false;
      }
      const std::int64_t mine_wrong = count_wrong(c, d, op, shape);
      if (mine_wrong != 0)
        std::fprintf(stderr, "%s: rank %d: %s: %lld of %zu elements wrong\n", tool_.c_str(),
                     backend_.rank(), name.c_str(), static_cast<long long>(mine_wrong),
                     shape.recv_count);
      auto total = backend_.sum_over_ranks(mine_wrong);
      if (!ok(total.ok() ? Status::Ok() : total.status(), "the #wrong allreduce after " + name))
        return false;
      wrong = *total;
    }
    *row = make_row(c, shape, d, op, o_.root, backend_.ranks(), *seconds, *median, wrong);
    return true;
  }

  std::int64_t count_wrong(Collective c, DType d, ReduceOp op, const Shape& shape) const {
    const void* result = backend_.result(send_, recv_);
    switch (c) {
      case Collective::kAllreduce:
        return count_allreduce_wrong(result, shape.count, d, op, backend_.ranks());
      case Collective::kBroadcast: return count_broadcast_wrong(result, shape.count, d, o_.root);
      case Collective::kAllgather:
        return count_allgather_wrong(result, shape.count, d, backend_.ranks());
      case Collective::kReduceScatter:
        return count_reduce_scatter_wrong(result, shape.count, d, op, backend_.rank(),
                                          backend_.ranks());
      case Collective::kAlltoall:
        return count_alltoall_wrong(result, shape.count, d, backend_.rank(), backend_.ranks());
    }
    return 0;
  }

  bool ok(const Status& s, const std::string& what) {
    if (s.ok()) return true;
    std::fprintf(stderr, "%s: rank %d: %s failed: %s\n", tool_.c_str(), backend_.rank(),
                 what.c_str(), s.message().c_str());
    return false;
  }

  const Options& o_;
  Backend& backend_;
  void* send_;
  void* recv_;
  std::size_t send_bytes_;
  const std::string& tool_;
  // Each timed iteration (for the median), sized once: no allocation while timing.
  std::vector<double> times_ = std::vector<double>(static_cast<std::size_t>(o_.iters));
};

bool open_outputs(const Options& o, std::ofstream& csv, std::ofstream& json,
                  const std::string& tool) {
  for (auto [path, stream, flag] :
       {std::tuple{&o.csv_path, &csv, "--csv"}, std::tuple{&o.json_path, &json, "--json"}}) {
    if (path->empty()) continue;
    stream->open(*path, std::ios::out | std::ios::trunc);
    if (!*stream) {
      std::fprintf(stderr, "%s: %s %s: cannot open it for writing: %s\n", tool.c_str(), flag,
                   path->c_str(), std::strerror(errno));
      return false;
    }
  }
  return true;
}

// write_json names ringsync-bench as the tool; the rows are this tool's.
bool write_json_as(std::ostream& out, const std::vector<Row>& rows, const RunInfo& info,
                   const Options& o, const std::string& tool) {
  std::ostringstream text;
  if (!write_json(text, rows, info, o)) return false;
  std::string json = text.str();
  constexpr std::string_view kTheirs = "\"tool\": \"ringsync-bench\"";
  if (auto at = json.find(kTheirs); at != std::string::npos)
    json.replace(at, kTheirs.size(), "\"tool\": \"" + tool + "\"");
  out << json;
  out.flush();
  return static_cast<bool>(out);
}

// The same header as ringsync-bench's, naming this tool and its transport.
void print_preamble(const Options& o, const RunInfo& info, const Describe& describe) {
  std::string list;
  for (Collective c : o.collectives)
    list.append(list.empty() ? "" : ",").append(collective_name(c));
  std::printf("# %s: %s, %d ranks (%d node(s) x %d local), %s, %s\n", describe.tool.c_str(),
              list.c_str(), info.ranks, info.nodes, info.local_size, describe.details.c_str(),
              describe.allreduce_in_place ? "allreduce in place" : "out of place");
  std::printf("# minBytes %llu maxBytes %llu step: %llu(factor) warmup iters: %d iters: %d "
              "validation: %d\n",
              static_cast<unsigned long long>(o.min_bytes),
              static_cast<unsigned long long>(o.max_bytes),
              static_cast<unsigned long long>(o.step_factor), o.warmup_iters, o.iters,
              o.check ? 1 : 0);
  std::fflush(stdout);
}

}  // namespace

Result<PeerArgs> parse_peer_args(const std::vector<std::string>& args,
                                 const std::vector<OwnFlag>& own, std::string_view tool) {
  PeerArgs parsed;
  std::vector<std::string> common;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::optional<std::string> value;
    const OwnFlag* f = match(args[i], own, &value);
    if (f == nullptr) {
      common.push_back(args[i]);
      continue;
    }
    if (!value) {
      if (i + 1 == args.size())
        return Status::InvalidArgument("--" + std::string(f->long_name) + " needs a value");
      value = args[++i];
    }
    parsed.own.emplace_back(std::string(f->long_name), *value);
  }
  auto options = parse_options(common);
  if (!options.ok())
    return Status::InvalidArgument(renamed(options.status().message(), tool));
  parsed.options = *options;
  return parsed;
}

int run_bench(const Options& o, Backend& backend, const RunInfo& info, const Describe& describe) {
  const int rank = backend.rank();
  const std::string& tool = describe.tool;
  int setup = exit_code::kOk;
  const bool has_broadcast =
      std::count(o.collectives.begin(), o.collectives.end(), Collective::kBroadcast) > 0;
  if (has_broadcast && o.root >= info.ranks) {
    if (rank == 0)
      std::fprintf(stderr, "%s: -r %d is not a rank of this job (%d ranks: 0 to %d)\n",
                   tool.c_str(), o.root, info.ranks, info.ranks - 1);
    setup = exit_code::kUsage;
  }
  std::ofstream csv, json;
  if (setup == exit_code::kOk && rank == 0 && !open_outputs(o, csv, json, tool))
    setup = exit_code::kUsage;

  const Capacity cap = capacity_of(o, info.ranks);
  Buffer send = allocate(cap.send_bytes);
  Buffer recv = allocate(cap.recv_bytes);
  if (setup == exit_code::kOk && (!send || !recv)) {
    std::fprintf(stderr, "%s: rank %d: allocating %zu + %zu bytes failed\n", tool.c_str(), rank,
                 cap.send_bytes, cap.recv_bytes);
    setup = exit_code::kFailed;
  }
  // Setup can fail on one rank alone: the ranks agree on the worst outcome, so none
  // of them waits forever for one that gave up.
  auto worst = backend.max_over_ranks(setup);
  if (!worst.ok()) {
    std::fprintf(stderr, "%s: rank %d: agreeing on the setup failed: %s\n", tool.c_str(), rank,
                 worst.status().message().c_str());
    return exit_code::kFailed;
  }
  if (*worst != exit_code::kOk) return static_cast<int>(*worst);

  if (rank == 0) print_preamble(o, info, describe);
  std::vector<Row> rows;
  Bench bench(o, backend, send.get(), recv.get(), cap.send_bytes, tool);
  if (!bench.run(info, &rows)) return exit_code::kFailed;
  if (rank == 0) print_summary(rows);

  int code = std::any_of(rows.begin(), rows.end(),
                         [](const Row& r) { return r.wrong.value_or(0) != 0; })
                 ? exit_code::kWrong
                 : exit_code::kOk;
  if (rank == 0) {
    const bool written = (o.csv_path.empty() || write_csv(csv, rows, info)) &&
                         (o.json_path.empty() || write_json_as(json, rows, info, o, tool));
    if (!written) {
      std::fprintf(stderr, "%s: writing --csv or --json failed: %s\n", tool.c_str(),
                   std::strerror(errno));
      code = exit_code::kWriteFiles;
    }
  }
  // A launcher may stop the others at the first rank that exits non-zero: wait
  // here until rank 0 has written its files.
  if (Status s = backend.barrier(); !s.ok()) {
    std::fprintf(stderr, "%s: rank %d: the final barrier failed: %s\n", tool.c_str(), rank,
                 s.message().c_str());
    if (code == exit_code::kOk) code = exit_code::kFailed;
  }
  return code;
}

}  // namespace ringsync::bench::peers
