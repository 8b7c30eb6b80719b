// The NVML loader and the GPU gauges: absent library, a fake libnvidia-ml.so.1 with
// known readings loaded through dlopen (tests/cuda/fake_nvml), and the daemon's hookup.
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>

#include "common/metrics.h"
#include "cuda/nvml.h"
#include "cuda/nvml_sampler.h"
#include "service/observe/daemon_metrics.h"

namespace ringsync::cuda {
namespace {

using namespace std::chrono_literals;

constexpr const char* kGpu0 = "GPU-00000000-1111-2222-3333-444444444444";
constexpr const char* kGpu1 = "GPU-55555555-6666-7777-8888-999999999999";

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

std::string series(const char* name, int gpu, const char* uuid) {
  return std::string(name) + "{gpu=\"" + std::to_string(gpu) + "\",uuid=\"" + uuid + "\"} ";
}

// Sets an environment variable for one test case.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST_CASE("a missing NVML library is reported, and the sampler adds no series") {
  const std::string missing = std::string(RINGSYNC_FAKE_NVML) + ".absent";
  auto nvml = Nvml::load(missing);
  REQUIRE(!nvml.ok());
  CHECK(contains(nvml.status().message(), "dlopen " + missing));

  metrics::Registry registry;
  auto sampler = GpuSampler::start(registry, 0ms, missing);
  CHECK(!sampler->active());
  CHECK(sampler->gpus() == 0);
  sampler->sample();  // harmless
  CHECK(!contains(registry.render(), "ringsync_gpu"));
}

TEST_CASE("the default library: present on GPU machines, cleanly absent elsewhere") {
  metrics::Registry registry;
  auto sampler = GpuSampler::start(registry, 0ms);
  if (!sampler->active()) {
    CHECK(!contains(registry.render(), "ringsync_gpu"));
  } else {
    CHECK(sampler->gpus() >= 1);
    CHECK(contains(registry.render(), "ringsync_gpu_memory_used_bytes{gpu=\"0\""));
  }
}

TEST_CASE("the fake NVML through dlopen: one gauge per reading, labelled by index and UUID") {
  auto nvml = Nvml::load(RINGSYNC_FAKE_NVML);
  REQUIRE(nvml.ok());
  auto count = (*nvml)->device_count();
  REQUIRE(count.ok());
  CHECK(*count == 2);
  auto reading = (*nvml)->read(0);
  REQUIRE(reading.ok());
  CHECK(reading->uuid == kGpu0);
  CHECK(reading->utilization == doctest::Approx(0.37));
  CHECK(reading->memory_used_bytes == 1234567890u);
  CHECK(reading->pcie_tx_bytes_per_second == doctest::Approx(1000 * 1024.0));
  CHECK(reading->pcie_rx_bytes_per_second == doctest::Approx(2000 * 1024.0));
  auto second = (*nvml)->read(1);
  REQUIRE(second.ok());
  CHECK(!second->pcie_tx_bytes_per_second.has_value());  // not supported there
  CHECK(!(*nvml)->read(2).ok());

  metrics::Registry registry;
  auto sampler = GpuSampler::start(registry, 0ms, RINGSYNC_FAKE_NVML);
  REQUIRE(sampler->active());
  CHECK(sampler->gpus() == 2);
  const std::string text = registry.render();
  CHECK(contains(text, "# TYPE ringsync_gpu_utilization_ratio gauge\n"));
  CHECK(contains(text, series("ringsync_gpu_utilization_ratio", 0, kGpu0) + "0.37\n"));
  CHECK(contains(text, series("ringsync_gpu_utilization_ratio", 1, kGpu1) + "1\n"));
  CHECK(contains(text, series("ringsync_gpu_memory_used_bytes", 0, kGpu0) + "1234567890\n"));
  CHECK(contains(text, series("ringsync_gpu_memory_used_bytes", 1, kGpu1) + "42\n"));
  CHECK(contains(text, series("ringsync_gpu_pcie_tx_bytes_per_second", 0, kGpu0) + "1024000\n"));
  CHECK(contains(text, series("ringsync_gpu_pcie_rx_bytes_per_second", 0, kGpu0) + "2048000\n"));
  CHECK(!contains(text, series("ringsync_gpu_pcie_tx_bytes_per_second", 1, kGpu1)));
  CHECK(!contains(text, series("ringsync_gpu_pcie_rx_bytes_per_second", 1, kGpu1)));
}

TEST_CASE("the fake NVML with no GPU, or a driver that is not loaded: no series") {
  for (const auto& [variable, value] : {std::pair{"FAKE_NVML_DEVICES", "0"},
                                        std::pair{"FAKE_NVML_INIT", "fail"}}) {
    CAPTURE(variable);
    ScopedEnv env(variable, value);
    metrics::Registry registry;
    auto sampler = GpuSampler::start(registry, 0ms, RINGSYNC_FAKE_NVML);
    CHECK(!sampler->active());
    CHECK(!contains(registry.render(), "ringsync_gpu"));
  }
  auto failed = Nvml::load(RINGSYNC_FAKE_NVML);
  CHECK(failed.ok());
  ScopedEnv env("FAKE_NVML_INIT", "fail");
  failed = Nvml::load(RINGSYNC_FAKE_NVML);
  REQUIRE(!failed.ok());
  CHECK(failed.status().message() == "nvmlInit_v2: Driver Not Loaded");
}

TEST_CASE("a sampling thread starts and stops cleanly") {
  metrics::Registry registry;
  auto sampler = GpuSampler::start(registry, 1ms, RINGSYNC_FAKE_NVML);
  REQUIRE(sampler->active());
  sampler->sample();  // alongside the thread
  sampler.reset();    // joins
  CHECK(contains(registry.render(), series("ringsync_gpu_memory_used_bytes", 0, kGpu0)));
}

TEST_CASE("the daemon's metrics pick the library from RINGSYNC_NVML_LIBRARY") {
  CHECK(nvml_library_path() == (std::getenv("RINGSYNC_NVML_LIBRARY") ? std::getenv("RINGSYNC_NVML_LIBRARY") : kNvmlLibrary));
  ScopedEnv env("RINGSYNC_NVML_LIBRARY", RINGSYNC_FAKE_NVML);
  CHECK(nvml_library_path() == RINGSYNC_FAKE_NVML);
  metrics::Registry registry;
  service::observe::DaemonMetrics daemon_metrics(registry);
  CHECK(!contains(registry.render(), "ringsync_gpu_utilization"));
  CHECK(contains(registry.render(), "\nringsync_gpu_devices 0\n"));  // always there, 0 until NVML says more
  daemon_metrics.start_gpu_sampling(std::chrono::hours(1));
  const std::string text = registry.render();
  CHECK(contains(text, "\nringsync_gpu_devices 2\n"));
  CHECK(contains(text, series("ringsync_gpu_utilization_ratio", 0, kGpu0) + "0.37\n"));
  CHECK(contains(text, series("ringsync_gpu_memory_used_bytes", 1, kGpu1) + "42\n"));
}

}  // namespace
}  // namespace ringsync::cuda
