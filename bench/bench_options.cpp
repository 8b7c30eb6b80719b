#include "bench/bench_options.h"

#include <algorithm>

#include <limits>
#include <optional>

#include "common/units.h"

namespace ringsync::bench {

const char* const kUsage =
    "usage: ringsync-bench [-t COLL] [-b MIN] [-e MAX] [-f FACTOR] [-d TYPE] [-o OP]\n"
    "                      [-n ITERS] [-w WARMUP] [-c 0|1] [-r ROOT] [--csv FILE] [--json FILE]\n"
    "\n"
    "Measures ringsync collectives the way nccl-tests does. Run it as a trainer, one\n"
    "process per rank, e.g.  ringsync launch --nodes 2 --slots 2 -- ringsync-bench -t all\n"
    "\n"
    "  -t, --collective COLL   allreduce, broadcast, allgather, reduce_scatter, alltoall,\n"
    "                          a comma list, or all (default allreduce)\n"
    "  -b, --minbytes SIZE     smallest size (default 8)\n"
    "  -e, --maxbytes SIZE     largest size (default 256M)\n"
    "  -f, --stepfactor N      multiply the size by N between rows, N >= 2 (default 2)\n"
    "  -d, --datatype TYPE     float, double, half, bfloat16, int32, int64, uint8, a comma\n"
    "                          list, or all (default float)\n"
    "  -o, --op OP             allreduce's and reduce_scatter's reduction: sum, prod, max,\n"
    "                          min, avg, a comma list, or all (default sum)\n"
    "  -n, --iters N           timed iterations per size, N >= 1 (default 20)\n"
    "  -w, --warmup_iters N    untimed iterations before them (default 5)\n"
    "  -c, --check 0|1         1: check every element of every result (default 1)\n"
    "  -r, --root R            broadcast's root, a global rank (default 0)\n"
    "      --csv FILE          also write the rows as CSV (global rank 0 writes it)\n"
    "      --json FILE         also write the rows as JSON (global rank 0 writes it)\n"
    "  -h, --help              this help\n"
    "\n"
    "SIZE takes K, M, G (binary multiples): 8, 64K, 256M, 1G. Sizes and busbw are\n"
    "nccl-tests': allreduce and broadcast, the buffer (busbw = algbw x 2(n-1)/n, x 1);\n"
    "allgather, the whole output; reduce_scatter, one rank's whole input; alltoall, what\n"
    "one rank sends (these three: busbw = algbw x (n-1)/n). For the last three the\n"
    "count column is one rank's block (size / n ranks).\n"
    "\n"
    "Global rank 0 prints one row per size: size (B), count (elements), type, redop, root,\n"
    "time (us, the mean per iteration of the slowest rank), algbw and busbw (GB/s, nccl-tests\n"
    "definitions) and #wrong (elements that differ from the exact result, summed over ranks;\n"
    "N/A with -c 0), then the average bus bandwidth. Buffers are shared with the daemon\n"
    "(rs_alloc: zero copy). Each size starts after a barrier; the iterations run back to\n"
    "back, each submitted and waited for (blocking mode).\n"
    "\n"
    "Exit status: 0 all results right, 1 some element wrong, 2 bad arguments, 3 no daemon\n"
    "to connect to, 4 a collective failed.\n";

namespace {

// The flags, with nccl-tests' short and long names. None is a switch except --help.
struct Flag {
  char short_name;
  std::string_view long_name;
};
constexpr Flag kFlags[] = {
    {'t', "collective"}, {'b', "minbytes"}, {'e', "maxbytes"}, {'f', "stepfactor"},
    {'d', "datatype"},   {'o', "op"},       {'n', "iters"},    {'w', "warmup_iters"},
    {'c', "check"},      {'r', "root"},     {0, "csv"},        {0, "json"},
};

std::string display(const Flag& f) {
  return f.short_name ? std::string("-") + f.short_name : "--" + std::string(f.long_name);
}

Status bad(const Flag& f, const std::string& value, const std::string& want) {
  return Status::InvalidArgument(display(f) + " '" + value + "': " + want);
}

std::vector<std::string_view> split_commas(std::string_view text) {
  std::vector<std::string_view> parts;
  for (std::size_t begin = 0;;) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    parts.push_back(text.substr(begin, end - begin));
    if (end == text.size()) return parts;
    begin = end + 1;
  }
}

// A comma list of names from `all_names` (or "all"), mapped through `values`.
template <class T, std::size_t N>
Result<std::vector<T>> parse_list(const Flag& f, const std::string& text,
                                  const std::string_view (&all_names)[N], const T (&values)[N]) {
  std::string choices;
  for (std::size_t i = 0; i < N; ++i) choices += std::string(all_names[i]) + ", ";
  choices += "a comma list of them, or all";
  if (text == "all") return std::vector<T>(std::begin(values), std::end(values));
  std::vector<T> chosen;
  for (std::string_view part : split_commas(text)) {
    std::optional<T> found;
    for (std::size_t i = 0; i < N; ++i)
      if (part == all_names[i]) found = values[i];
    if (!found) return bad(f, text, "unknown name '" + std::string(part) + "'; use " + choices);
    chosen.push_back(*found);
  }
  return chosen;
}

constexpr std::string_view kCollectiveNames[] = {"allreduce", "broadcast", "allgather",
                                                 "reduce_scatter", "alltoall"};
constexpr Collective kCollectives[] = {Collective::kAllreduce, Collective::kBroadcast,
                                       Collective::kAllgather, Collective::kReduceScatter,
                                       Collective::kAlltoall};
constexpr std::string_view kTypeNames[] = {"float", "double", "half", "bfloat16",
                                           "int32", "int64",  "uint8"};
constexpr DType kTypes[] = {DType::kF32, DType::kF64, DType::kF16, DType::kBF16,
                            DType::kI32, DType::kI64, DType::kU8};
// nccl-tests' order.
constexpr std::string_view kOpNames[] = {"sum", "prod", "max", "min", "avg"};
constexpr ReduceOp kOps[] = {ReduceOp::kSum, ReduceOp::kProd, ReduceOp::kMax, ReduceOp::kMin,
                             ReduceOp::kAvg};

Result<std::uint64_t> parse_size(const Flag& f, const std::string& text) {
  auto bytes = units::parse_bytes(text);
  if (!bytes.ok())
    return bad(f, text, bytes.status().message() + "; give " + std::string(units::kBytesForm));
  if (*bytes == 0) return bad(f, text, "a size must be at least 1 byte");
  return *bytes;
}

Result<long long> parse_number(const Flag& f, const std::string& text, long long min,
                               long long max) {
  auto value = units::parse_int(text);
  if (!value.ok() || *value < min || *value > max)
    return bad(f, text,
               "want a whole number from " + std::to_string(min) + " to " + std::to_string(max));
  return static_cast<long long>(*value);
}

// Applies one flag's value.
Status apply(const Flag& f, const std::string& value, Options& o) {
  constexpr long long kIntMax = std::numeric_limits<int>::max();
  switch (f.short_name) {
    case 't': {
      auto v = parse_list(f, value, kCollectiveNames, kCollectives);
      if (!v.ok()) return v.status();
      o.collectives = *v;
      return Status::Ok();
    }
    case 'b':
    case 'e': {
      auto v = parse_size(f, value);
      if (!v.ok()) return v.status();
      (f.short_name == 'b' ? o.min_bytes : o.max_bytes) = *v;
      return Status::Ok();
    }
    case 'f': {
      auto v = parse_number(f, value, 2, 1 << 20);
      if (!v.ok()) return v.status();
      o.step_factor = static_cast<std::uint64_t>(*v);
      return Status::Ok();
    }
    case 'd': {
      auto v = parse_list(f, value, kTypeNames, kTypes);
      if (!v.ok()) return v.status();
      o.dtypes = *v;
      return Status::Ok();
    }
    case 'o': {
      auto v = parse_list(f, value, kOpNames, kOps);
      if (!v.ok()) return v.status();
      o.ops = *v;
      return Status::Ok();
    }
    case 'n':
    case 'w': {
      auto v = parse_number(f, value, f.short_name == 'n' ? 1 : 0, kIntMax);
      if (!v.ok()) return v.status();
      (f.short_name == 'n' ? o.iters : o.warmup_iters) = static_cast<int>(*v);
      return Status::Ok();
    }
    case 'c': {
      auto v = parse_number(f, value, 0, 1);
      if (!v.ok()) return v.status();
      o.check = *v == 1;
      return Status::Ok();
    }
    case 'r': {
      auto v = parse_number(f, value, 0, kIntMax);
      if (!v.ok()) return v.status();
      o.root = static_cast<int>(*v);
      return Status::Ok();
    }
    default:
      if (value.empty()) return bad(f, value, "give a file name");
      (f.long_name == "csv" ? o.csv_path : o.json_path) = value;
      return Status::Ok();
  }
}

const Flag* find_short(char c) {
  for (const Flag& f : kFlags)
    if (f.short_name == c) return &f;
  return nullptr;
}

const Flag* find_long(std::string_view name) {
  for (const Flag& f : kFlags)
    if (f.long_name == name) return &f;
  return nullptr;
}

}  // namespace

