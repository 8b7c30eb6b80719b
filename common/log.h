// Leveled logging with a subsystem filter, one atomic line per record on stderr:
//
//   2026-12-02T12:00:00.123Z INFO  session[4242] client 7 connected
//
//   RS_LOG(info, "session") << "client " << id << " connected";
//
// Levels, most to least severe: error, warn, info, debug, trace. A subsystem is a
// short lower-case name of the part of the system that speaks ("daemon", "client",
// "session", "collective", "metrics", "config", "shm", "ring", "ucx", ...).
//
// Configuration (read once by the program at start-up, or set programmatically):
//   RINGSYNC_LOG_LEVEL  error | warn | info | debug | trace (default chosen by the
//                       program: the daemon uses info, the client library warn)
//   RINGSYNC_LOG_SUBSYS comma list of subsystems, "all" (the default) for every
//                       one, "^name" to exclude one: "session,ring", "^ucx,^shm".
//                       With only exclusions the rest are all included.
//
// A record that is filtered out by level costs one relaxed atomic load and one
// branch; its stream arguments are not evaluated. Records are thread safe: each is
// formatted privately and written with a single write(2) under a lock. Embedded
// newlines are written as "\n" so that a record stays on one line.
#pragma once

#include <atomic>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ringsync::log {

enum class Level : int { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3, kTrace = 4 };

// Lower-case spellings for the RS_LOG macro: RS_LOG(debug, "ring").
namespace level {
inline constexpr Level error = Level::kError;
inline constexpr Level warn = Level::kWarn;
inline constexpr Level info = Level::kInfo;
inline constexpr Level debug = Level::kDebug;
inline constexpr Level trace = Level::kTrace;
}  // namespace level

std::string_view level_name(Level l);  // "error", "warn", ...
// Case-insensitive; "warning" is accepted for warn.
Result<Level> parse_level(std::string_view text);

// Which subsystems may log. Parsed from the RINGSYNC_LOG_SUBSYS syntax.
class SubsystemFilter {
 public:
  SubsystemFilter() = default;  // every subsystem
  // "" and "all" allow everything. Errors name the offending item.
  static Result<SubsystemFilter> parse(std::string_view spec);

  bool allows(std::string_view subsys) const;
  bool allows_everything() const { return include_all_ && excluded_.empty(); }
  // Canonical form: "all", "session,ring", "all,^ucx".
  std::string to_string() const;

 private:
  bool include_all_ = true;
  std::vector<std::string> included_;
  std::vector<std::string> excluded_;
};

// Sets level and subsystem filter together; on bad input nothing changes.
Status configure(Level lvl, std::string_view subsys_filter);
Status configure(std::string_view lvl, std::string_view subsys_filter);
// Reads RINGSYNC_LOG_LEVEL and RINGSYNC_LOG_SUBSYS from `env` (missing or empty
// values fall back to `default_level` and "all"). Errors name the variable.
Status configure_from_environment(Level default_level, const std::map<std::string, std::string>& env);
// The same from the process environment.
Status configure_from_environment(Level default_level);

Level current_level();
std::string current_subsys_filter();

// Whether RS_LOG(lvl, subsys) would write.
bool enabled(Level lvl, std::string_view subsys);

namespace detail {

// Most verbose level that is written; warn until the program configures logging.
extern std::atomic<int> g_max_level;

inline bool level_passes(Level lvl) {
  return static_cast<int>(lvl) <= g_max_level.load(std::memory_order_relaxed);
}
bool subsys_passes(std::string_view subsys);

// One record: collects the message, writes the line when destroyed.
class Record {
 public:
  Record(Level lvl, std::string_view subsys) : level_(lvl), subsys_(subsys) {}
  Record(const Record&) = delete;
  Record& operator=(const Record&) = delete;
  ~Record();
  std::ostream& stream() { return message_; }

 private:
  Level level_;
  std::string_view subsys_;
  std::ostringstream message_;
};

// Turns the stream expression into void so both arms of RS_LOG's ?: agree; '&'
// binds looser than '<<', so it applies after the whole message was streamed.
struct Voidify {
  void operator&(std::ostream&) const {}
};

// The complete line for a record, without writing it (exposed for tests).
std::string format_line(Level lvl, std::string_view subsys, std::string_view message);

}  // namespace detail
}  // namespace ringsync::log

// RS_LOG(level, "subsystem") << ...;   level is one of error warn info debug trace;
// the subsystem is a string literal. An expression, so it nests under if/else.
#define RS_LOG(lvl, subsys)                                                              \
  !(::ringsync::log::detail::level_passes(::ringsync::log::level::lvl) &&                \
    ::ringsync::log::detail::subsys_passes(subsys))                                      \
      ? (void)0                                                                          \
      : ::ringsync::log::detail::Voidify() &                                             \
            ::ringsync::log::detail::Record(::ringsync::log::level::lvl, (subsys)).stream()
