// The GPU gauges of DESIGN.md's metrics table, read from NVML on a timer:
//   ringsync_gpu_utilization_ratio, ringsync_gpu_memory_used_bytes,
//   ringsync_gpu_pcie_tx_bytes_per_second, ringsync_gpu_pcie_rx_bytes_per_second,
// each with labels gpu="0" (NVML's index) and uuid="GPU-...". Without NVML or without
// a GPU there are no GPU series at all and one info line says why: most nodes have
// no GPU, so that is not an error. Sampling runs on its own thread because NVML calls
// can take milliseconds (PCIe throughput measures over 20 ms); the control loop
// never waits for them.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string_view>
#include <thread>
#include <vector>

#include "common/metrics.h"
#include "cuda/nvml.h"

namespace ringsync::cuda {

class GpuSampler {
 public:
  // Loads NVML (`library` empty: nvml_library_path()); with at least one GPU, registers
  // the families, takes the first sample before returning, then samples every
  // `period` (zero: only when sample() is called). Never fails: without NVML or a GPU
  // the sampler is inactive.
  static std::unique_ptr<GpuSampler> start(metrics::Registry& registry,
                                           std::chrono::milliseconds period,
                                           std::string_view library = {});
  ~GpuSampler();  // stops the thread; NVML is shut down
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  bool active() const { return nvml_ != nullptr; }
  unsigned gpus() const { return gpus_; }
  // Reads every GPU now and updates the gauges.
  void sample();

 private:
  struct Families {
    metrics::GaugeFamily& utilization;
    metrics::GaugeFamily& memory_used;
    metrics::GaugeFamily& pcie_tx;
    metrics::GaugeFamily& pcie_rx;
  };
  GpuSampler() = default;
  void run(std::chrono::milliseconds period);
  void hide(unsigned gpu);

  std::unique_ptr<Nvml> nvml_;
  std::unique_ptr<Families> families_;
  unsigned gpus_ = 0;
  std::vector<std::string> uuids_;   // per GPU, once read ("" until then)
  std::vector<bool> unreadable_;     // per GPU: warned that it cannot be read
  std::mutex sample_mu_;             // one sample() at a time
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ringsync::cuda
