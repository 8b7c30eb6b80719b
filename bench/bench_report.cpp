#include "bench/bench_report.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>

namespace ringsync::bench {
namespace {

double average_busbw(const std::vector<Row>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const Row& r : rows) sum += r.busbw;
  return sum / static_cast<double>(rows.size());
}

std::int64_t total_wrong(const std::vector<Row>& rows) {
  std::int64_t sum = 0;
  for (const Row& r : rows) sum += r.wrong.value_or(0);
  return sum;
}

std::string format(const char* fmt, double v) {
  char text[64];
  std::snprintf(text, sizeof text, fmt, v);
  return text;
}

// Names and dates are plain ASCII, but a path-free tool should not trust that.
std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", c);
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string list_of(const Options& o) {
  std::string s;
  for (Collective c : o.collectives) s.append(s.empty() ? "" : ",").append(collective_name(c));
  return s;
}

}  // namespace

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

Row make_row(Collective c, const Shape& shape, DType dtype, ReduceOp op, int root, int ranks,
             double seconds, double median_seconds, std::optional<std::int64_t> wrong) {
  Row row;
  row.collective = c;
  row.bytes = shape.bytes;
  row.count = shape.count;
  row.type = std::string(type_name(dtype));
  row.redop = reduces(c) ? std::string(op_name(op)) : "none";
  row.root = c == Collective::kBroadcast ? root : -1;
  row.seconds = seconds;
  row.median_seconds = median_seconds;
  row.algbw = seconds > 0 ? static_cast<double>(shape.bytes) / seconds / 1e9 : 0;
  row.busbw = row.algbw * bus_factor(c, ranks);
  row.wrong = wrong;
  return row;
}

void print_preamble(const Options& o, const RunInfo& info) {
  std::printf(
      "# ringsync-bench: %s, %d ranks (%d node(s) x %d local), shared-memory buffers "
      "(zero copy), out of place\n",
      list_of(o).c_str(), info.ranks, info.nodes, info.local_size);
  std::printf("# minBytes %" PRIu64 " maxBytes %" PRIu64 " step: %" PRIu64
              "(factor) warmup iters: %d iters: %d validation: %d\n",
              o.min_bytes, o.max_bytes, o.step_factor, o.warmup_iters, o.iters, o.check ? 1 : 0);
  std::fflush(stdout);
}

void print_section(Collective c, const RunInfo& info) {
  std::printf("#\n# %s, %d ranks\n", std::string(collective_name(c)).c_str(), info.ranks);
  std::printf("#%12s %13s %9s %6s %6s %10s %8s %8s %7s\n", "size", "count", "type", "redop", "root",
              "time", "algbw", "busbw", "#wrong");
  std::printf("#%12s %13s %9s %6s %6s %10s %8s %8s %7s\n", "(B)", "(elements)", "", "", "", "(us)",
              "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

void print_row(const Row& r) {
  const std::string wrong = r.wrong ? std::to_string(*r.wrong) : "N/A";
  std::printf(" %12" PRIu64 " %13zu %9s %6s %6d %10.1f %8.2f %8.2f %7s\n", r.bytes, r.count,
              r.type.c_str(), r.redop.c_str(), r.root, r.seconds * 1e6, r.algbw, r.busbw,
              wrong.c_str());
  std::fflush(stdout);
}

void print_summary(const std::vector<Row>& rows) {
  const std::int64_t wrong = total_wrong(rows);
  std::printf("# Out of bounds values : %" PRId64 " %s\n", wrong, wrong ? "FAILED" : "OK");
  // The value last, as nccl-tests prints it, for scripts that take the last field.
  std::printf("# Avg bus bandwidth    : %g\n", average_busbw(rows));
  std::fflush(stdout);
}

double median_of(std::vector<double> times) {
  if (times.empty()) return 0;
  const std::size_t mid = times.size() / 2;
  std::nth_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(mid), times.end());
  if (times.size() % 2) return times[mid];
  const double upper = times[mid];
  return (*std::max_element(times.begin(), times.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2;
}

bool write_csv(std::ostream& out, const std::vector<Row>& rows, const RunInfo& info) {
  out << "collective,size_bytes,count,type,redop,root,time_us,median_us,algbw_gbps,busbw_gbps,wrong,"
         "ranks,nodes,date\n";
  for (const Row& r : rows)
    out << collective_name(r.collective) << ',' << r.bytes << ',' << r.count << ',' << r.type << ','
        << r.redop << ',' << r.root << ',' << format("%.3f", r.seconds * 1e6) << ','
        << format("%.3f", r.median_seconds * 1e6) << ','
        << format("%.6g", r.algbw) << ',' << format("%.6g", r.busbw) << ','
        << (r.wrong ? std::to_string(*r.wrong) : "") << ',' << info.ranks << ',' << info.nodes
        << ',' << info.date << '\n';
  out.flush();
  return static_cast<bool>(out);
}

bool write_json(std::ostream& out, const std::vector<Row>& rows, const RunInfo& info,
                const Options& o) {
  out << "{\n  \"tool\": \"ringsync-bench\",\n  \"date\": " << json_string(info.date)
      << ",\n  \"ranks\": " << info.ranks << ",\n  \"nodes\": " << info.nodes
      << ",\n  \"local_size\": " << info.local_size << ",\n  \"iters\": " << o.iters
      << ",\n  \"warmup_iters\": " << o.warmup_iters
      << ",\n  \"check\": " << (o.check ? "true" : "false") << ",\n  \"rows\": [";
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    out << (i ? ",\n" : "\n")
        << "    {\"collective\": " << json_string(std::string(collective_name(r.collective)))
        << ", \"size_bytes\": " << r.bytes << ", \"count\": " << r.count
        << ", \"type\": " << json_string(r.type) << ", \"redop\": " << json_string(r.redop)
        << ", \"root\": " << r.root << ", \"time_us\": " << format("%.3f", r.seconds * 1e6)
        << ", \"median_us\": " << format("%.3f", r.median_seconds * 1e6)
        << ", \"algbw_gbps\": " << format("%.6g", r.algbw)
        << ", \"busbw_gbps\": " << format("%.6g", r.busbw)
        << ", \"wrong\": " << (r.wrong ? std::to_string(*r.wrong) : "null") << "}";
  }
  out << (rows.empty() ? "],\n" : "\n  ],\n");
  out << "  \"avg_busbw_gbps\": " << format("%.6g", average_busbw(rows))
      << ",\n  \"wrong_total\": " << total_wrong(rows) << "\n}\n";
  out.flush();
  return static_cast<bool>(out);
}

}  // namespace ringsync::bench
