// The GPU allocations one client registered, by the id the client chose. An
// entry is reserved while the daemon maps it (off the control thread), then
// holds the mapping. Lookups check bounds and hand out shared ownership, so a
// mapping stays open while a collective uses it even after the client
// unregistered it or went away (like BufferTable's shared memory).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string_view>

#include "common/status.h"
#include "common/wire.h"

namespace ringsync::service::device {

// One trainer allocation mapped into the daemon; unmapped by its destructor.
class DeviceMapping {
 public:
  using Close = std::function<void(void* base)>;
  DeviceMapping(std::byte* base, std::uint64_t bytes, int device, Close close)
      : base_(base), bytes_(bytes), device_(device), close_(std::move(close)) {}
  ~DeviceMapping() {
    if (close_) close_(base_);
  }
  DeviceMapping(const DeviceMapping&) = delete;
  DeviceMapping& operator=(const DeviceMapping&) = delete;

  std::byte* base() const { return base_; }
  std::uint64_t bytes() const { return bytes_; }
  int device() const { return device_; }

 private:
  std::byte* base_;
  std::uint64_t bytes_;
  int device_;
  Close close_;
};

struct ResolvedDevice {
  std::byte* data = nullptr;  // nullptr for an empty reference
  int device = -1;
  std::shared_ptr<const DeviceMapping> keepalive;
};

class DeviceTable {
 public:
  // Allocations one client may register at once (each is a mapping in the daemon).
  static constexpr std::size_t kMaxAllocations = 4096;

  // Checks a registration and reserves its id until complete() or cancel():
  // kInvalidArgument for id 0, an id in use, 0 bytes or too many registrations.
  Status reserve(const wire::RegisterDevice& request);
  // The mapping of a reserved id is ready. False when the reservation is gone
  // (the client left); the caller then drops the mapping.
  bool complete(std::uint32_t id, std::shared_ptr<const DeviceMapping> mapping);
  // A mapped allocation must really hold the bytes the client claimed: later
  // bounds checks trust request.bytes, so a larger claim is refused here.
  static Status check_mapped_size(const wire::RegisterDevice& request, std::uint64_t real_bytes);
  void cancel(std::uint32_t id);

  // Unregisters a mapped allocation; false when the id is unknown or still
  // being mapped.
  bool release(std::uint32_t id);

  // [ref.offset, ref.offset + bytes) must lie in allocation ref.buffer_id. Id 0
  // means "no buffer" and is accepted only for zero bytes.
  Result<ResolvedDevice> resolve(const wire::BufferRef& ref, std::uint64_t bytes,
                                 std::string_view what) const;

  std::uint64_t total_bytes() const { return total_bytes_; }
  std::size_t size() const { return entries_.size(); }
  // Forgets everything (the client left); mappings in use stay open until released.
  void clear();

 private:
  // nullptr while reserved.
  std::map<std::uint32_t, std::shared_ptr<const DeviceMapping>> entries_;
  std::uint64_t total_bytes_ = 0;  // of the mapped ones
};

}  // namespace ringsync::service::device
