// A stand-in for the CUDA driver in client tests: ranges of plain host memory
// the test declares to be GPU allocations, with the IPC handle, the driver's
// id and the synchronizations the client asks for recorded.
#pragma once

#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "client/src/collective_call.h"
#include "client/src/device_memory.h"

namespace ringsync::testing {

class FakeDeviceMemory final : public client::DeviceMemory {
 public:
  // Declares [base, base + bytes) one allocation on `device`; a new declaration
  // at the same base models memory freed and allocated again (a new driver id).
  void declare(const void* base, std::size_t bytes, int device = 0) {
    std::lock_guard lock(mu_);
    client::DeviceAllocation a;
    a.base = reinterpret_cast<std::uintptr_t>(base);
    a.bytes = bytes;
    a.device = device;
    a.driver_id = ++next_driver_id_;
    allocations_[a.base] = a;
  }
  void fail_locate_with(Status status) { locate_error_ = std::move(status); }
  void fail_export_with(Status status) { export_error_ = std::move(status); }

  Result<std::optional<client::DeviceAllocation>> locate(const void* ptr) override {
    std::lock_guard lock(mu_);
    const auto p = reinterpret_cast<std::uintptr_t>(ptr);
    auto it = allocations_.upper_bound(p);
    if (it == allocations_.begin()) return std::optional<client::DeviceAllocation>();
    --it;
    if (p - it->first >= it->second.bytes) return std::optional<client::DeviceAllocation>();
    if (!locate_error_.ok()) return locate_error_;
    return std::optional<client::DeviceAllocation>(it->second);
  }

  // The handle names the driver id in its first 8 bytes.
  Result<client::DeviceExport> export_allocation(const client::DeviceAllocation& a) override {
    if (!export_error_.ok()) return export_error_;
    client::DeviceExport out;
    std::memcpy(out.handle.data(), &a.driver_id, sizeof(a.driver_id));
    out.uuid[0] = std::byte{0xab};
    ++exports;
    return out;
  }

  Status synchronize(const client::DeviceAllocation&, void* stream) override {
    ++synchronizations;
    last_stream = stream;
    return Status::Ok();
  }

  std::atomic<int> exports{0};
  std::atomic<int> synchronizations{0};
  std::atomic<void*> last_stream{nullptr};

 private:
  std::mutex mu_;
  std::map<std::uintptr_t, client::DeviceAllocation> allocations_;
  std::uint64_t next_driver_id_ = 0;
  Status locate_error_;
  Status export_error_;
};

// An f32 sum allreduce of `count` elements as the client library submits it.
inline client::CollectiveCall f32_allreduce(const float* send, float* recv, std::size_t count,
                                            const char* name = "grad") {
  client::CollectiveCall c;
  c.kind = wire::CollectiveKind::kAllreduce;
  c.name = name;
  c.send = send;
  c.recv = recv;
  c.count = count;
  c.dtype = RS_F32;
  c.op = RS_SUM;
  return c;
}

}  // namespace ringsync::testing
