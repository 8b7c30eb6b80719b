// Shared-memory regions: anonymous memfds the daemon creates and hands to a
// trainer over the Unix socket; both sides map the same pages (zero copies).
#pragma once

#include <cstddef>
#include <string_view>

#include "common/status.h"

namespace ringsync::shm {

class Region {
 public:
  Region() = default;
  // A new memfd of `bytes` (> 0), mapped read-write. `name` shows in /proc/PID/fd.
  static Result<Region> create(std::size_t bytes, std::string_view name);
  // Maps a region received from the daemon; takes ownership of `fd` (closed on error too).
  static Result<Region> map(int fd, std::size_t bytes);

  Region(Region&& other) noexcept;
  Region& operator=(Region&& other) noexcept;
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;
  ~Region();

  std::byte* data() const { return data_; }
  std::size_t size() const { return size_; }
  int fd() const { return fd_; }
  // Closes the descriptor once it has been handed over; the mapping stays.
  void close_fd();
  // True when [offset, offset + bytes) lies inside the region (overflow-safe).
  bool contains(std::size_t offset, std::size_t bytes) const {
    return offset <= size_ && bytes <= size_ - offset;
  }

 private:
  Region(int fd, std::byte* data, std::size_t size) : fd_(fd), data_(data), size_(size) {}
  void reset();

  int fd_ = -1;
  std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace ringsync::shm