Result<Options> parse_options(const std::vector<std::string>& args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "-h" || arg == "--help") {
      o.help = true;
      continue;
    }
    // -b 8, -b8, --minbytes 8, --minbytes=8
    const Flag* flag = nullptr;
    std::optional<std::string> value;
    if (arg.size() > 2 && arg.rfind("--", 0) == 0) {
      const std::size_t eq = arg.find('=');
      flag = find_long(std::string_view(arg).substr(2, eq == std::string::npos ? eq : eq - 2));
      if (eq != std::string::npos) value = arg.substr(eq + 1);
    } else if (arg.size() >= 2 && arg[0] == '-' && arg[1] != '-') {
      flag = find_short(arg[1]);
      if (arg.size() > 2) value = arg.substr(2);
    }
    if (flag == nullptr)
      return Status::InvalidArgument("unknown option '" + arg +
                                     "' (ringsync-bench --help lists them)");
    if (!value) {
      if (i + 1 == args.size()) return Status::InvalidArgument(display(*flag) + " needs a value");
      value = args[++i];
    }
    RINGSYNC_RETURN_IF_ERROR(apply(*flag, *value, o));
  }
  if (o.max_bytes < o.min_bytes)
    return Status::InvalidArgument("-e (" + std::to_string(o.max_bytes) + " B) is below -b (" +
                                   std::to_string(o.min_bytes) + " B); give -b <= -e");
  return o;
}

