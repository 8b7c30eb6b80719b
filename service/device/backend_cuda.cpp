// DeviceBackend over cuda/device_api.h. Streams, pinned host buffers and copy
// engines are created once and reused (each costs far more than the work it
// serves); a queue holds a stream for its lifetime, so concurrent collectives
// never wait on each other's work.
#include <algorithm>
#include <array>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/log.h"
#include "cuda/device_api.h"
#include "cuda/device_chunk_copier.h"
#include "service/device/backend.h"

namespace ringsync::service::device {
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
// pinned ones are faster and asynchronous). Pinning costs far more than a copy
// (on an H200, allocating, pinning and unpinning 64 MiB for every collective cost
// some 30 copies of it), so buffers are kept for reuse: up to kKeptBytes idle, the
// oldest freed first.
class PinnedPool {
 public:
  static constexpr std::size_t kKeptBytes = std::size_t{1} << 30;

  struct Memory {
    std::byte* data = nullptr;
    std::size_t capacity = 0;
    bool pinned = false;
  };

  Result<Memory> take(std::size_t bytes) {
    {
      std::lock_guard lock(mu_);
      // The smallest idle buffer that holds `bytes` and wastes at most half of itself.
      auto best = idle_.end();
      for (auto it = idle_.begin(); it != idle_.end(); ++it)
        if (it->capacity >= bytes && it->capacity / 2 <= bytes && (best == idle_.end() || it->capacity < best->capacity))
          best = it;
      if (best != idle_.end()) {
        Memory m = *best;
        idle_bytes_ -= m.capacity;
        idle_.erase(best);
        return m;
      }
    }
    constexpr std::size_t kPage = 4096;
    Memory m;
    m.capacity = (std::max<std::size_t>(bytes, 1) + kPage - 1) / kPage * kPage;
    m.data = static_cast<std::byte*>(std::aligned_alloc(kPage, m.capacity));
    if (!m.data)
      return Status::OutOfMemory("cannot allocate " + std::to_string(bytes) +
                                 " bytes of host staging memory for a GPU collective");
    if (Status pinned = cuda::pin_host(m.data, m.capacity); pinned.ok()) {
      m.pinned = true;
    } else {
      RS_LOG(debug, "device") << "host staging memory stays pageable: " << pinned.message();
    }
    return m;
  }

  void give_back(Memory m) {
    std::vector<Memory> dropped;
    {
      std::lock_guard lock(mu_);
      idle_.push_back(m);
      idle_bytes_ += m.capacity;
      while (idle_bytes_ > kKeptBytes) {
        dropped.push_back(idle_.front());
        idle_bytes_ -= idle_.front().capacity;
        idle_.erase(idle_.begin());
      }
    }
    for (const Memory& d : dropped) release(d);
  }

  ~PinnedPool() {
    for (const Memory& m : idle_) release(m);
  }

 private:
  static void release(const Memory& m) {
    if (m.pinned) (void)cuda::unpin_host(m.data);
    std::free(m.data);
  }
  std::mutex mu_;
  std::vector<Memory> idle_;  // oldest first
  std::size_t idle_bytes_ = 0;
};

class PinnedBuffer final : public HostBuffer {
 public:
  static Result<std::unique_ptr<HostBuffer>> create(std::shared_ptr<PinnedPool> pool, std::size_t bytes) {
    auto memory = pool->take(bytes);
    if (!memory.ok()) return memory.status();
    return std::unique_ptr<HostBuffer>(new PinnedBuffer(std::move(pool), *memory, bytes));
  }
  ~PinnedBuffer() override { pool_->give_back(memory_); }
  std::byte* data() override { return memory_.data; }
  std::size_t size() const override { return bytes_; }

 private:
  PinnedBuffer(std::shared_ptr<PinnedPool> pool, PinnedPool::Memory memory, std::size_t bytes)
      : pool_(std::move(pool)), memory_(memory), bytes_(bytes) {}
  std::shared_ptr<PinnedPool> pool_;
  PinnedPool::Memory memory_;
  std::size_t bytes_;
};

// Copy engines (a stream pair each) kept for the next staged collective on their GPU.
class CopierPool {
 public:
  Result<std::unique_ptr<cuda::DeviceChunkCopier>> take(int device) {
    {
      std::lock_guard lock(mu_);
      auto& idle = idle_[device];
      if (!idle.empty()) {
        auto copier = std::move(idle.back());
        idle.pop_back();
        return copier;
      }
    }
    return cuda::DeviceChunkCopier::create(device);
  }
  void give_back(int device, std::unique_ptr<cuda::DeviceChunkCopier> copier) {
    Status drained = copier->drain();
    if (!drained.ok()) {  // a stream in error state is not reused
      RS_LOG(warn, "device") << "GPU " << device << ": a staging copier failed (" << drained.message()
                             << "); it is dropped, the next collective gets a fresh one";
      return;
    }
    copier->set_wakeup(nullptr);
    std::lock_guard lock(mu_);
    idle_[device].push_back(std::move(copier));
  }

 private:
  std::mutex mu_;
  std::map<int, std::vector<std::unique_ptr<cuda::DeviceChunkCopier>>> idle_;
};

// One staged collective's copy engine, back to the pool when it is done.
class PooledCopier final : public cuda::ChunkCopier {
 public:
  PooledCopier(std::shared_ptr<CopierPool> pool, int device, std::unique_ptr<cuda::DeviceChunkCopier> copier)
      : pool_(std::move(pool)), device_(device), copier_(std::move(copier)) {}
  ~PooledCopier() override { pool_->give_back(device_, std::move(copier_)); }
  Status pin(void* host, std::size_t bytes) override { return copier_->pin(host, bytes); }
  void unpin(void* host) override { copier_->unpin(host); }
  Status submit(std::uint64_t ticket, Direction direction, void* dst, const void* src, std::size_t bytes) override {
    return copier_->submit(ticket, direction, dst, src, bytes);
  }
  void poll(std::vector<Done>& done) override { copier_->poll(done); }
  void set_wakeup(std::function<void()> wakeup) override { copier_->set_wakeup(std::move(wakeup)); }
  Status drain() override { return copier_->drain(); }

 private:
  std::shared_ptr<CopierPool> pool_;
  int device_;
  std::unique_ptr<cuda::DeviceChunkCopier> copier_;
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
    return PinnedBuffer::create(pinned_, bytes);
  }
  Result<std::unique_ptr<cuda::ChunkCopier>> copier(int device) override {
    auto copier = copiers_->take(device);
    if (!copier.ok()) return copier.status();
    return std::unique_ptr<cuda::ChunkCopier>(std::make_unique<PooledCopier>(copiers_, device, std::move(copier).value()));
  }

 private:
  std::shared_ptr<StreamPool> streams_ = std::make_shared<StreamPool>();
  std::shared_ptr<PinnedPool> pinned_ = std::make_shared<PinnedPool>();
  std::shared_ptr<CopierPool> copiers_ = std::make_shared<CopierPool>();
};

}  // namespace

std::shared_ptr<DeviceBackend> cuda_backend() {
  static const auto backend = std::make_shared<CudaBackend>();
  return backend;
}

}  // namespace ringsync::service::device
