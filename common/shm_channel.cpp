#include "common/shm_channel.h"

#include <unistd.h>

#include <string>

namespace ringsync::shm {

static_assert(2 * sizeof(RingControl) <= Channel::kControlBytes);

Channel::Channel(std::shared_ptr<Region> region) : region_(std::move(region)) {
  std::byte* base = region_->data();
  auto* controls = reinterpret_cast<RingControl*>(base);
  to_daemon_ = ShmRing(&controls[0], base + kControlBytes);
  to_client_ = ShmRing(&controls[1], base + kControlBytes + ShmRing::kCapacity);
}

Result<Channel> Channel::create(std::string_view name) {
  auto region = Region::create(kBytes, name);  // a new memfd reads as zeros
  if (!region.ok()) return region.status();
  return Channel(std::make_shared<Region>(std::move(region).value()));
}

Result<Channel> Channel::map(int fd, std::size_t bytes) {
  if (bytes != kBytes) {
    if (fd >= 0) ::close(fd);
    return Status::ProtocolError("the daemon offered a shared-memory channel of " + std::to_string(bytes) +
                                 " bytes, this library expects " + std::to_string(kBytes) +
                                 "; use a client library matching the daemon");
  }
  auto region = Region::map(fd, bytes);
  if (!region.ok()) return region.status();
  return Channel(std::make_shared<Region>(std::move(region).value()));
}

}  // namespace ringsync::shm
