#include "common/config.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>

#include "common/config_file.h"

namespace ringsync::config {
namespace {

constexpr std::string_view kBuiltinFlags[] = {"config", "help", "version"};

std::string_view value_form(Kind kind) {
  switch (kind) {
    case Kind::kString: return "any text";
    case Kind::kInt: return units::kIntForm;
    case Kind::kBytes: return units::kBytesForm;
    case Kind::kDuration: return units::kDurationForm;
    case Kind::kBool: return units::kBoolForm;
    case Kind::kAddress: return units::kAddressForm;
    case Kind::kPath: return "a file system path";
  }
  return "a value";
}

bool valid_tunable_name(std::string_view name) {
  if (name.empty() || !std::islower(static_cast<unsigned char>(name.front())) || name.back() == '-') return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool ok = std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) ||
                    (c == '-' && name[i - 1] != '-');
    if (!ok) return false;
  }
  return true;
}

// "flag --x" for messages; the other sources already say where they came from.
std::string describe_source(const std::string& source, std::string_view name) {
  return source == "flag" ? "flag " + flag_name(name) : source;
}

}  // namespace

std::string_view kind_name(Kind kind) {
  switch (kind) {
    case Kind::kString: return "string";
    case Kind::kInt: return "int";
    case Kind::kBytes: return "bytes";
    case Kind::kDuration: return "duration";
    case Kind::kBool: return "bool";
    case Kind::kAddress: return "address";
    case Kind::kPath: return "path";
  }
  return "unknown";
}

std::string_view kind_metavar(Kind kind) {
  switch (kind) {
    case Kind::kString: return "TEXT";
    case Kind::kInt: return "N";
    case Kind::kBytes: return "SIZE";
    case Kind::kDuration: return "DURATION";
    case Kind::kBool: return "BOOL";
    case Kind::kAddress: return "HOST:PORT";
    case Kind::kPath: return "PATH";
  }
  return "VALUE";
}

std::string flag_name(std::string_view tunable) { return "--" + std::string(tunable); }

