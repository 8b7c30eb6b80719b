// DeviceBackend over cuda/device_api.h. Streams are created once per device
// and reused; a queue holds one for its lifetime, so concurrent collectives
// never wait on each other's work.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/log.h"
#include "cuda/device_api.h"
#include "service/device_backend.h"

namespace ringsync::service {
namespace {

static_assert(std::tuple_size_v<cuda::IpcHandle> == wire::kIpcHandleBytes);
static_assert(std::tuple_size_v<cuda::DeviceUuid> == wire::kDeviceUuidBytes);

class StreamPool {
 public:
  Result<cuda::Stream> take(int device) {
    {
      std::lock_guard lock(mu_);
      auto& idle = idle_[device];
      if (!idle.empty()) {
        cuda::Stream stream = std::move(idle.back());
        idle.pop_back();
        return stream;
      }
    }
    return cuda::Stream::create(device);
  }
  void give_back(cuda::Stream stream) {
    std::lock_guard lock(mu_);
    idle_[stream.device()].push_back(std::move(stream));
  }

 private:
  std::mutex mu_;
  std::map<int, std::vector<cuda::Stream>> idle_;
};

class CudaQueue final : public DeviceQueue {
 public:
  CudaQueue(std::shared_ptr<StreamPool> pool, cuda::Stream stream)
      : pool_(std::move(pool)), stream_(std::move(stream)) {}
  ~CudaQueue() override {
    // Always waits, failed or not: the caller frees the memory this work touches
    // (staging buffers, mappings) right after. A stream whose work failed is not
    // reused: its error would stick to the next user.
    const bool drained = stream_.synchronize().ok();
    if (healthy_ && drained) pool_->give_back(std::move(stream_));
  }

  Status reduce(void* dst, const void* const* srcs, std::size_t n, std::size_t count, DType dtype,
                ReduceOp op) override {
    if (n <= cuda::kMaxReduceSources)
      return track(cuda::reduce(dst, srcs, n, count, dtype, op, stream_));
    if (op == ReduceOp::kAvg)
      return Status::InvalidArgument("averaging " + std::to_string(n) +
                                     " GPU buffers: at most " +
                                     std::to_string(cuda::kMaxReduceSources) +
                                     " local ranks can average on the GPU");
    // In batches: dst = op(batch 0), then dst = op(dst, next batch) (dst may alias srcs[0]).
    std::vector<const void*> batch(srcs, srcs + cuda::kMaxReduceSources);
    RINGSYNC_RETURN_IF_ERROR(track(cuda::reduce(dst, batch.data(), batch.size(), count, dtype, op,
                                                stream_)));
    for (std::size_t first = cuda::kMaxReduceSources; first < n;) {
      const std::size_t take = std::min(n - first, cuda::kMaxReduceSources - 1);
      batch.assign(1, dst);
      batch.insert(batch.end(), srcs + first, srcs + first + take);
      RINGSYNC_RETURN_IF_ERROR(
          track(cuda::reduce(dst, batch.data(), batch.size(), count, dtype, op, stream_)));
      first += take;
    }
    return Status::Ok();
  }
  Status copy_device(void* dst, const void* src, std::size_t bytes) override {
    return track(cuda::copy_device(dst, src, bytes, stream_));
  }
  Status copy_to_host(void* host, const void* device, std::size_t bytes) override {
    return track(cuda::copy_to_host(host, device, bytes, stream_));
  }
  Status copy_to_device(void* device, const void* host, std::size_t bytes) override {
    return track(cuda::copy_to_device(device, host, bytes, stream_));
  }
  Status synchronize() override { return track(stream_.synchronize()); }

 private:
  Status track(Status s) {
    if (!s.ok()) healthy_ = false;
    return s;
  }
  std::shared_ptr<StreamPool> pool_;
  cuda::Stream stream_;
  bool healthy_ = true;
};

// Page-aligned host memory, pinned when CUDA lets us (copies work either way;
// pinned ones are faster and asynchronous).
class PinnedBuffer final : public HostBuffer {
 public:
  static Result<std::unique_ptr<HostBuffer>> create(std::size_t bytes) {
    constexpr std::size_t kPage = 4096;
    const std::size_t rounded = (std::max<std::size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
    auto* memory = static_cast<std::byte*>(std::aligned_alloc(kPage, rounded));
    if (!memory)
      return Status::OutOfMemory("cannot allocate " + std::to_string(bytes) +
                                 " bytes of host staging memory for a GPU collective");
    auto buffer = std::unique_ptr<PinnedBuffer>(new PinnedBuffer(memory, bytes));
    if (Status s = cuda::pin_host(memory, rounded); s.ok()) {
      buffer->pinned_ = true;
    } else {
      RS_LOG(debug, "device") << "host staging memory stays pageable: " << s.message();
    }
    return std::unique_ptr<HostBuffer>(std::move(buffer));
  }
  ~PinnedBuffer() override {
    if (pinned_) cuda::unpin_host(memory_);
    std::free(memory_);
  }
  std::byte* data() override { return memory_; }
  std::size_t size() const override { return bytes_; }

 private:
  PinnedBuffer(std::byte* memory, std::size_t bytes) : memory_(memory), bytes_(bytes) {}
  std::byte* memory_;
  std::size_t bytes_;
  bool pinned_ = false;
};

class CudaBackend final : public DeviceBackend {
 public:
  Status available() override { return cuda::available(); }
  Result<MappedAllocation> open_ipc(const wire::IpcHandleBytes& handle,
                                    const wire::DeviceUuid& uuid, int device) override {
    auto mapped = cuda::open_ipc(handle, uuid, device);
    if (!mapped.ok()) return mapped.status();
    return MappedAllocation{mapped->base, mapped->bytes, mapped->device};
  }
  Status close_ipc(void* base, int device) override { return cuda::close_ipc(base, device); }
  bool reachable(int device, int peer) override { return cuda::peer_reachable(device, peer); }
  Result<std::unique_ptr<DeviceQueue>> queue(int device) override {
    auto stream = streams_->take(device);
    if (!stream.ok()) return stream.status();
    return std::unique_ptr<DeviceQueue>(
        std::make_unique<CudaQueue>(streams_, std::move(stream).value()));
  }
  Result<std::unique_ptr<HostBuffer>> host_buffer(std::size_t bytes) override {
    return PinnedBuffer::create(bytes);
  }

 private:
  std::shared_ptr<StreamPool> streams_ = std::make_shared<StreamPool>();
};

}  // namespace

std::shared_ptr<DeviceBackend> cuda_backend() {
  static const auto backend = std::make_shared<CudaBackend>();
  return backend;
}

}  // namespace ringsync::service
