#include "common/shm.h"

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
  const std::string label(name);
  const int fd = memfd_create(label.c_str(), MFD_CLOEXEC);
  if (fd < 0) return Status::OutOfMemory("memfd_create failed: " + errno_text());
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const std::string why = errno_text();
    close(fd);
    return Status::OutOfMemory("cannot size a shared buffer to " + std::to_string(bytes) +
                               " bytes: " + why);
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

void Region::reset() {
  if (data_) munmap(data_, size_);
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  data_ = nullptr;
  size_ = 0;
}

}  // namespace ringsync::shm
