#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/config.h"

namespace test_common_config {

using namespace std::chrono_literals;
using ringsync::Result;
using ringsync::StatusCode;
using ringsync::config::Config;
using ringsync::config::Kind;
using ringsync::config::Tunable;
using Env = std::map<std::string, std::string>;

namespace {

const std::vector<Tunable>& table() {
  static const std::vector<Tunable> t = {
      {"name", Kind::kString, "ringsync", "", "What to call this process."},
      {"count", Kind::kInt, "4", "ranks", "How many ranks take part."},
      {"buffer-size", Kind::kBytes, "64MiB", "bytes", "Size of the staging buffer."},
      {"timeout", Kind::kDuration, "30s", "seconds", "How long to wait for a peer."},
      {"verbose", Kind::kBool, "false", "", "Say more."},
      {"listen", Kind::kAddress, "127.0.0.1:9400", "", "Where to listen."},
      {"socket", Kind::kPath, "/tmp/rs.sock", "", "Unix socket path."},
  };
  return t;
}

Result<Config> parse(std::vector<std::string> args, const Env& env = {}, const std::vector<Tunable>& t = table()) {
  std::vector<const char*> argv{"prog"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  return Config::parse(t, static_cast<int>(argv.size()), argv.data(), env);
}

std::string error_of(std::vector<std::string> args, const Env& env = {}) {
  auto r = parse(std::move(args), env);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == StatusCode::kInvalidArgument);
  return r.status().message();
}

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// A config file under the temp directory, removed when the test ends.
class TempFile {
 public:
  explicit TempFile(const std::string& contents) {
    const char* dir = std::getenv("TMPDIR");
    std::string pattern = std::string(dir ? dir : "/tmp") + "/ringsync-config-XXXXXX";
    const int fd = ::mkstemp(pattern.data());
    REQUIRE(fd >= 0);
    ::close(fd);
    path_ = pattern;
    std::ofstream(path_) << contents;
  }
  ~TempFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

TEST_CASE("defaults when nothing is set") {
  auto cfg = parse({});
  REQUIRE(cfg.ok());
  CHECK(cfg->get_string("name") == "ringsync");
  CHECK(cfg->get_int("count") == 4);
  CHECK(cfg->get_bytes("buffer-size") == 64ull << 20);
  CHECK(cfg->get_duration("timeout") == 30s);
  CHECK_FALSE(cfg->get_bool("verbose"));
  CHECK(cfg->get_address("listen")->to_string() == "127.0.0.1:9400");
  CHECK(cfg->get_string("socket") == "/tmp/rs.sock");
  CHECK(cfg->get_string("buffer-size") == "64MiB");
  for (const Tunable& t : table()) CHECK(cfg->source(t.name) == "default");
  CHECK(cfg->positional().empty());
  CHECK_FALSE(cfg->help_requested());
  CHECK_FALSE(cfg->version_requested());
  CHECK(cfg->config_file().empty());
}

TEST_CASE("flag beats environment beats config file beats default") {
  TempFile file("# settings\n"
                "count = 7\n"
                "timeout = 2m\n"
                "buffer-size = 1G\n");
  const Env env{{"RINGSYNC_CONFIG", file.path()}, {"RINGSYNC_COUNT", "9"}, {"RINGSYNC_TIMEOUT", "45s"}};

  auto all = parse({"--count", "11"}, env);
  REQUIRE(all.ok());
  CHECK(all->get_int("count") == 11);
  CHECK(all->source("count") == "flag");
  CHECK(all->get_duration("timeout") == 45s);
  CHECK(all->source("timeout") == "env RINGSYNC_TIMEOUT");
  CHECK(all->get_bytes("buffer-size") == 1ull << 30);
  CHECK(all->source("buffer-size") == "file " + file.path() + ":4");
  CHECK(all->get_string("name") == "ringsync");
  CHECK(all->source("name") == "default");
  CHECK(all->config_file() == file.path());

  auto no_flag = parse({}, env);
  REQUIRE(no_flag.ok());
  CHECK(no_flag->get_int("count") == 9);
  CHECK(no_flag->source("count") == "env RINGSYNC_COUNT");

  auto file_only = parse({}, Env{{"RINGSYNC_CONFIG", file.path()}});
  REQUIRE(file_only.ok());
  CHECK(file_only->get_int("count") == 7);
  CHECK(file_only->source("count") == "file " + file.path() + ":2");
  CHECK(file_only->get_duration("timeout") == 2min);

  CHECK(all->dump() == "config = " + file.path() + " (env RINGSYNC_CONFIG)\n"
                       "name = ringsync (default)\n"
                       "count = 11 (flag)\n"
                       "buffer-size = 1G (file " + file.path() + ":4)\n"
                       "timeout = 45s (env RINGSYNC_TIMEOUT)\n"
                       "verbose = false (default)\n"
                       "listen = 127.0.0.1:9400 (default)\n"
                       "socket = /tmp/rs.sock (default)\n");
}

TEST_CASE("--config beats RINGSYNC_CONFIG and --config= reads no file") {
  TempFile from_env("count = 1\n");
  TempFile from_flag("count = 2\n");
  const Env env{{"RINGSYNC_CONFIG", from_env.path()}};
  auto cfg = parse({"--config", from_flag.path()}, env);
  REQUIRE(cfg.ok());
  CHECK(cfg->get_int("count") == 2);
  CHECK(contains(cfg->dump(), "config = " + from_flag.path() + " (flag)\n"));

  auto none = parse({"--config="}, env);
  REQUIRE(none.ok());
  CHECK(none->get_int("count") == 4);
  CHECK(none->config_file().empty());
}

TEST_CASE("config file syntax: comments, blanks, quotes, underscores") {
  TempFile file("\n"
                "   # indented comment\n"
                "name = \"has # inside \"   # trailing comment\n"
                "buffer_size=2K\n"
                "\t socket = /a#b\n"
                "listen = \n");
  auto cfg = parse({"--config=" + file.path()});
  REQUIRE(cfg.ok());
  CHECK(cfg->get_string("name") == "has # inside ");
  CHECK(cfg->get_bytes("buffer-size") == 2048);
  CHECK(cfg->source("buffer-size") == "file " + file.path() + ":4");
  CHECK(cfg->get_string("socket") == "/a#b");
  CHECK_FALSE(cfg->get_address("listen").has_value());
}

TEST_CASE("flag forms: separate value, = value, bare and --no- booleans, last wins") {
  auto cfg = parse({"--name", "alpha", "--count=-3", "--verbose", "--timeout=500ms", "--name=beta"});
  REQUIRE(cfg.ok());
  CHECK(cfg->get_string("name") == "beta");
  CHECK(cfg->get_int("count") == -3);
  CHECK(cfg->get_bool("verbose"));
  CHECK(cfg->source("verbose") == "flag");
  CHECK(cfg->get_duration("timeout") == 500ms);

  auto off = parse({"--no-verbose"}, Env{{"RINGSYNC_VERBOSE", "yes"}});
  REQUIRE(off.ok());
  CHECK_FALSE(off->get_bool("verbose"));
  CHECK(off->source("verbose") == "flag");

  auto explicit_value = parse({"--verbose=off"});
  REQUIRE(explicit_value.ok());
  CHECK_FALSE(explicit_value->get_bool("verbose"));

  auto empty = parse({"--name="});
  REQUIRE(empty.ok());
  CHECK(empty->get_string("name").empty());
  CHECK(contains(empty->dump(), "name = \"\" (flag)\n"));
}

TEST_CASE("positional arguments, bare booleans that do not swallow them, and --") {
  auto cfg = parse({"first", "--verbose", "second", "-", "--count", "2", "--", "--count", "-x"});
  REQUIRE(cfg.ok());
  CHECK(cfg->get_bool("verbose"));
  CHECK(cfg->get_int("count") == 2);
  CHECK(cfg->positional() == std::vector<std::string>{"first", "second", "-", "--count", "-x"});
}

TEST_CASE("--help, -h and --version win even over bad arguments") {
  auto help = parse({"--bogus", "--count=zz", "-h"});
  REQUIRE(help.ok());
  CHECK(help->help_requested());
  CHECK(help->get_int("count") == 4);
  auto version = parse({"--version"});
  REQUIRE(version.ok());
  CHECK(version->version_requested());
  CHECK_FALSE(version->help_requested());
  auto after_dashes = parse({"--", "--help"});
  REQUIRE(after_dashes.ok());
  CHECK_FALSE(after_dashes->help_requested());
}

TEST_CASE("unknown flags suggest the closest name") {
  CHECK(error_of({"--sockt", "/x"}) == "unknown flag '--sockt'; did you mean '--socket'? (--help lists every flag)");
  CHECK(contains(error_of({"--buffer_size=1M"}), "did you mean '--buffer-size'?"));
  CHECK(contains(error_of({"-socket"}), "unknown flag '-socket'; did you mean '--socket'?"));
  CHECK(contains(error_of({"--verbos"}), "did you mean '--verbose'?"));
  CHECK(contains(error_of({"--buffer"}), "did you mean '--buffer-size'?"));
  CHECK(error_of({"--frobnicate"}) == "unknown flag '--frobnicate' (--help lists every flag)");
}

TEST_CASE("flags missing their value") {
  CHECK(error_of({"--socket"}) == "flag --socket needs a value: --socket PATH or --socket=PATH");
  CHECK(error_of({"--timeout", "--verbose"}) ==
        "flag --timeout needs a value: --timeout DURATION or --timeout=DURATION");
  CHECK(error_of({"--config"}) == "flag --config needs a value: --config PATH or --config=PATH");
  CHECK(contains(error_of({"--no-count"}), "only on/off settings have a --no- form; use --count=N"));
  CHECK(error_of({"--no-verbose=yes"}) == "flag --no-verbose takes no value; use --verbose=yes");
}

TEST_CASE("bad values name the tunable, the source, the value and the expected form") {
  CHECK(error_of({"--buffer-size", "64X"}) ==
        "invalid value '64X' for buffer-size (from flag --buffer-size): unknown size unit 'X' (use K, M, G, T, P "
        "with an optional B or iB); expected a size such as 4096, 64K, 64MiB or 1.5GiB (binary multiples)");
  CHECK(error_of({}, Env{{"RINGSYNC_TIMEOUT", "soon"}}) ==
        "invalid value 'soon' for timeout (from env RINGSYNC_TIMEOUT): expected a number; expected a duration such "
        "as 250us, 500ms, 30s, 2m, 1h30m (a bare number means seconds)");
  CHECK(contains(error_of({"--count=four"}),
                 "invalid value 'four' for count (from flag --count): not a whole number; expected a whole number"));
  CHECK(contains(error_of({"--verbose=maybe"}),
                 "invalid value 'maybe' for verbose (from flag --verbose): not a boolean; expected one of true/false"));
  CHECK(contains(error_of({"--listen=[::1]:99999"}),
                 "invalid value '[::1]:99999' for listen (from flag --listen): port '99999' is not a number from 0 "
                 "to 65535; expected HOST:PORT"));
  TempFile file("name = x\ncount = 1.5\n");
  CHECK(error_of({"--config", file.path()}) ==
        "invalid value '1.5' for count (from file " + file.path() + ":2): not a whole number; expected " +
            std::string(ringsync::units::kIntForm));
}

TEST_CASE("config file errors give file and line") {
  TempFile unknown("count = 2\nbufer-size = 1M\n");
  CHECK(error_of({"--config", unknown.path()}) ==
        unknown.path() + ":2: unknown key 'bufer-size'; did you mean 'buffer-size'?");
  TempFile malformed("count 2\n");
  CHECK(error_of({"--config", malformed.path()}) == malformed.path() + ":1: expected 'name = value', got 'count 2'");
  TempFile twice("count = 2\n\ncount = 3\n");
  CHECK(error_of({"--config", twice.path()}) == twice.path() + ":3: 'count' is already set on line 1");
  TempFile nested("config = /etc/other.conf\n");
  CHECK(contains(error_of({"--config", nested.path()}), ":1: unknown key 'config': a config file cannot name"));
  TempFile quote("name = \"open\n");
  CHECK(contains(error_of({"--config", quote.path()}), ":1: missing closing '\"' in the value of 'name'"));
}

TEST_CASE("unreadable config files name the path and the reason") {
  CHECK(error_of({"--config", "/nonexistent/ringsync.conf"}) ==
        "cannot read config file '/nonexistent/ringsync.conf': No such file or directory (config file named by "
        "flag --config)");
  CHECK(error_of({}, Env{{"RINGSYNC_CONFIG", "/"}}) ==
        "cannot read config file '/': Is a directory (config file named by env RINGSYNC_CONFIG)");
}

TEST_CASE("a broken table is an internal error, not a user error") {
  std::vector<Tunable> duplicate = {{"a", Kind::kInt, "1", "", ""}, {"a", Kind::kInt, "2", "", ""}};
  auto d = parse({}, {}, duplicate);
  REQUIRE_FALSE(d.ok());
  CHECK(d.status().code() == StatusCode::kInternal);
  CHECK(d.status().message() == "tunable table: 'a' appears twice");

  auto bad_default = parse({}, {}, {{"size", Kind::kBytes, "lots", "bytes", ""}});
  REQUIRE_FALSE(bad_default.ok());
  CHECK(bad_default.status().code() == StatusCode::kInternal);
  CHECK(contains(bad_default.status().message(), "tunable table: invalid value 'lots' for size (from default)"));

  auto reserved = parse({}, {}, {{"help", Kind::kBool, "false", "", ""}});
  REQUIRE_FALSE(reserved.ok());
  CHECK(reserved.status().message() == "tunable table: 'help' is a built-in flag");

  auto bad_name = parse({}, {}, {{"Max_Size", Kind::kInt, "1", "", ""}});
  REQUIRE_FALSE(bad_name.ok());
  CHECK(bad_name.status().message() == "tunable table: 'Max_Size' is not a lower-case dashed name");
}

TEST_CASE("bounds: a value outside min..max is refused naming both, from any source; a bad bound is the table's") {
  const std::vector<Tunable> bounded = {{"window", Kind::kInt, "4", "chunks", "In flight.", "1", "64"},
                                        {"chunk", Kind::kBytes, "512KiB", "bytes", "A message.", "4KiB", ""},
                                        {"poll", Kind::kDuration, "100us", "seconds", "Spin.", "", "10ms"}};
  auto ok = parse({"--window=64", "--chunk=4K", "--poll=0"}, {}, bounded);
  REQUIRE_MESSAGE(ok.ok(), ok.status().message());
  CHECK(ok->get_int("window") == 64);

  auto above = parse({"--window=65"}, {}, bounded);
  REQUIRE_FALSE(above.ok());
  CHECK(above.status().code() == StatusCode::kInvalidArgument);
  CHECK(above.status().message() == "window must be between 1 and 64, got '65' (--window from flag)");
  CHECK(parse({"--window=0"}, {}, bounded).status().message() ==
        "window must be between 1 and 64, got '0' (--window from flag)");
  CHECK(parse({}, {{"RINGSYNC_CHUNK", "1K"}}, bounded).status().message() ==
        "chunk must be at least 4KiB, got '1K' (--chunk from env RINGSYNC_CHUNK)");
  CHECK(parse({"--poll=11ms"}, {}, bounded).status().message() ==
        "poll must be at most 10ms, got '11ms' (--poll from flag)");

  auto bad_default = parse({}, {}, {{"window", Kind::kInt, "0", "", "", "1", "64"}});
  CHECK(bad_default.status().code() == StatusCode::kInternal);
  CHECK(contains(bad_default.status().message(), "tunable table: window must be between 1 and 64, got '0'"));
  auto bad_bound = parse({}, {}, {{"window", Kind::kInt, "4", "", "", "one", ""}});
  CHECK(bad_bound.status().code() == StatusCode::kInternal);
  CHECK(contains(bad_bound.status().message(), "tunable table: bound 'one' of window"));
  auto unbounded_kind = parse({}, {}, {{"name", Kind::kString, "x", "", "", "a", ""}});
  CHECK(unbounded_kind.status().code() == StatusCode::kInternal);

  auto cfg = parse({}, {}, bounded);
  REQUIRE(cfg.ok());
  const std::string help = cfg->help_text("prog", "Does things.");
  CHECK(contains(help, "default: 4; unit: chunks; 1 to 64"));
  CHECK(contains(help, "unit: bytes; at least 4KiB"));
  CHECK(contains(help, "unit: seconds; at most 10ms"));
}

TEST_CASE("help lists every tunable with its flag, variable, default, unit and help") {
  auto cfg = parse({});
  REQUIRE(cfg.ok());
  const std::string help = cfg->help_text("prog", "Does things.");
  CHECK(help.starts_with("Usage: prog [OPTIONS]\n\nDoes things.\n\n"));
  CHECK(contains(help, "  --buffer-size SIZE\n      Size of the staging buffer.\n"
                       "      env RINGSYNC_BUFFER_SIZE; default: 64MiB; unit: bytes\n"));
  CHECK(contains(help, "  --[no-]verbose\n      Say more.\n      env RINGSYNC_VERBOSE; default: false\n"));
  for (const Tunable& t : table()) {
    CHECK(contains(help, t.kind == Kind::kBool ? "--[no-]" + t.name : ringsync::config::flag_name(t.name)));
    CHECK(contains(help, "env " + ringsync::config::env_name(t.name) + "; default: " + t.default_value));
    CHECK(contains(help, t.help));
    if (!t.unit.empty()) CHECK(contains(help, "unit: " + t.unit));
  }
  CHECK(contains(help, "  --config PATH\n"));
  CHECK(contains(help, "  -h, --help\n"));
  CHECK(contains(help, "  --version\n"));
  CHECK(contains(help, "K, KB and KiB all mean 1024"));
  CHECK(contains(help, "A bare number means seconds."));
  for (const std::string& line : [&] {
         std::vector<std::string> lines;
         std::istringstream in(help);
         for (std::string l; std::getline(in, l);) lines.push_back(l);
         return lines;
       }()) {
    CHECK(line.size() <= 80);
  }
}

TEST_CASE("names, variables and suggestions") {
  CHECK(ringsync::config::flag_name("max-frame-bytes") == "--max-frame-bytes");
  CHECK(ringsync::config::env_name("max-frame-bytes") == "RINGSYNC_MAX_FRAME_BYTES");
  const std::vector<std::string> names{"socket", "stall-warning", "collective-timeout"};
  CHECK(ringsync::config::closest_name("sokcet", names) == "socket");
  CHECK(ringsync::config::closest_name("collective", names) == "collective-timeout");
  CHECK(ringsync::config::closest_name("zzz", names).empty());
  CHECK(ringsync::config::closest_name("", names).empty());
}

TEST_CASE("environment_snapshot keeps RINGSYNC_* and the extra names asked for") {
  ::setenv("RINGSYNC_TEST_SNAPSHOT", "1", 1);
  ::setenv("RINGSYNC_TEST_EXTRA_ONLY", "2", 1);
  ::setenv("OTHER_TEST_SNAPSHOT", "3", 1);
  const auto plain = ringsync::config::environment_snapshot();
  CHECK(plain.at("RINGSYNC_TEST_SNAPSHOT") == "1");
  CHECK(plain.count("OTHER_TEST_SNAPSHOT") == 0);
  const auto extra = ringsync::config::environment_snapshot({"OTHER_TEST_SNAPSHOT", "UNSET_TEST_NAME"});
  CHECK(extra.at("OTHER_TEST_SNAPSHOT") == "3");
  CHECK(extra.count("UNSET_TEST_NAME") == 0);
  ::unsetenv("RINGSYNC_TEST_SNAPSHOT");
  ::unsetenv("RINGSYNC_TEST_EXTRA_ONLY");
  ::unsetenv("OTHER_TEST_SNAPSHOT");
}

TEST_CASE("reading a tunable as the wrong kind is a programming error that aborts") {
  auto cfg = parse({});
  REQUIRE(cfg.ok());
  for (int which = 0; which < 2; ++which) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      std::signal(SIGABRT, SIG_DFL);  // not the test framework's crash report
      (void)std::freopen("/dev/null", "w", stderr);
      if (which == 0) (void)cfg->get_int("timeout");
      if (which == 1) (void)cfg->get_string("no-such-tunable");
      ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGABRT);
  }
}

}  // namespace test_common_config
