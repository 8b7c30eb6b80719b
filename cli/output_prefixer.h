// Many children's output on one terminal: each stream is cut into whole lines and
// every line is written with a prefix ("[rank 3] ") in a single write, so lines of
// different children never mix. A line longer than max_line is cut into pieces of
// that size, each written as a line of its own, so memory stays bounded.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ringsync::cli {

// Writes all of `data` to `fd`, waiting while a non-blocking fd is full; gives up
// silently on an error such as a closed pipe (the reader is gone).
void write_all(int fd, std::string_view data);

class LinePrefixer {
 public:
  static constexpr std::size_t kMaxLine = 64 * 1024;

  LinePrefixer(std::string prefix, int out_fd, std::size_t max_line = kMaxLine);

  // Writes every line completed by `bytes`; holds back the unfinished rest.
  void feed(std::string_view bytes);
  // End of the stream: writes what was held back as a last line.
  void finish();

 private:
  void append_line(std::string& out, std::string_view line) const;

  std::string prefix_;
  int out_fd_;
  std::size_t max_line_;
  std::string partial_;
};

}  // namespace ringsync::cli
