#include "cli/top/render.h"

#include <algorithm>
#include <cstdio>
#include <vector>

namespace ringsync::cli::top {
namespace {

constexpr const char* kNone = "-";

std::string printf_string(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string count(std::optional<double> v) { return v ? printf_string("%.0f", *v) : kNone; }
std::string bandwidth(std::optional<double> v) { return v ? format_bandwidth(*v) : kNone; }
std::string wait(std::optional<double> v) { return v ? format_wait(*v) : kNone; }
std::string text_or_none(const std::string& s) { return s.empty() ? kNone : s; }

// Columns as wide as their widest cell, two spaces apart; a row's last cell is
// not padded (a DOWN node's error runs on).
class Table {
 public:
  explicit Table(std::vector<std::string> header) { rows_.push_back(std::move(header)); }
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }
  bool empty() const { return rows_.size() == 1; }

  void append_to(std::string& out) const {
    std::vector<std::size_t> width;
    for (const auto& row : rows_)
      for (std::size_t c = 0; c + 1 < row.size(); ++c) {
        if (width.size() <= c) width.resize(c + 1, 0);
        width[c] = std::max(width[c], row[c].size());
      }
    for (const auto& row : rows_) {
      std::string line = "  ";
      for (std::size_t c = 0; c < row.size(); ++c) {
        line += row[c];
        if (c + 1 < row.size()) line.append(width[c] - row[c].size() + 2, ' ');
      }
      while (!line.empty() && line.back() == ' ') line.pop_back();
      out += line + "\n";
    }
  }

 private:
  std::vector<std::vector<std::string>> rows_;
};

void nodes_section(const View& view, std::string& out) {
  out += "NODES\n";
  Table table({"INSTANCE", "STATE", "CLIENTS", "STALLED", "JOB", "RING NODES", "EPOCH", "COLL/S", "BUSBW",
               "VERSION"});
  for (const NodeRow& n : view.nodes) {
    if (!n.up()) {
      table.add({n.instance, "DOWN", n.error});
      continue;
    }
    const std::vector<std::string> head = {n.instance, "up", count(n.clients), count(n.stalled_tensors)};
    if (n.jobs.empty()) {
      auto row = head;
      row.insert(row.end(), {kNone, kNone, kNone, kNone, kNone, text_or_none(n.version)});
      table.add(row);
    }
    for (const JobRow& j : n.jobs) {
      auto row = head;
      row.insert(row.end(), {j.job_id, count(j.ring_nodes), count(j.epoch),
                             j.collectives_per_second ? printf_string("%.1f", *j.collectives_per_second) : kNone,
                             bandwidth(j.bus_bandwidth), text_or_none(n.version)});
      table.add(row);
    }
  }
  table.append_to(out);
}

void links_section(const View& view, std::string& out) {
  const bool by_busy = std::any_of(view.links.begin(), view.links.end(),
                                   [](const LinkRow& l) { return l.busy_bandwidth.has_value(); });
  out += "\nLINKS  bytes/s: both planes over the interval; busy bw: data bytes sent / seconds a send was in flight;\n"
         "       slowest: lowest ";
  out += by_busy ? "busy bw" : "tx bytes/s (the daemons serve no send-busy seconds)";
  out += " of its job\n";
  Table table({"INSTANCE", "JOB", "PEER", "PEER ADDRESS", "DIR", "BYTES/S", "BUSY BW", "TRANSPORTS", ""});
  for (const LinkRow& l : view.links)
    table.add({l.instance, l.job_id, l.peer, text_or_none(l.peer_address), l.direction, bandwidth(l.bytes_per_second),
               bandwidth(l.busy_bandwidth), text_or_none(l.transports), l.slowest ? "<- slowest" : ""});
  if (table.empty())
    out += "  none (no ring has moved data yet)\n";
  else
    table.append_to(out);
}

void ranks_section(const View& view, std::string& out) {
  out += "\nRANKS  local ranks: how long after its node's first rank each one submitted, over the interval;\n"
         "       last: collectives in which it submitted last\n";
  Table table({"INSTANCE", "JOB", "RANK", "COLLECTIVES", "MEAN WAIT", "P90 WAIT", "LAST", ""});
  for (const RankRow& r : view.ranks)
    table.add({r.instance, r.job_id, r.rank, count(r.collectives), wait(r.mean_wait), wait(r.p90_wait),
               count(r.last), r.latest ? "<- latest" : ""});
  if (table.empty())
    out += "  none (no collective yet)\n";
  else
    table.append_to(out);
}

void stalls_section(const View& view, std::string& out) {
  out += "\nSTALLED TENSORS";
  std::string lines;
  for (const NodeRow& n : view.nodes) {
    if (!n.up()) continue;
    std::string line;
    if (n.stalled_tensors && *n.stalled_tensors > 0) line += count(n.stalled_tensors) + " stalled tensor(s) now";
    for (const JobRow& j : n.jobs)
      if (j.stall_reports && *j.stall_reports > 0)
        line += (line.empty() ? "" : "; ") + ("job " + j.job_id + ": " + count(j.stall_reports) + " stall report(s)");
    if (!line.empty()) lines += "  " + n.instance + "  " + line + "\n";
  }
  out += lines.empty() ? "  none\n" : "\n" + lines;
}

void waiting_section(const View& view, std::string& out) {
  out += "\nWAITING";
  const Waiting& w = view.waiting;
  if (w.rows.empty()) {
    out += "  none\n";
  } else {
    out += "  what each collective not done yet waits for (the daemons' /debug/inflight), oldest first\n";
    Table table({"INSTANCE", "JOB", "NODE", "PHASE", "WHAT", "AGE", "WAITS FOR"});
    for (const WaitRow& r : w.rows)
      table.add({r.instance, r.job_id, r.node, r.phase, r.what, format_wait(r.age_seconds), r.waits_for});
    table.append_to(out);
    for (const std::string& verdict : w.verdicts) out += "  => " + verdict + "\n";
  }
  for (const std::string& unread : w.unread) out += "  (no in-flight view from " + unread + ")\n";
}

void errors_section(const View& view, std::string& out) {
  out += "\nERRORS";
  if (view.interval_seconds <= 0) {
    out += "  (counted from the next refresh)\n";
    return;
  }
  if (view.errors.empty()) {
    out += "  none in the interval\n";
    return;
  }
  out += "  new in the interval, by kind\n";
  Table table({"INSTANCE", "KIND", "COUNT"});
  for (const ErrorRow& e : view.errors) {
    std::string added = "+";
    added += count(e.count);
    table.add({e.instance, e.kind, added});
  }
  table.append_to(out);
}

}  // namespace

std::string format_bandwidth(double v) {
  if (v < 1e3) return printf_string("%.0f B/s", v);
  if (v < 1e6) return printf_string("%.1f kB/s", v / 1e3);
  if (v < 1e9) return printf_string("%.1f MB/s", v / 1e6);
  return printf_string("%.2f GB/s", v / 1e9);
}

std::string format_wait(double s) {
  if (s < 1e-3) return printf_string("%.0f us", s * 1e6);
  if (s < 1) return printf_string("%.1f ms", s * 1e3);
  return printf_string("%.2f s", s);
}

std::string render(const View& view, const Frame& frame) {
  std::string out = "ringsync top: " + std::to_string(view.nodes_up()) + " of " + std::to_string(view.nodes.size()) +
                    " daemon(s) up";
  out += view.interval_seconds > 0 ? printf_string(", rates over %.2f s", view.interval_seconds)
                                   : std::string(", first look (rates from the next refresh)");
  if (!frame.job_id.empty()) out += ", job " + frame.job_id;
  if (!frame.clock.empty()) out += ", " + frame.clock;
  if (!frame.refreshing.empty()) out += " (refreshing " + frame.refreshing + "; Ctrl-C quits)";
  out += "\n\n";
  nodes_section(view, out);
  links_section(view, out);
  ranks_section(view, out);
  stalls_section(view, out);
  waiting_section(view, out);
  errors_section(view, out);
  return out;
}

}  // namespace ringsync::cli::top
