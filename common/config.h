// One typed table of tunables, settable by flag, environment variable and config
// file, read once at start-up.
//
// A tunable named "max-frame-bytes" is set by
//   flag         --max-frame-bytes 64KiB   or --max-frame-bytes=64KiB
//   environment  RINGSYNC_MAX_FRAME_BYTES=64KiB
//   config file  max-frame-bytes = 64KiB   (max_frame_bytes is accepted too)
// Precedence: flag > environment > config file > the table's default. The config
// file is named by --config PATH or RINGSYNC_CONFIG; it holds `name = value` lines,
// blank lines and comments ('#' at the start of a line or after a blank). A value
// may be wrapped in double quotes to keep a '#' or surrounding blanks.
//
// Booleans also take a bare --name (true) and --no-name (false); `--name VALUE` is
// not read as a boolean's value (use --name=VALUE), so a boolean never swallows
// the next argument. "--" ends the flags; every later argument is positional.
// --help/-h and --version anywhere before "--" win over everything else: parse()
// then succeeds with the defaults, so a program can always print its help.
//
// Values are checked by kind when parsed (forms in common/units.h): sizes use
// binary multiples (64K = 64KiB = 65536), a bare duration is seconds, addresses
// are HOST:PORT or [IPv6]:PORT (or "off"/"" for none).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/units.h"

namespace ringsync::config {

enum class Kind { kString, kInt, kBytes, kDuration, kBool, kAddress /* HOST:PORT */, kPath };

// "string", "int", "bytes", "duration", "bool", "address", "path".
std::string_view kind_name(Kind kind);
// What a value looks like in usage lines: "TEXT", "N", "SIZE", "DURATION", "BOOL",
// "HOST:PORT", "PATH".
std::string_view kind_metavar(Kind kind);

struct Tunable {
  std::string name;           // "socket" -> flag --socket, env RINGSYNC_SOCKET, file key socket
  Kind kind = Kind::kString;
  std::string default_value;  // in the same form a user would type; checked by parse()
  std::string unit;           // shown in the help: "bytes", "seconds", "threads"
  std::string help;           // one or two sentences: what it does, what the default means
  // Bounds of an int, bytes or duration tunable, inclusive, typed as a user
  // would ("1", "4KiB", "10ms"); "" for none. parse() refuses a value outside
  // them, naming both, and --help shows them.
  std::string min = "";
  std::string max = "";
};

// The environment variable for the config file.
inline constexpr std::string_view kConfigFileEnv = "RINGSYNC_CONFIG";

std::string flag_name(std::string_view tunable);  // "--max-frame-bytes"
std::string env_name(std::string_view tunable);   // "RINGSYNC_MAX_FRAME_BYTES"

class Config {
 public:
  // `env` is a snapshot of the environment (see environment_snapshot()) so that
  // tests are hermetic. Errors: unknown flag (with the closest known name), a flag
  // without its value, a value of the wrong form (naming the tunable, its source,
  // the value and the expected form), an unknown key or a malformed line in the
  // config file (with file:line), an unreadable config file, and a table whose
  // names or defaults are themselves invalid.
  static Result<Config> parse(const std::vector<Tunable>& table, int argc, const char* const* argv,
                              const std::map<std::string, std::string>& env);

  // Typed access. Precondition: `name` is in the table with a matching kind
  // (get_string accepts every kind and returns the text as given). Breaking it is
  // a programming error and aborts with a message naming the tunable.
  std::string get_string(std::string_view name) const;
  std::int64_t get_int(std::string_view name) const;
  std::uint64_t get_bytes(std::string_view name) const;
  std::chrono::nanoseconds get_duration(std::string_view name) const;
  bool get_bool(std::string_view name) const;
  std::optional<units::Address> get_address(std::string_view name) const;  // nullopt: "off"

  // "default", "flag", "env RINGSYNC_X" or "file PATH:LINE".
  std::string source(std::string_view name) const;

  // Usage, the summary, every tunable (flag, environment variable, default, unit,
  // help), the built-in flags and the accepted value forms.
  std::string help_text(std::string_view program, std::string_view summary) const;
  // "name = value (source)" lines, one per tunable, for the start-up log; led by
  // "config = PATH (source)" when a config file was read.
  std::string dump() const;

  bool help_requested() const { return help_requested_; }
  bool version_requested() const { return version_requested_; }
  std::vector<std::string> positional() const { return positional_; }

  // The config file that was read ("" if none) and the snapshot parse() saw.
  const std::string& config_file() const { return config_file_; }
  const std::map<std::string, std::string>& environment() const { return env_; }
  const std::vector<Tunable>& tunables() const { return table_; }

 private:
  struct Value {
    std::string text;
    std::string source;
    std::int64_t integer = 0;
    std::uint64_t bytes = 0;
    std::chrono::nanoseconds duration{0};
    bool boolean = false;
    std::optional<units::Address> address;
  };

  Config() = default;
  const Value& lookup(std::string_view name, std::optional<Kind> kind) const;

  std::vector<Tunable> table_;
  std::vector<Value> values_;  // parallel to table_
  std::map<std::string, std::string> env_;
  std::vector<std::string> positional_;
  std::string config_file_;
  std::string config_file_source_;
  bool help_requested_ = false;
  bool version_requested_ = false;

  friend class ConfigParser;
};

// RINGSYNC_* variables from the process environment, plus any of `extra_names`
// that are set (e.g. XDG_RUNTIME_DIR).
std::map<std::string, std::string> environment_snapshot(const std::vector<std::string>& extra_names = {});

// Edit-distance closest of `candidates` to `word`, or "" when none is close.
std::string closest_name(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace ringsync::config