std::vector<std::uint64_t> sizes_of(const Options& options) {
  std::vector<std::uint64_t> sizes;
  for (std::uint64_t b = options.min_bytes; b <= options.max_bytes;) {
    sizes.push_back(b);
    if (b > options.max_bytes / options.step_factor) break;  // the next one would overflow
    b *= options.step_factor;
  }
  return sizes;
}

std::string_view type_name(DType dtype) {
  for (std::size_t i = 0; i < std::size(kTypes); ++i)
    if (kTypes[i] == dtype) return kTypeNames[i];
  return "?";
}

std::string_view op_name(ReduceOp op) {
  for (std::size_t i = 0; i < std::size(kOps); ++i)
    if (kOps[i] == op) return kOpNames[i];
  return "?";
}

Capacity capacity_of(const Options& o, int ranks) {
  Capacity cap;
  for (Collective c : o.collectives)
    for (DType d : o.dtypes)
      for (std::uint64_t bytes : sizes_of(o)) {
        const Shape s = shape_of(c, bytes, dtype_size(d), ranks);
        cap.send_bytes = std::max(cap.send_bytes, s.send_count * dtype_size(d));
        cap.recv_bytes = std::max(cap.recv_bytes, s.recv_count * dtype_size(d));
      }
  return cap;
}


}  // namespace ringsync::bench