std::string env_name(std::string_view tunable) {
  std::string out = "RINGSYNC_";
  for (char c : tunable) out += c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Builds a Config in four steps: check the table, read the arguments, read the
// config file, then settle every value by precedence and check it by kind.
class ConfigParser {
 public:
  ConfigParser(const std::vector<Tunable>& table, const std::map<std::string, std::string>& env) {
    c_.table_ = table;
    c_.env_ = env;
    c_.values_.resize(table.size());
  }

  Status check_table() {
    for (std::size_t i = 0; i < c_.table_.size(); ++i) {
      const Tunable& t = c_.table_[i];
      if (!valid_tunable_name(t.name)) {
        return Status::Internal("tunable table: '" + t.name + "' is not a lower-case dashed name");
      }
      for (std::string_view builtin : kBuiltinFlags) {
        if (t.name == builtin) return Status::Internal("tunable table: '" + t.name + "' is a built-in flag");
      }
      if (index_of(t.name) != i) return Status::Internal("tunable table: '" + t.name + "' appears twice");
      RINGSYNC_RETURN_IF_ERROR(assign(i, t.default_value, "default"));
    }
    return Status::Ok();
  }

  // --help/-h/--version before "--" win over every other argument.
  bool scan_for_help(int argc, const char* const* argv) {
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      if (a == "--") break;
      if (a == "--help" || a == "-h") c_.help_requested_ = true;
      if (a == "--version") c_.version_requested_ = true;
    }
    return c_.help_requested_ || c_.version_requested_;
  }

  Status read_args(int argc, const char* const* argv) {
    bool only_positional = false;
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      if (only_positional || a.size() < 2 || a[0] != '-' || std::isdigit(static_cast<unsigned char>(a[1]))) {
        c_.positional_.emplace_back(a);
        continue;
      }
      if (a == "--") {
        only_positional = true;
        continue;
      }
      const std::size_t eq = a.find('=');
      const std::string_view key = a.substr(0, eq);
      const std::optional<std::string_view> inline_value =
          eq == std::string_view::npos ? std::nullopt : std::optional(a.substr(eq + 1));
      const std::string_view name = key.starts_with("--") ? key.substr(2) : std::string_view();
      if (name == "config") {
        auto path = take_value(name, "PATH", inline_value, argc, argv, i);
        if (!path.ok()) return path.status();
        config_path_ = *path;
        config_path_source_ = "flag";
        continue;
      }
      const std::size_t index = index_of(name);
      if (index < c_.table_.size()) {
        const Tunable& t = c_.table_[index];
        if (t.kind == Kind::kBool && !inline_value) {
          flags_[index] = "true";
          continue;
        }
        auto value = take_value(name, kind_metavar(t.kind), inline_value, argc, argv, i);
        if (!value.ok()) return value.status();
        flags_[index] = *value;
        continue;
      }
      if (name.starts_with("no-") && index_of(name.substr(3)) < c_.table_.size()) {
        const std::size_t positive = index_of(name.substr(3));
        const Tunable& t = c_.table_[positive];
        if (t.kind != Kind::kBool) {
          return Status::InvalidArgument("flag " + std::string(key) + " does not exist: only on/off settings have a " +
                                         "--no- form; use " + flag_name(t.name) + "=" +
                                         std::string(kind_metavar(t.kind)));
        }
        if (inline_value) {
          return Status::InvalidArgument("flag " + std::string(key) + " takes no value; use " + flag_name(t.name) +
                                         "=" + std::string(*inline_value));
        }
        flags_[positive] = "false";
        continue;
      }
      return unknown_flag(key);
    }
    return Status::Ok();
  }

  Status read_file() {
    if (config_path_source_.empty()) {
      const std::string var(kConfigFileEnv);
      if (auto it = c_.env_.find(var); it != c_.env_.end() && !it->second.empty()) {
        config_path_ = it->second;
        config_path_source_ = "env " + var;
      }
    }
    if (config_path_.empty()) return Status::Ok();  // "--config=" turns RINGSYNC_CONFIG off
    auto settings = read_config_file(config_path_, describe_source(config_path_source_, "config"));
    if (!settings.ok()) return settings.status();
    file_settings_ = std::move(settings).value();
    for (const FileSetting& s : file_settings_) {
      const std::size_t index = index_of(s.name);
      if (index < c_.table_.size()) {
        file_[index] = &s;
        continue;
      }
      std::string message = config_path_ + ":" + std::to_string(s.line) + ": unknown key '" + s.name + "'";
      if (s.name == "config") return Status::InvalidArgument(message + ": a config file cannot name another one");
      const std::string guess = closest_name(s.name, names());
      if (!guess.empty()) message += "; did you mean '" + guess + "'?";
      return Status::InvalidArgument(message);
    }
    c_.config_file_ = config_path_;
    c_.config_file_source_ = config_path_source_;
    return Status::Ok();
  }

  Status resolve() {
    for (std::size_t i = 0; i < c_.table_.size(); ++i) {
      const std::string var = env_name(c_.table_[i].name);
      if (auto f = flags_.find(i); f != flags_.end()) {
        RINGSYNC_RETURN_IF_ERROR(assign(i, f->second, "flag"));
      } else if (auto e = c_.env_.find(var); e != c_.env_.end()) {
        RINGSYNC_RETURN_IF_ERROR(assign(i, e->second, "env " + var));
      } else if (auto s = file_.find(i); s != file_.end()) {
        RINGSYNC_RETURN_IF_ERROR(
            assign(i, s->second->value, "file " + config_path_ + ":" + std::to_string(s->second->line)));
      }
    }
    return Status::Ok();
  }

  Config take() { return std::move(c_); }

 private:
  std::size_t index_of(std::string_view name) const {
    for (std::size_t i = 0; i < c_.table_.size(); ++i) {
      if (c_.table_[i].name == name) return i;
    }
    return c_.table_.size();
  }

  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const Tunable& t : c_.table_) out.push_back(t.name);
    return out;
  }

  Result<std::string> take_value(std::string_view name, std::string_view metavar,
                                 std::optional<std::string_view> inline_value, int argc, const char* const* argv,
                                 int& i) const {
    if (inline_value) return std::string(*inline_value);
    if (i + 1 < argc && !std::string_view(argv[i + 1]).starts_with("--")) return std::string(argv[++i]);
    const std::string flag = flag_name(name);
    return Status::InvalidArgument("flag " + flag + " needs a value: " + flag + " " + std::string(metavar) + " or " +
                                   flag + "=" + std::string(metavar));
  }

  Status unknown_flag(std::string_view key) const {
    std::vector<std::string> candidates;
    for (const Tunable& t : c_.table_) {
      candidates.push_back(flag_name(t.name));
      if (t.kind == Kind::kBool) candidates.push_back(flag_name("no-" + t.name));
    }
    for (std::string_view builtin : kBuiltinFlags) candidates.push_back(flag_name(builtin));
    std::string message = "unknown flag '" + std::string(key) + "'";
    const std::string guess = closest_name(key, candidates);
    if (!guess.empty()) message += "; did you mean '" + guess + "'?";
    return Status::InvalidArgument(message + " (--help lists every flag)");
  }

  // Checks `text` by the tunable's kind and stores it with its source.
  Status assign(std::size_t index, const std::string& text, std::string source) {
    const Tunable& t = c_.table_[index];
    Config::Value& v = c_.values_[index];
    Status bad;
    switch (t.kind) {
      case Kind::kString:
      case Kind::kPath:
        break;
      case Kind::kInt:
        if (auto r = units::parse_int(text); r.ok()) v.integer = *r; else bad = r.status();
        break;
      case Kind::kBytes:
        if (auto r = units::parse_bytes(text); r.ok()) v.bytes = *r; else bad = r.status();
        break;
      case Kind::kDuration:
        if (auto r = units::parse_duration(text); r.ok()) v.duration = *r; else bad = r.status();
        break;
      case Kind::kBool:
        if (auto r = units::parse_bool(text); r.ok()) v.boolean = *r; else bad = r.status();
        break;
      case Kind::kAddress:
        if (auto r = units::parse_address(text); r.ok()) v.address = *r; else bad = r.status();
        break;
    }
    if (!bad.ok()) {
      std::string message = "invalid value '" + text + "' for " + t.name + " (from " +
                            describe_source(source, t.name) + "): " + bad.message() + "; expected " +
                            std::string(value_form(t.kind));
      if (source == "default") return Status::Internal("tunable table: " + message);
      return Status::InvalidArgument(message);
    }
    RINGSYNC_RETURN_IF_ERROR(check_bounds(t, v, text, source));
    v.text = text;
    v.source = std::move(source);
    return Status::Ok();
  }

  // The value against the tunable's min and max (parsed as its kind).
  static Status check_bounds(const Tunable& t, const Config::Value& v, const std::string& text,
                             const std::string& source) {
    if (t.min.empty() && t.max.empty()) return Status::Ok();
    // -1 below, 0 within, 1 above the bound `bound` (low: a min).
    auto compare = [&](const std::string& bound) -> Result<int> {
      switch (t.kind) {
        case Kind::kInt: {
          auto b = units::parse_int(bound);
          if (!b.ok()) return b.status();
          return v.integer < *b ? -1 : v.integer > *b ? 1 : 0;
        }
        case Kind::kBytes: {
          auto b = units::parse_bytes(bound);
          if (!b.ok()) return b.status();
          return v.bytes < *b ? -1 : v.bytes > *b ? 1 : 0;
        }
        case Kind::kDuration: {
          auto b = units::parse_duration(bound);
          if (!b.ok()) return b.status();
          return v.duration < *b ? -1 : v.duration > *b ? 1 : 0;
        }
        default:
          return Status::InvalidArgument("only int, bytes and duration tunables have bounds");
      }
    };
    bool outside = false;
    for (const std::string* bound : {&t.min, &t.max}) {
      if (bound->empty()) continue;
      auto side = compare(*bound);
      if (!side.ok())
        return Status::Internal("tunable table: bound '" + *bound + "' of " + t.name + ": " + side.status().message());
      outside = outside || (bound == &t.min ? *side < 0 : *side > 0);
    }
    if (!outside) return Status::Ok();
    const std::string range = t.max.empty()   ? "at least " + t.min
                              : t.min.empty() ? "at most " + t.max
                                              : "between " + t.min + " and " + t.max;
    const std::string message = t.name + " must be " + range + ", got '" + text + "' (" + flag_name(t.name) +
                                " from " + source + ")";
    if (source == "default") return Status::Internal("tunable table: " + message);
    return Status::InvalidArgument(message);
  }

  Config c_;
  std::map<std::size_t, std::string> flags_;  // tunable index -> value from argv
  std::map<std::size_t, const FileSetting*> file_;
  std::vector<FileSetting> file_settings_;
  std::string config_path_;
  std::string config_path_source_;  // "" (none), "flag" or "env RINGSYNC_CONFIG"
};

