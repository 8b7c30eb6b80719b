#include "cli/output_prefixer.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>

namespace ringsync::cli {

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
    } else if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 100);
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else {
      return;
    }
  }
}

LinePrefixer::LinePrefixer(std::string prefix, int out_fd, std::size_t max_line)
    : prefix_(std::move(prefix)), out_fd_(out_fd), max_line_(max_line == 0 ? 1 : max_line) {}

void LinePrefixer::append_line(std::string& out, std::string_view line) const {
  out.append(prefix_);
  out.append(line);
  out.push_back('\n');
}

void LinePrefixer::feed(std::string_view bytes) {
  std::string out;
  while (!bytes.empty()) {
    const std::size_t newline = bytes.find('\n');
    const std::size_t room = max_line_ - partial_.size();
    if (newline != std::string_view::npos && newline <= room) {
      partial_.append(bytes.substr(0, newline));
      append_line(out, partial_);
      partial_.clear();
      bytes.remove_prefix(newline + 1);
    } else if (bytes.size() > room) {
      // The line is longer than max_line: its first max_line bytes go out as a line.
      partial_.append(bytes.substr(0, room));
      append_line(out, partial_);
      partial_.clear();
      bytes.remove_prefix(room);
    } else {
      partial_.append(bytes);
      break;
    }
  }
  if (!out.empty()) write_all(out_fd_, out);
}

void LinePrefixer::finish() {
  if (partial_.empty()) return;
  std::string out;
  append_line(out, partial_);
  partial_.clear();
  write_all(out_fd_, out);
}

}  // namespace ringsync::cli
