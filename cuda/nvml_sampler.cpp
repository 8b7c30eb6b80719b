#include "cuda/nvml_sampler.h"

#include <string>

#include "common/log.h"

namespace ringsync::cuda {

std::unique_ptr<GpuSampler> GpuSampler::start(metrics::Registry& registry,
                                              std::chrono::milliseconds period,
                                              std::string_view library) {
  std::unique_ptr<GpuSampler> sampler(new GpuSampler());
  auto nvml = Nvml::load(library);
  if (!nvml.ok()) {
    RS_LOG(info, "gpu") << "no GPU metrics: NVML is not available (" << nvml.status().message()
                        << ")";
    return sampler;
  }
  auto count = (*nvml)->device_count();
  if (!count.ok() || *count == 0) {
    RS_LOG(info, "gpu") << "no GPU metrics: "
                        << (count.ok() ? "NVML reports no GPU" : count.status().message());
    return sampler;
  }
  sampler->nvml_ = std::move(nvml).value();
  sampler->gpus_ = *count;
  sampler->uuids_.assign(*count, "");
  sampler->unreadable_.assign(*count, false);
  const std::vector<std::string> labels = {"gpu", "uuid"};
  sampler->families_.reset(new Families{
      registry.gauge("ringsync_gpu_utilization_ratio",
                     "Fraction of the last NVML sample period in which a kernel ran on the GPU.",
                     labels),
      registry.gauge("ringsync_gpu_memory_used_bytes", "GPU memory in use (all processes).",
                     labels),
      registry.gauge("ringsync_gpu_pcie_tx_bytes_per_second",
                     "PCIe bytes per second from the GPU to the host (NVML's 20 ms sample).",
                     labels),
      registry.gauge("ringsync_gpu_pcie_rx_bytes_per_second",
                     "PCIe bytes per second from the host to the GPU (NVML's 20 ms sample).",
                     labels)});
  sampler->sample();
  RS_LOG(info, "gpu") << "GPU metrics from " << sampler->nvml_->library() << ": " << *count
                      << " GPU(s), sampled every " << period.count() << " ms";
  if (period.count() > 0) {
    GpuSampler* self = sampler.get();
    sampler->thread_ = std::thread([self, period] { self->run(period); });
  }
  return sampler;
}

GpuSampler::~GpuSampler() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void GpuSampler::run(std::chrono::milliseconds period) {
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, period, [this] { return stopping_; })) {
    lock.unlock();
    sample();
    lock.lock();
  }
}

void GpuSampler::hide(unsigned gpu) {
  if (uuids_[gpu].empty()) return;
  const std::string index = std::to_string(gpu);
  for (auto* family : {&families_->utilization, &families_->memory_used, &families_->pcie_tx,
                       &families_->pcie_rx})
    family->remove({index, uuids_[gpu]});
}

void GpuSampler::sample() {
  if (!nvml_) return;
  std::lock_guard lock(sample_mu_);
  for (unsigned gpu = 0; gpu < gpus_; ++gpu) {
    auto reading = nvml_->read(gpu);
    if (!reading.ok()) {
      if (!unreadable_[gpu])
        RS_LOG(warn, "gpu") << "cannot read GPU " << gpu << ": " << reading.status().message();
      unreadable_[gpu] = true;
      hide(gpu);
      continue;
    }
    if (unreadable_[gpu]) RS_LOG(info, "gpu") << "GPU " << gpu << " can be read again";
    unreadable_[gpu] = false;
    if (uuids_[gpu] != reading->uuid) hide(gpu);  // a new UUID names new series
    uuids_[gpu] = reading->uuid;
    const std::string index = std::to_string(gpu);
    const auto update = [&](metrics::GaugeFamily& family, const auto& value) {
      if (value) {
        family.with({index, reading->uuid}).set(static_cast<double>(*value));
      } else {
        family.remove({index, reading->uuid});
      }
    };
    update(families_->utilization, reading->utilization);
    update(families_->memory_used, reading->memory_used_bytes);
    update(families_->pcie_tx, reading->pcie_tx_bytes_per_second);
    update(families_->pcie_rx, reading->pcie_rx_bytes_per_second);
  }
}

}  // namespace ringsync::cuda
