// ringsync-cuda-check: every device kernel (dtype x op x inputs in {1, 2, 3, 8})
// against reduce_reference on the host, on random data with special values, for odd
// counts and every buffer layout the kernels treat differently: 16-byte aligned,
// the same misalignment everywhere (vectors after a scalar head), mixed element
// offsets (scalar), byte offsets (byte-wise loads), and in place (dst = input 0).
// Prints one row per dtype and op; exits 0 when all match, 1 on a mismatch, 77 when
// there is no CUDA device (the test-suite convention for "skipped").
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/reduce.h"
#include "cuda/device_api.h"
#include "cuda/tools/compare_elements.h"
#include "cuda/tools/random_elements.h"

namespace ringsync::cuda::tools {
namespace {

constexpr std::size_t kSources[] = {1, 2, 3, 8};
constexpr std::size_t kMaxInputs = 8;
constexpr std::size_t kSlack = 64;  // bytes around each buffer for the offsets

enum class Layout { kAligned, kSameOffset, kMixedOffsets, kByteOffset, kInPlace };
constexpr Layout kLayouts[] = {Layout::kAligned, Layout::kSameOffset, Layout::kMixedOffsets,
                               Layout::kByteOffset, Layout::kInPlace};

// Byte offset of buffer `k` (0..7 inputs, 8 = dst) in a layout.
std::size_t offset_of(Layout layout, std::size_t k, std::size_t element) {
  switch (layout) {
    case Layout::kAligned:
    case Layout::kInPlace: return 0;
    case Layout::kSameOffset: return 3 * element;
    case Layout::kMixedOffsets: return ((k * 5 + 1) % 4) * element;
    case Layout::kByteOffset: return 1;
  }
  return 0;
}

#define CHECK_CUDA(call)                                                                     \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s: %s\n", #call, cudaGetErrorString(e_));                      \
      std::exit(1);                                                                          \
    }                                                                                        \
  } while (0)

struct Totals {
  std::size_t cases = 0;
  std::size_t failed = 0;
  std::size_t inexact = 0;  // matched within rounding, not bit for bit
};

class Checker {
 public:
  explicit Checker(std::vector<std::size_t> counts) : counts_(std::move(counts)) {
    max_count_ = 0;
    for (auto c : counts_) max_count_ = std::max(max_count_, c);
    const std::size_t bytes = max_count_ * 8 + kSlack;
    for (auto& buffer : device_) CHECK_CUDA(cudaMalloc(&buffer, bytes));
    auto stream = Stream::create(0);
    if (!stream.ok()) {
      std::fprintf(stderr, "%s\n", stream.status().message().c_str());
      std::exit(1);
    }
    stream_ = std::move(stream).value();
  }
  ~Checker() {
    for (auto* buffer : device_) cudaFree(buffer);
  }

  // One dtype and op: every layout, count and number of inputs. Returns per-nsrc
  // cell text for the table.
  std::vector<std::string> run(DType dtype, ReduceOp op, RandomElements& random, Totals& totals) {
    const std::size_t size = dtype_size(dtype);
    std::vector<std::vector<std::byte>> inputs;
    for (std::size_t k = 0; k < kMaxInputs; ++k) inputs.push_back(random.fill(dtype, max_count_, op));
    std::vector<std::string> cells;
    for (std::size_t nsrc : kSources) {
      Comparison sum;
      std::string failure;
      for (Layout layout : kLayouts) {
        upload(inputs, layout, size);
        for (std::size_t count : counts_) {
          const Comparison c = one_case(inputs, layout, nsrc, count, dtype, op);
          ++totals.cases;
          if (!c.bit_exact()) ++totals.inexact;
          if (!c.ok()) {
            ++totals.failed;
            if (failure.empty())
              failure = "count " + std::to_string(count) + " layout " +
                        std::to_string(static_cast<int>(layout)) + " first bad element " +
                        std::to_string(c.first_wrong);
          }
          sum.wrong += c.wrong;
          sum.one_ulp += c.one_ulp;
          sum.nan_payload += c.nan_payload;
        }
      }
      if (!sum.ok()) {
        cells.push_back("FAIL " + std::to_string(sum.wrong));
        std::fprintf(stderr, "%s %s nsrc=%zu: %s\n", std::string(dtype_name(dtype)).c_str(),
                     std::string(reduce_op_name(op)).c_str(), nsrc, failure.c_str());
      } else {
        cells.push_back(sum.one_ulp + sum.nan_payload == 0 ? "exact" : "~1ulp");
      }
    }
    return cells;
  }

