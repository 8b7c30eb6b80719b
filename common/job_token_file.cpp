#include "common/job_token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace ringsync {

namespace {
constexpr off_t kMaxTokenBytes = 4096;

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}
}  // namespace

Result<std::string> read_job_token_file(const std::string& path) {
  const std::string what = "job token file '" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return Status::InvalidArgument(what + ": " + std::strerror(errno));
  struct stat st {};
  std::string token;
  Status status = Status::Ok();
  if (::fstat(fd, &st) != 0) {
    status = Status::InvalidArgument(what + ": " + std::strerror(errno));
  } else if (!S_ISREG(st.st_mode)) {
    status = Status::InvalidArgument(what + " is not a regular file");
  } else if ((st.st_mode & 077) != 0) {
    status = Status::InvalidArgument(what + " has mode " + octal(st.st_mode) +
                                     ": others than its owner may access it; chmod 600 it");
  } else if (st.st_size > kMaxTokenBytes) {
    status = Status::InvalidArgument(what + " is over 4 KiB; a token is one line");
  } else {
    token.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (got < token.size()) {
      const ssize_t n = ::read(fd, token.data() + got, token.size() - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<std::size_t>(n);
    }
    token.resize(got);
    if (!token.empty() && token.back() == '\n') token.pop_back();
    if (!token.empty() && token.back() == '\r') token.pop_back();
    if (token.empty()) status = Status::InvalidArgument(what + " is empty");
  }
  ::close(fd);
  if (!status.ok()) return status;
  return token;
}

}  // namespace ringsync
