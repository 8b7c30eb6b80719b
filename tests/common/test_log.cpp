#include <doctest/doctest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/log.h"

namespace test_common_log {

using ringsync::StatusCode;
namespace rslog = ringsync::log;
using rslog::Level;
using rslog::SubsystemFilter;

namespace {

// Restores the process-wide log settings when a test ends.
class LogStateGuard {
 public:
  LogStateGuard() : level_(rslog::current_level()), filter_(rslog::current_subsys_filter()) {}
  ~LogStateGuard() { (void)rslog::configure(level_, filter_); }

 private:
  Level level_;
  std::string filter_;
};

// Points fd 2 at an unlinked temp file for the life of the object.
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    const char* dir = std::getenv("TMPDIR");
    std::string path = std::string(dir ? dir : "/tmp") + "/ringsync-log-XXXXXX";
    file_ = ::mkstemp(path.data());
    REQUIRE(file_ >= 0);
    ::unlink(path.c_str());
    saved_ = ::dup(STDERR_FILENO);
    REQUIRE(saved_ >= 0);
    REQUIRE(::dup2(file_, STDERR_FILENO) == STDERR_FILENO);
  }
  ~StderrCapture() {
    std::fflush(stderr);
    ::dup2(saved_, STDERR_FILENO);
    ::close(saved_);
    ::close(file_);
  }
  std::string text() const {
    std::string out;
    char buf[4096];
    for (off_t at = 0;;) {
      const ssize_t n = ::pread(file_, buf, sizeof buf, at);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
      at += n;
    }
    return out;
  }
  std::vector<std::string> lines() const {
    std::vector<std::string> out;
    std::istringstream in(text());
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  }

 private:
  int file_ = -1;
  int saved_ = -1;
};

const std::regex kLine(R"(^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z (ERROR|WARN |INFO |DEBUG|TRACE) )"
                       R"(([a-z0-9_-]+)\[(\d+)\] (.*)$)");

}  // namespace

TEST_CASE("levels parse case-insensitively and unknown ones are rejected") {
  CHECK(rslog::parse_level("error").value() == Level::kError);
  CHECK(rslog::parse_level("WARN").value() == Level::kWarn);
  CHECK(rslog::parse_level("warning").value() == Level::kWarn);
  CHECK(rslog::parse_level(" Info ").value() == Level::kInfo);
  CHECK(rslog::parse_level("debug").value() == Level::kDebug);
  CHECK(rslog::parse_level("trace").value() == Level::kTrace);
  auto bad = rslog::parse_level("loud");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().code() == StatusCode::kInvalidArgument);
  CHECK(bad.status().message() == "unknown log level 'loud'; expected one of error, warn, info, debug, trace");
  CHECK(rslog::level_name(Level::kDebug) == "debug");
}

TEST_CASE("subsystem filters include, exclude and default to all") {
  auto all = SubsystemFilter::parse("all");
  REQUIRE(all.ok());
  CHECK(all->allows("session"));
  CHECK(all->allows_everything());
  CHECK(all->to_string() == "all");
  CHECK(SubsystemFilter::parse("").value().allows_everything());

  auto some = SubsystemFilter::parse("session, RING");
  REQUIRE(some.ok());
  CHECK(some->allows("session"));
  CHECK(some->allows("ring"));
  CHECK_FALSE(some->allows("ucx"));
  CHECK(some->to_string() == "session,ring");

  auto except = SubsystemFilter::parse("^ucx,^shm");
  REQUIRE(except.ok());
  CHECK(except->allows("session"));
  CHECK_FALSE(except->allows("ucx"));
  CHECK_FALSE(except->allows("shm"));
  CHECK_FALSE(except->allows_everything());
  CHECK(except->to_string() == "all,^ucx,^shm");

  auto mixed = SubsystemFilter::parse("all,^ucx");
  REQUIRE(mixed.ok());
  CHECK(mixed->allows("ring"));
  CHECK_FALSE(mixed->allows("ucx"));

  auto round_trip = SubsystemFilter::parse(except->to_string());
  REQUIRE(round_trip.ok());
  CHECK(round_trip->to_string() == except->to_string());
}

TEST_CASE("bad subsystem filters name the problem") {
  auto message = [](std::string_view spec) { return SubsystemFilter::parse(spec).status().message(); };
  CHECK(message("session,,ring") == "empty entry in subsystem list 'session,,ring'");
  CHECK(message("^") == "'^' without a subsystem name in subsystem list '^'");
  CHECK(message("^all") == "'^all' would silence everything; lower the log level instead");
  CHECK(message("ses sion") ==
        "subsystem name 'ses sion' may hold only letters, digits, '-' and '_' in subsystem list 'ses sion'");
  CHECK(message("ring,^ring") == "subsystem 'ring' is both included and excluded in subsystem list 'ring,^ring'");
  CHECK(message(std::string(40, 'a')).find("is longer than 32 characters") != std::string::npos);
}

TEST_CASE("configure sets level and filter together, and bad input changes nothing") {
  LogStateGuard guard;
  REQUIRE(rslog::configure(Level::kDebug, "session,ring").ok());
  CHECK(rslog::current_level() == Level::kDebug);
  CHECK(rslog::current_subsys_filter() == "session,ring");
  CHECK(rslog::enabled(Level::kDebug, "session"));
  CHECK(rslog::enabled(Level::kError, "ring"));
  CHECK_FALSE(rslog::enabled(Level::kTrace, "session"));
  CHECK_FALSE(rslog::enabled(Level::kError, "ucx"));

  auto bad_filter = rslog::configure(Level::kTrace, "a,,b");
  CHECK(bad_filter.code() == StatusCode::kInvalidArgument);
  auto bad_level = rslog::configure("chatty", "all");
  CHECK(bad_level.message() == "unknown log level 'chatty'; expected one of error, warn, info, debug, trace");
  CHECK(rslog::current_level() == Level::kDebug);
  CHECK(rslog::current_subsys_filter() == "session,ring");

  REQUIRE(rslog::configure("warn", "^ucx").ok());
  CHECK(rslog::enabled(Level::kWarn, "session"));
  CHECK_FALSE(rslog::enabled(Level::kInfo, "session"));
  CHECK_FALSE(rslog::enabled(Level::kError, "ucx"));
}