 private:
  void upload(const std::vector<std::vector<std::byte>>& inputs, Layout layout, std::size_t size) {
    for (std::size_t k = 0; k < kMaxInputs; ++k)
      CHECK_CUDA(cudaMemcpy(device_[k] + offset_of(layout, k, size), inputs[k].data(),
                            inputs[k].size(), cudaMemcpyHostToDevice));
  }

  Comparison one_case(const std::vector<std::vector<std::byte>>& inputs, Layout layout,
                      std::size_t nsrc, std::size_t count, DType dtype, ReduceOp op) {
    const std::size_t size = dtype_size(dtype);
    const std::size_t bytes = count * size;
    std::vector<const void*> host_srcs, device_srcs;
    for (std::size_t k = 0; k < nsrc; ++k) {
      host_srcs.push_back(inputs[k].data());
      device_srcs.push_back(device_[k] + offset_of(layout, k, size));
    }
    std::vector<std::byte> want(bytes), got(bytes);
    reduce::reduce_reference(want.data(), host_srcs.data(), nsrc, count, dtype, op);

    void* dst = device_[kMaxInputs] + offset_of(layout, kMaxInputs, size);
    if (layout == Layout::kInPlace) dst = const_cast<void*>(device_srcs[0]);
    const Status status = reduce(dst, device_srcs.data(), nsrc, count, dtype, op, stream_);
    if (!status.ok()) {
      std::fprintf(stderr, "reduce: %s\n", status.message().c_str());
      Comparison failed;
      failed.wrong = count;
      failed.first_wrong = 0;
      return failed;
    }
    const Status synced = stream_.synchronize();
    if (!synced.ok()) {
      std::fprintf(stderr, "reduce: %s\n", synced.message().c_str());
      std::exit(1);  // a device fault poisons the context: nothing after it is meaningful
    }
    CHECK_CUDA(cudaMemcpy(got.data(), dst, bytes, cudaMemcpyDeviceToHost));
    if (layout == Layout::kInPlace)  // restore input 0 for the next case
      CHECK_CUDA(cudaMemcpy(const_cast<void*>(device_srcs[0]), inputs[0].data(), bytes,
                            cudaMemcpyHostToDevice));
    return compare_elements(got, want, count, dtype, op);
  }

  std::vector<std::size_t> counts_;
  std::size_t max_count_ = 0;
  std::byte* device_[kMaxInputs + 1] = {};
  Stream stream_;
};

int run(int argc, char** argv) {
  bool quick = false;
  unsigned long long seed = 20261202;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--seed" && i + 1 < argc) {
      seed = std::strtoull(argv[++i], nullptr, 10);
    } else {
      std::fprintf(stderr,
                   "usage: ringsync-cuda-check [--quick] [--seed N]\n"
                   "Checks every device reduction kernel against the CPU reference.\n");
      return 2;
    }
  }
  const Status usable = available();
  if (!usable.ok()) {
    std::printf("%s\n", usable.message().c_str());  // "no CUDA device: ..."
    return no_device_here() ? 77 : 1;  // a GPU that is there but unusable fails
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::printf("device 0: %s (sm_%d%d, %d multiprocessors); seed %llu\n", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount, seed);

  const std::vector<std::size_t> counts =
      quick ? std::vector<std::size_t>{1, 3, 4099} : std::vector<std::size_t>{1, 3, 257, 65537, 1048579};
  std::printf("counts:");
  for (auto c : counts) std::printf(" %zu", c);
  std::printf("; layouts: aligned, same offset, mixed offsets, byte offset, in place\n\n");
  std::printf("%-6s %-5s %8s %8s %8s %8s\n", "dtype", "op", "1 input", "2", "3", "8");

  Checker checker(counts);
  RandomElements random(seed);
  Totals totals;
  for (int d = 0; d < kNumDTypes; ++d) {
    for (int o = 0; o < kNumReduceOps; ++o) {
      const auto dtype = static_cast<DType>(d);
      const auto op = static_cast<ReduceOp>(o);
      const auto cells = checker.run(dtype, op, random, totals);
      std::printf("%-6s %-5s", std::string(dtype_name(dtype)).c_str(),
                  std::string(reduce_op_name(op)).c_str());
      for (const auto& cell : cells) std::printf(" %8s", cell.c_str());
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  std::printf("\n");
  if (totals.failed > 0) {
    std::printf("MISMATCH: %zu of %zu cases differ from the CPU reference\n", totals.failed,
                totals.cases);
    return 1;
  }
  std::printf("all results match the CPU reference: %zu cases, %zu bit-exact\n", totals.cases,
              totals.cases - totals.inexact);
  return 0;
}

}  // namespace
}  // namespace ringsync::cuda::tools

int main(int argc, char** argv) { return ringsync::cuda::tools::run(argc, argv); }
