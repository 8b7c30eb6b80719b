#include "common/shm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace ringsync::shm {
namespace {
std::string errno_text() { return std::strerror(errno); }
}  // namespace

Result<Region> Region::create(std::size_t bytes, std::string_view name) {
  if (bytes == 0) return Status::InvalidArgument("a shared buffer must have at least one byte");
  // memfd names are limited to 249 bytes; the name is only a label.
  const std::string label(name.substr(0, 200));
  const int fd = memfd_create(label.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    const int err = errno;
    const std::string why = std::strerror(err);
    if (err == ENOMEM) return Status::OutOfMemory("memfd_create failed: " + why);
    return Status::Internal("memfd_create failed: " + why +
                            (err == EMFILE || err == ENFILE ? " (raise the open-file limit)" : ""));
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string why = errno_text();
    close(fd);
    return Status::OutOfMemory("cannot size a shared buffer to " + std::to_string(bytes) +
                               " bytes: " + why);
  }
  // The trainer gets this fd: sealing its size means it can never shrink the
  // file under the daemon's mapping (which would make the daemon fault).
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const std::string why = errno_text();
    close(fd);
    return Status::Internal("cannot seal a shared buffer: " + why);
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const std::string why = errno_text();
    close(fd);
    return Status::OutOfMemory("cannot map a shared buffer of " + std::to_string(bytes) +
                               " bytes: " + why);
  }
  return Region(fd, static_cast<std::byte*>(data), bytes);
}

Result<Region> Region::map(int fd, std::size_t bytes) {
  if (fd < 0) return Status::InvalidArgument("no file descriptor came with the shared buffer");
  if (bytes == 0) {
    close(fd);
    return Status::InvalidArgument("a shared buffer must have at least one byte");
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) {
    const std::string why = errno_text();
    close(fd);
    return Status::OutOfMemory("cannot map the shared buffer (" + std::to_string(bytes) +
                               " bytes): " + why);
  }
  return Region(fd, static_cast<std::byte*>(data), bytes);
}

Region::Region(Region&& other) noexcept : fd_(other.fd_), data_(other.data_), size_(other.size_) {
  other.fd_ = -1;
  other.data_ = nullptr;
  other.size_ = 0;
}

Region& Region::operator=(Region&& other) noexcept {
  if (this != &other) {
    reset();
    fd_ = other.fd_;
    data_ = other.data_;
    size_ = other.size_;
    other.fd_ = -1;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

Region::~Region() { reset(); }

void Region::close_fd() {
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
}

void Region::reset() {
  if (data_) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  data_ = nullptr;
  size_ = 0;
}

}  // namespace ringsync::shm