Result<Config> Config::parse(const std::vector<Tunable>& table, int argc, const char* const* argv,
                             const std::map<std::string, std::string>& env) {
  ConfigParser parser(table, env);
  RINGSYNC_RETURN_IF_ERROR(parser.check_table());
  if (parser.scan_for_help(argc, argv)) return parser.take();
  RINGSYNC_RETURN_IF_ERROR(parser.read_args(argc, argv));
  RINGSYNC_RETURN_IF_ERROR(parser.read_file());
  RINGSYNC_RETURN_IF_ERROR(parser.resolve());
  return parser.take();
}

const Config::Value& Config::lookup(std::string_view name, std::optional<Kind> kind) const {
  for (std::size_t i = 0; i < table_.size(); ++i) {
    if (table_[i].name != name) continue;
    if (kind && table_[i].kind != *kind) {
      std::fprintf(stderr, "ringsync: tunable '%s' is a %s, read as a %s\n", table_[i].name.c_str(),
                   std::string(kind_name(table_[i].kind)).c_str(), std::string(kind_name(*kind)).c_str());
      std::abort();
    }
    return values_[i];
  }
  std::fprintf(stderr, "ringsync: no tunable named '%s' in the table\n", std::string(name).c_str());
  std::abort();
}

std::string Config::get_string(std::string_view name) const { return lookup(name, std::nullopt).text; }
std::int64_t Config::get_int(std::string_view name) const { return lookup(name, Kind::kInt).integer; }
std::uint64_t Config::get_bytes(std::string_view name) const { return lookup(name, Kind::kBytes).bytes; }
std::chrono::nanoseconds Config::get_duration(std::string_view name) const {
  return lookup(name, Kind::kDuration).duration;
}
bool Config::get_bool(std::string_view name) const { return lookup(name, Kind::kBool).boolean; }
std::optional<units::Address> Config::get_address(std::string_view name) const {
  return lookup(name, Kind::kAddress).address;
}
std::string Config::source(std::string_view name) const { return lookup(name, std::nullopt).source; }

}  // namespace ringsync::config
