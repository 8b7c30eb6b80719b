#include "common/log.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

#include "common/text.h"

namespace ringsync::log {

using text::lower;
using text::trim;
namespace {

constexpr std::string_view kLevelVar = "RINGSYNC_LOG_LEVEL";
constexpr std::string_view kSubsysVar = "RINGSYNC_LOG_SUBSYS";
constexpr std::size_t kMaxSubsysName = 32;

// The subsystem filter is read under a lock only when it is not "all" and the
// level already passed; the common case is the lock-free flag.
std::mutex g_filter_mutex;
SubsystemFilter g_filter;
std::atomic<bool> g_all_subsystems{true};

std::mutex g_write_mutex;

bool contains(const std::vector<std::string>& names, std::string_view name) {
  for (const std::string& n : names) {
    if (n == name) return true;
  }
  return false;
}

std::string_view padded_level(Level l) {
  switch (l) {
    case Level::kError: return "ERROR";
    case Level::kWarn: return "WARN ";
    case Level::kInfo: return "INFO ";
    case Level::kDebug: return "DEBUG";
    case Level::kTrace: return "TRACE";
  }
  return "?????";
}

// 2026-12-02T12:00:00.123Z
std::string utc_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const auto since_epoch = now.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since_epoch);
  const auto millis = std::chrono::duration_cast<std::chrono::milliseconds>(since_epoch - secs).count();
  const std::time_t t = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, static_cast<int>(millis));
  return buf;
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // stderr is gone; there is nowhere left to report it
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

void install_filter(SubsystemFilter filter) {
  std::lock_guard<std::mutex> lock(g_filter_mutex);
  g_all_subsystems.store(filter.allows_everything(), std::memory_order_relaxed);
  g_filter = std::move(filter);
}

}  // namespace

std::string_view level_name(Level l) {
  switch (l) {
    case Level::kError: return "error";
    case Level::kWarn: return "warn";
    case Level::kInfo: return "info";
    case Level::kDebug: return "debug";
    case Level::kTrace: return "trace";
  }
  return "unknown";
}

Result<Level> parse_level(std::string_view text) {
  const std::string v = lower(trim(text));
  for (Level l : {Level::kError, Level::kWarn, Level::kInfo, Level::kDebug, Level::kTrace}) {
    if (v == level_name(l)) return l;
  }
  if (v == "warning") return Level::kWarn;
  return Status::InvalidArgument("unknown log level '" + std::string(text) +
                                 "'; expected one of error, warn, info, debug, trace");
}

Result<SubsystemFilter> SubsystemFilter::parse(std::string_view spec) {
  SubsystemFilter f;
  f.include_all_ = false;
  bool saw_all = false;
  const std::string_view whole = trim(spec);
  if (whole.empty()) return SubsystemFilter();
  std::size_t start = 0;
  while (start <= whole.size()) {
    const std::size_t comma = std::min(whole.find(',', start), whole.size());
    std::string_view item = trim(whole.substr(start, comma - start));
    start = comma + 1;
    const std::string where = " in subsystem list '" + std::string(whole) + "'";
    if (item.empty()) return Status::InvalidArgument("empty entry" + where);
    const bool exclude = item.front() == '^';
    if (exclude) item = trim(item.substr(1));
    const std::string name = lower(item);
    if (name.empty()) return Status::InvalidArgument("'^' without a subsystem name" + where);
    if (name.size() > kMaxSubsysName) {
      return Status::InvalidArgument("subsystem name '" + name + "' is longer than 32 characters" + where);
    }
    for (char c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
        return Status::InvalidArgument("subsystem name '" + name +
                                       "' may hold only letters, digits, '-' and '_'" + where);
      }
    }
    if (name == "all") {
      if (exclude) return Status::InvalidArgument("'^all' would silence everything; lower the log level instead");
      saw_all = true;
      continue;
    }
    std::vector<std::string>& same = exclude ? f.excluded_ : f.included_;
    const std::vector<std::string>& other = exclude ? f.included_ : f.excluded_;
    if (contains(other, name)) {
      return Status::InvalidArgument("subsystem '" + name + "' is both included and excluded" + where);
    }
    if (!contains(same, name)) same.push_back(name);
  }
  f.include_all_ = saw_all || f.included_.empty();
  if (f.include_all_) f.included_.clear();
  return f;
}

