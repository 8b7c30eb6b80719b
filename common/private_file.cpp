#include "common/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ringsync {

namespace {
std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}
}  // namespace

Result<std::string> read_private_file(const std::string& path, const std::string& what, std::size_t max_bytes,
                                      const std::string& too_large) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return Status::InvalidArgument(what + ": " + std::strerror(errno));
  struct stat st {};
  std::string content;
  Status status = Status::Ok();
  if (::fstat(fd, &st) != 0) {
    status = Status::InvalidArgument(what + ": " + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = Status::InvalidArgument(what + " is not a regular file");
  } else if ((st.st_mode & 077) != 0) {
    status = Status::InvalidArgument(what + " has mode " + octal(st.st_mode) +
                                     ": others than its owner may access it; chmod 600 it");
  } else if (static_cast<std::size_t>(st.st_size) > max_bytes) {
    status = Status::InvalidArgument(what + " " + too_large);
  } else {
    content.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < content.size()) {
      const ssize_t n = ::read(fd, content.data() + got, content.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    content.resize(got);
  }
  ::close(fd);
  if (!status.ok()) return status;
  return content;
}

}  // namespace ringsync
