// DeviceBackend over plain host memory, for tests of the device data path
// without a GPU: "device" buffers are host buffers, work runs when queued
// (with the CPU kernels of common/reduce.h), and the calls are recorded.
#pragma once

#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/reduce.h"
#include "cuda/host_chunk_copier.h"
#include "service/device/backend.h"

namespace ringsync::test {

class HostDeviceBackend final : public service::device::DeviceBackend {
 public:
  struct Log {
    int reduces = 0;
    int device_copies = 0;
    int to_host = 0;
    int to_device = 0;
    int synchronizations = 0;
    int queues = 0;
    int copiers = 0;
  };

  Status available() override { return unavailable_; }
  Result<service::device::MappedAllocation> open_ipc(const wire::IpcHandleBytes& handle,
                                             const wire::DeviceUuid&, int device) override {
    void* base = nullptr;
    std::memcpy(&base, handle.data(), sizeof(base));  // tests put the address in the handle
    return service::device::MappedAllocation{base, allocation_bytes, device};
  }
  Status close_ipc(void*, int) override { return Status::Ok(); }
  // Every GPU reaches every other, unless a test says a pair cannot.
  bool reachable(int device, int peer) override {
    return device == peer || !(device == unreachable_from && peer == unreachable_to);
  }
  Result<std::unique_ptr<service::device::DeviceQueue>> queue(int device) override {
    ++log.queues;
    last_device = device;
    return std::unique_ptr<service::device::DeviceQueue>(std::make_unique<Queue>(*this));
  }
  Result<std::unique_ptr<service::device::HostBuffer>> host_buffer(std::size_t bytes) override {
    return std::unique_ptr<service::device::HostBuffer>(std::make_unique<Buffer>(bytes));
  }
  // memcpy on a thread of its own, as a GPU's copy engine would run beside the ring.
  Result<std::unique_ptr<cuda::ChunkCopier>> copier(int) override {
    ++log.copiers;
    return std::unique_ptr<cuda::ChunkCopier>(std::make_unique<cuda::HostChunkCopier>());
  }

  void make_unavailable(Status why) { unavailable_ = std::move(why); }
  // The n-th queued operation from now on (1-based) fails; queues on several
  // threads count together.
  void fail_operation(int n) {
    steps_ = 0;
    fail_at_ = n;
  }

  Log log;
  int last_device = -1;
  std::size_t allocation_bytes = std::size_t{1} << 40;
  int unreachable_from = -1, unreachable_to = -1;  // a pair reachable() denies  // what open_ipc() says an allocation holds

 private:
  class Queue final : public service::device::DeviceQueue {
   public:
    explicit Queue(HostDeviceBackend& b) : b_(b) {}
    Status reduce(void* dst, const void* const* srcs, std::size_t n, std::size_t count,
                  DType dtype, ReduceOp op) override {
      ++b_.log.reduces;
      RINGSYNC_RETURN_IF_ERROR(b_.step());
      reduce::reduce(dst, srcs, n, count, dtype, op);
      return Status::Ok();
    }
    Status copy_device(void* dst, const void* src, std::size_t bytes) override {
      ++b_.log.device_copies;
      return copy(dst, src, bytes);
    }
    Status copy_to_host(void* host, const void* device, std::size_t bytes) override {
      ++b_.log.to_host;
      return copy(host, device, bytes);
    }
    Status copy_to_device(void* device, const void* host, std::size_t bytes) override {
      ++b_.log.to_device;
      return copy(device, host, bytes);
    }
    Status synchronize() override {
      ++b_.log.synchronizations;
      return Status::Ok();
    }

   private:
    Status copy(void* dst, const void* src, std::size_t bytes) {
      RINGSYNC_RETURN_IF_ERROR(b_.step());
      std::memmove(dst, src, bytes);
      return Status::Ok();
    }
    HostDeviceBackend& b_;
  };

  class Buffer final : public service::device::HostBuffer {
   public:
    explicit Buffer(std::size_t bytes) : memory_(bytes) {}
    std::byte* data() override { return memory_.data(); }
    std::size_t size() const override { return memory_.size(); }

   private:
    std::vector<std::byte> memory_;
  };

  Status step() {
    const int n = ++steps_;
    if (n == fail_at_) return Status::Internal("injected device failure");
    return Status::Ok();
  }

  Status unavailable_;
  std::atomic<int> steps_{0};
  std::atomic<int> fail_at_{0};
};

}  // namespace ringsync::test
