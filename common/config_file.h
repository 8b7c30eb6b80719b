// The config file format: `name = value` lines, blank lines and '#' comments.
//
//   # ringsyncd.conf
//   socket = /run/ringsync/ringsyncd.sock
//   collective-timeout = 5m     # a comment after a blank
//   ready-file = "/tmp/has # in it"
//
// A '#' starts a comment at the beginning of a line or after a blank. Blanks around
// names and values are dropped; double quotes around a value keep what is inside
// as it is. Names may use '_' for '-'. Setting one name twice is an error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ringsync::config {

struct FileSetting {
  std::string name;   // normalized: lower case, '-' between words
  std::string value;
  int line = 0;       // 1-based
};

// Reads and splits `path`. Errors name the file and line ("PATH:3: ...") or, when
// the file cannot be read, the path, the system's reason and `named_by` (where the
// path came from, e.g. "flag --config").
Result<std::vector<FileSetting>> read_config_file(const std::string& path, std::string_view named_by);

// Splits text already read from `path` (which is used only in messages).
Result<std::vector<FileSetting>> parse_config_text(const std::string& text, const std::string& path);

}  // namespace ringsync::config
