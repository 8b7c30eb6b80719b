// The trainer <-> daemon channel in shared memory: one memfd the daemon
// creates at the hello and passes with its reply, holding a ring of frames in
// each direction (common/shm_ring.h). The Unix socket stays: it carries the
// memfds of later buffers and the doorbell bytes that wake a side sleeping in
// poll/epoll, and its end still tells either side that the other is gone.
#pragma once

#include <cstddef>
#include <memory>

#include "common/shm.h"
#include "common/shm_ring.h"
#include "common/status.h"

namespace ringsync::shm {

class Channel {
 public:
  // Control page (both rings' positions and flags), then each ring's data.
  static constexpr std::size_t kControlBytes = 4096;
  static constexpr std::size_t kBytes = kControlBytes + 2 * ShmRing::kCapacity;

  // The daemon's side: a new, zeroed channel.
  static Result<Channel> create(std::string_view name);
  // The trainer's side: maps the channel's memfd (takes `fd`). `bytes` is
  // what the daemon announced; anything but kBytes is refused.
  static Result<Channel> map(int fd, std::size_t bytes);

  ShmRing& to_daemon() { return to_daemon_; }
  ShmRing& to_client() { return to_client_; }
  const ShmRing& to_client() const { return to_client_; }
  // The memfd, for passing it over the socket (the daemon).
  const std::shared_ptr<Region>& region() const { return region_; }

 private:
  explicit Channel(std::shared_ptr<Region> region);

  std::shared_ptr<Region> region_;
  ShmRing to_daemon_;
  ShmRing to_client_;
};

}  // namespace ringsync::shm