TEST_CASE("configure_from_environment uses the program default unless the variables say otherwise") {
  LogStateGuard guard;
  REQUIRE(rslog::configure_from_environment(Level::kInfo, {}).ok());
  CHECK(rslog::current_level() == Level::kInfo);
  CHECK(rslog::current_subsys_filter() == "all");

  REQUIRE(rslog::configure_from_environment(Level::kWarn, {{"RINGSYNC_LOG_LEVEL", ""}}).ok());
  CHECK(rslog::current_level() == Level::kWarn);

  REQUIRE(rslog::configure_from_environment(Level::kInfo, {{"RINGSYNC_LOG_LEVEL", "trace"},
                                                         {"RINGSYNC_LOG_SUBSYS", "^shm"}})
              .ok());
  CHECK(rslog::current_level() == Level::kTrace);
  CHECK(rslog::current_subsys_filter() == "all,^shm");

  auto bad_level = rslog::configure_from_environment(Level::kInfo, {{"RINGSYNC_LOG_LEVEL", "verbose"}});
  CHECK(bad_level.message() ==
        "RINGSYNC_LOG_LEVEL: unknown log level 'verbose'; expected one of error, warn, info, debug, trace");
  auto bad_subsys = rslog::configure_from_environment(Level::kInfo, {{"RINGSYNC_LOG_SUBSYS", "^"}});
  CHECK(bad_subsys.message() == "RINGSYNC_LOG_SUBSYS: '^' without a subsystem name in subsystem list '^'");
  CHECK(rslog::current_subsys_filter() == "all,^shm");
}

TEST_CASE("a record is one line: UTC time, level, subsystem[pid], message") {
  LogStateGuard guard;
  REQUIRE(rslog::configure(Level::kInfo, "all").ok());
  StderrCapture capture;
  const int id = 7;
  RS_LOG(info, "session") << "client " << id << " connected";
  RS_LOG(error, "ring") << "peer lost";
  const auto lines = capture.lines();
  REQUIRE(lines.size() == 2);
  std::smatch m;
  REQUIRE(std::regex_match(lines[0], m, kLine));
  CHECK(m[1] == "INFO ");
  CHECK(m[2] == "session");
  CHECK(std::stol(m[3]) == ::getpid());
  CHECK(m[4] == "client 7 connected");
  CHECK(lines[0].find(" INFO  session[") == 24);
  REQUIRE(std::regex_match(lines[1], m, kLine));
  CHECK(m[1] == "ERROR");
  CHECK(m[4] == "peer lost");
}

TEST_CASE("filtered records write nothing and do not evaluate their arguments") {
  LogStateGuard guard;
  REQUIRE(rslog::configure(Level::kInfo, "^ucx").ok());
  StderrCapture capture;
  int evaluated = 0;
  auto touch = [&evaluated] { return ++evaluated; };
  RS_LOG(debug, "session") << touch();
  RS_LOG(trace, "ring") << touch();
  RS_LOG(error, "ucx") << touch();
  CHECK(evaluated == 0);
  CHECK(capture.text().empty());
  RS_LOG(warn, "session") << touch();
  CHECK(evaluated == 1);
  const auto lines = capture.lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].find(" WARN  session[") != std::string::npos);
  CHECK(lines[0].ends_with("] 1"));
}

TEST_CASE("RS_LOG nests under if/else without braces") {
  LogStateGuard guard;
  REQUIRE(rslog::configure(Level::kInfo, "all").ok());
  StderrCapture capture;
  bool took_else = false;
  for (bool flag : {true, false}) {
    if (flag)
      RS_LOG(info, "daemon") << "then branch";
    else
      took_else = true;
  }
  CHECK(took_else);
  const auto lines = capture.lines();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].ends_with("] then branch"));
}

TEST_CASE("embedded newlines stay on one line") {
  CHECK(rslog::detail::format_line(Level::kWarn, "config", "a\nb\n").ends_with(" WARN  config[" +
                                                                            std::to_string(::getpid()) +
                                                                            "] a\\nb\n"));
  CHECK(rslog::detail::format_line(Level::kTrace, "shm", "x\r\ny").ends_with("] x\\r\\ny\n"));
}

TEST_CASE("records from many threads never interleave") {
  LogStateGuard guard;
  REQUIRE(rslog::configure(Level::kTrace, "all").ok());
  constexpr int kThreads = 4;
  constexpr int kLines = 300;
  const std::string padding(200, 'x');
  StderrCapture capture;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &padding] {
      for (int i = 0; i < kLines; ++i) RS_LOG(trace, "collective") << "thread " << t << " line " << i << " " << padding;
    });
  }
  for (auto& th : threads) th.join();
  const auto lines = capture.lines();
  REQUIRE(lines.size() == kThreads * kLines);
  std::set<std::string> seen;
  const std::regex body(R"(thread (\d) line (\d+) x{200})");
  for (const std::string& line : lines) {
    std::smatch m;
    REQUIRE(std::regex_match(line, m, kLine));
    const std::string message = m[4];
    REQUIRE(std::regex_match(message, body));
    seen.insert(message);
  }
  CHECK(seen.size() == static_cast<std::size_t>(kThreads * kLines));
}

}  // namespace test_common_log