bool SubsystemFilter::allows(std::string_view subsys) const {
  if (contains(excluded_, subsys)) return false;
  return include_all_ || contains(included_, subsys);
}

std::string SubsystemFilter::to_string() const {
  std::string out = include_all_ ? "all" : "";
  for (const std::string& n : included_) out += (out.empty() ? "" : ",") + n;
  for (const std::string& n : excluded_) out += (out.empty() ? "^" : ",^") + n;
  return out;
}

Status configure(Level lvl, std::string_view subsys_filter) {
  auto filter = SubsystemFilter::parse(subsys_filter);
  if (!filter.ok()) return filter.status();
  install_filter(std::move(filter).value());
  detail::g_max_level.store(static_cast<int>(lvl), std::memory_order_relaxed);
  return Status::Ok();
}

Status configure(std::string_view lvl, std::string_view subsys_filter) {
  auto parsed = parse_level(lvl);
  if (!parsed.ok()) return parsed.status();
  return configure(parsed.value(), subsys_filter);
}

Status configure_from_environment(Level default_level, const std::map<std::string, std::string>& env) {
  Level lvl = default_level;
  std::string subsys = "all";
  if (auto it = env.find(std::string(kLevelVar)); it != env.end() && !trim(it->second).empty()) {
    auto parsed = parse_level(it->second);
    if (!parsed.ok()) return Status::InvalidArgument(std::string(kLevelVar) + ": " + parsed.status().message());
    lvl = parsed.value();
  }
  if (auto it = env.find(std::string(kSubsysVar)); it != env.end()) subsys = it->second;
  Status s = configure(lvl, subsys);
  if (!s.ok()) return Status::InvalidArgument(std::string(kSubsysVar) + ": " + s.message());
  return s;
}

Status configure_from_environment(Level default_level) {
  std::map<std::string, std::string> env;
  for (std::string_view name : {kLevelVar, kSubsysVar}) {
    if (const char* value = std::getenv(std::string(name).c_str())) env[std::string(name)] = value;
  }
  return configure_from_environment(default_level, env);
}

Level current_level() {
  return static_cast<Level>(detail::g_max_level.load(std::memory_order_relaxed));
}

std::string current_subsys_filter() {
  std::lock_guard<std::mutex> lock(g_filter_mutex);
  return g_filter.to_string();
}

bool enabled(Level lvl, std::string_view subsys) {
  return detail::level_passes(lvl) && detail::subsys_passes(subsys);
}

namespace detail {

std::atomic<int> g_max_level{static_cast<int>(Level::kWarn)};

bool subsys_passes(std::string_view subsys) {
  if (g_all_subsystems.load(std::memory_order_relaxed)) return true;
  std::lock_guard<std::mutex> lock(g_filter_mutex);
  return g_filter.allows(subsys);
}

std::string format_line(Level lvl, std::string_view subsys, std::string_view message) {
  std::string line = utc_timestamp();
  line += ' ';
  line += padded_level(lvl);
  line += ' ';
  line += subsys;
  line += '[';
  line += std::to_string(::getpid());
  line += "] ";
  while (!message.empty() && (message.back() == '\n' || message.back() == '\r')) message.remove_suffix(1);
  for (char c : message) {
    if (c == '\n') {
      line += "\\n";
    } else if (c == '\r') {
      line += "\\r";
    } else {
      line += c;
    }
  }
  line += '\n';
  return line;
}

Record::~Record() {
  const std::string line = format_line(level_, subsys_, message_.view());
  std::lock_guard<std::mutex> lock(g_write_mutex);
  write_all(STDERR_FILENO, line);
}

}  // namespace detail
}  // namespace ringsync::log
