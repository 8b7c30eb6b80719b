#include "common/config_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <sstream>
#include <string_view>

namespace ringsync::config {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// Drops a comment: '#' at the start or after a blank, outside double quotes.
std::string_view strip_comment(std::string_view line) {
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '"') quoted = !quoted;
    if (line[i] == '#' && !quoted && (i == 0 || is_blank(line[i - 1]))) return line.substr(0, i);
  }
  return line;
}

Status line_error(const std::string& path, int line, const std::string& what) {
  return Status::InvalidArgument(path + ":" + std::to_string(line) + ": " + what);
}

}  // namespace

Result<std::vector<FileSetting>> parse_config_text(const std::string& text, const std::string& path) {
  std::vector<FileSetting> settings;
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string_view line = trim(strip_comment(raw));
    if (line.empty()) continue;
    const std::size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      return line_error(path, line_no, "expected 'name = value', got '" + std::string(line) + "'");
    }
    const std::string_view key = trim(line.substr(0, eq));
    std::string_view value = trim(line.substr(eq + 1));
    if (key.empty()) return line_error(path, line_no, "missing name before '='");
    std::string name;
    for (char c : key) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
        return line_error(path, line_no, "invalid name '" + std::string(key) + "'");
      }
      name += c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (!value.empty() && value.front() == '"') {
      if (value.size() < 2 || value.back() != '"') {
        return line_error(path, line_no, "missing closing '\"' in the value of '" + name + "'");
      }
      value = value.substr(1, value.size() - 2);
    }
    for (const FileSetting& earlier : settings) {
      if (earlier.name == name) {
        return line_error(path, line_no,
                          "'" + name + "' is already set on line " + std::to_string(earlier.line));
      }
    }
    settings.push_back(FileSetting{std::move(name), std::string(value), line_no});
  }
  return settings;
}

Result<std::vector<FileSetting>> read_config_file(const std::string& path, std::string_view named_by) {
  const auto unreadable = [&](int err) {
    return Status::InvalidArgument("cannot read config file '" + path + "': " + std::strerror(err) +
                                   " (config file named by " + std::string(named_by) + ")");
  };
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return unreadable(errno);
  }
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return unreadable(err);
    }
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return parse_config_text(text, path);
}

}  // namespace ringsync::config
