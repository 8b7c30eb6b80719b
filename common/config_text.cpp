// The human-facing text of a Config: --help, the start-up dump, the environment
// snapshot and "did you mean" suggestions.
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "common/config.h"

extern char** environ;

namespace ringsync::config {
namespace {

constexpr std::size_t kWidth = 80;
constexpr std::string_view kIndent = "      ";

// Greedy word wrap of `text` into lines of at most kWidth columns after `indent`.
void wrap(std::ostringstream& out, std::string_view text, std::string_view indent = kIndent) {
  std::istringstream words{std::string(text)};
  std::string word;
  std::size_t column = 0;
  while (words >> word) {
    if (column > 0 && column + 1 + word.size() > kWidth) {
      out << '\n';
      column = 0;
    }
    if (column == 0) {
      out << indent;
      column = indent.size();
    } else {
      out << ' ';
      ++column;
    }
    out << word;
    column += word.size();
  }
  if (column > 0) out << '\n';
}

std::string shown(const std::string& value) { return value.empty() ? "\"\"" : value; }

bool uses_kind(const std::vector<Tunable>& table, Kind kind) {
  return std::any_of(table.begin(), table.end(), [kind](const Tunable& t) { return t.kind == kind; });
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string_view strip_dashes(std::string_view s) {
  while (s.starts_with('-')) s.remove_prefix(1);
  return s;
}

}  // namespace

std::string Config::help_text(std::string_view program, std::string_view summary) const {
  std::ostringstream out;
  out << "Usage: " << program << " [OPTIONS]\n\n";
  if (!summary.empty()) {
    wrap(out, summary, "");
    out << '\n';
  }
  out << "Every option can also be set by an environment variable or by a `name = value`\n"
         "line in a config file (--config PATH or "
      << kConfigFileEnv
      << ").\nPrecedence: flag, then environment, then config file, then the default.\n\nOptions:\n";
  for (const Tunable& t : table_) {
    if (t.kind == Kind::kBool) {
      out << "  --[no-]" << t.name << '\n';
    } else {
      out << "  " << flag_name(t.name) << ' ' << kind_metavar(t.kind) << '\n';
    }
    wrap(out, t.help);
    std::string facts = "env " + env_name(t.name) + "; default: " + shown(t.default_value);
    if (!t.unit.empty()) facts += "; unit: " + t.unit;
    if (!t.min.empty() || !t.max.empty())
      facts += "; " + (t.max.empty() ? "at least " + t.min : t.min.empty() ? "at most " + t.max : t.min + " to " + t.max);
    wrap(out, facts);
  }
  out << "  --config PATH\n";
  wrap(out, "Read settings from a file of `name = value` lines; '#' starts a comment. --config= reads none.");
  wrap(out, "env " + std::string(kConfigFileEnv));
  out << "  -h, --help\n";
  wrap(out, "Print this help and exit.");
  out << "  --version\n";
  wrap(out, "Print the version and exit.");

  out << "\nValue forms:\n";
  if (uses_kind(table_, Kind::kBytes)) {
    out << "  SIZE" << '\n';
    wrap(out, "A byte count with an optional binary multiple: 4096, 64K, 64MiB, 1.5GiB. "
              "K, KB and KiB all mean 1024; M, G, T and P are further powers of 1024.");
  }
  if (uses_kind(table_, Kind::kDuration)) {
    out << "  DURATION\n";
    wrap(out, "A number with a unit (ns, us, ms, s, m, h), or several: 250us, 500ms, 30s, 2m, 1h30m. "
              "A bare number means seconds.");
  }
  if (uses_kind(table_, Kind::kBool)) {
    out << "  BOOL\n";
    wrap(out, "true/false, 1/0, yes/no or on/off; --name alone means true and --no-name false.");
  }
  if (uses_kind(table_, Kind::kAddress)) {
    out << "  HOST:PORT\n";
    wrap(out, "A host name or address and a port 0-65535; IPv6 in brackets, as in [::1]:9400. "
              "\"off\" or an empty value turns the endpoint off.");
  }
  return out.str();
}

std::string Config::dump() const {
  std::ostringstream out;
  if (!config_file_.empty()) out << "config = " << config_file_ << " (" << config_file_source_ << ")\n";
  for (std::size_t i = 0; i < table_.size(); ++i) {
    out << table_[i].name << " = " << shown(values_[i].text) << " (" << values_[i].source << ")\n";
  }
  return out.str();
}

std::map<std::string, std::string> environment_snapshot(const std::vector<std::string>& extra_names) {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view item(*entry);
    const std::size_t eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string name(item.substr(0, eq));
    const bool wanted = name.starts_with("RINGSYNC_") ||
                        std::find(extra_names.begin(), extra_names.end(), name) != extra_names.end();
    if (wanted) env[name] = std::string(item.substr(eq + 1));
  }
  return env;
}

std::string closest_name(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string_view bare = strip_dashes(word);
  if (bare.empty()) return "";
  // A typo of a third of the word or less, or the start of exactly one name.
  const std::size_t limit = std::max<std::size_t>(1, bare.size() / 3);
  std::string best;
  std::size_t best_distance = limit + 1;
  std::vector<std::string> prefixed;
  for (const std::string& candidate : candidates) {
    const std::string_view c = strip_dashes(candidate);
    const std::size_t d = edit_distance(bare, c);
    if (d < best_distance) {
      best_distance = d;
      best = candidate;
    }
    if (bare.size() >= 3 && c.starts_with(bare)) prefixed.push_back(candidate);
  }
  if (!best.empty()) return best;
  return prefixed.size() == 1 ? prefixed.front() : "";
}

}  // namespace ringsync::config
