// reduce-bench: throughput of the CPU reduction kernels against memcpy on this machine.
//
//   reduce-bench [--size BYTES] [--reps N] [--isa NAME]
//
// For every case it reports bandwidth two ways: bytes of dst written per second, and
// total memory traffic per second (every input read + dst written), each as best and
// median of N timed runs, plus the ratio to memcpy of the same size (whose traffic is
// one read + one write). Every run of a case is paired with a memcpy run next to it,
// and the ratio is the median of the per-pair ratios, which stays meaningful on a
// machine whose available bandwidth drifts.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/dtype.h"
#include "common/half.h"
#include "common/reduce.h"

namespace {

using ringsync::DType;
using ringsync::ReduceOp;
namespace reduce = ringsync::reduce;

struct Options {
  std::size_t bytes = std::size_t{64} << 20;
  int reps = 20;
  std::string isa;  // empty: the dispatched kernels
};

void print_usage(std::FILE* to) {
  std::fprintf(to,
               "usage: reduce-bench [--size BYTES] [--reps N] [--isa NAME]\n"
               "  --size BYTES  size of each buffer (dst and every input); suffixes K, M, G\n"
               "                (powers of 1024); default 64M\n"
               "  --reps N      timed runs per case (each paired with a memcpy run); default 20\n"
               "  --isa NAME    kernel variant to measure (avx512f, avx2, default); default:\n"
               "                the one reduce() dispatches to\n");
}

std::optional<std::size_t> parse_size(std::string_view text) {
  if (text.empty()) return std::nullopt;
  std::size_t shift = 0;
  switch (text.back()) {
    case 'K': case 'k': shift = 10; break;
    case 'M': case 'm': shift = 20; break;
    case 'G': case 'g': shift = 30; break;
    default: break;
  }
  if (shift != 0) text.remove_suffix(1);
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(std::stoull(std::string(text))) << shift;
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const bool has_value = i + 1 < argc;
    if (arg == "--help" || arg == "-h") {
      print_usage(stdout);
      std::exit(0);
    } else if (arg == "--size" && has_value) {
      const auto size = parse_size(argv[++i]);
      if (!size || *size < 1024) {
        std::fprintf(stderr, "reduce-bench: --size wants a byte count >= 1024 such as 64M, got '%s'\n", argv[i]);
        return std::nullopt;
      }
      options.bytes = *size;
    } else if (arg == "--reps" && has_value) {
      options.reps = std::atoi(argv[++i]);
      if (options.reps < 1) {
        std::fprintf(stderr, "reduce-bench: --reps wants a positive count, got '%s'\n", argv[i]);
        return std::nullopt;
      }
    } else if (arg == "--isa" && has_value) {
      options.isa = argv[++i];
    } else {
      std::fprintf(stderr, "reduce-bench: unknown or incomplete argument '%s'\n", argv[i]);
      print_usage(stderr);
      return std::nullopt;
    }
  }
  return options;
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "unknown CPU";
}

// A page-aligned buffer, written once so its pages are mapped before any timing.
class Buffer {
 public:
  explicit Buffer(std::size_t bytes)
      : memory_(static_cast<unsigned char*>(std::aligned_alloc(4096, round_up(bytes)))) {
    if (memory_ == nullptr) {
      std::fprintf(stderr, "reduce-bench: cannot allocate %zu bytes; try a smaller --size\n", bytes);
      std::exit(1);
    }
    std::memset(memory_.get(), 0, round_up(bytes));
  }
  unsigned char* data() const { return memory_.get(); }

 private:
  struct Free {
    void operator()(unsigned char* p) const { std::free(p); }
  };
  static std::size_t round_up(std::size_t n) { return (n + 4095) / 4096 * 4096; }
  std::unique_ptr<unsigned char, Free> memory_;
};

// Fills with small values (1, 2, ...) so sums and in-place repeats stay finite and normal.
void fill_values(DType dtype, void* data, std::size_t count, int seed) {
  for (std::size_t i = 0; i < count; ++i) {
    const float v = static_cast<float>((i + static_cast<std::size_t>(seed)) % 7 + 1);
    auto* p = static_cast<unsigned char*>(data);
    switch (dtype) {
      case DType::kF32: std::memcpy(p + 4 * i, &v, 4); break;
      case DType::kF64: { const double d = v; std::memcpy(p + 8 * i, &d, 8); break; }
      case DType::kF16: { const auto h = ringsync::f32_to_f16(v); std::memcpy(p + 2 * i, &h, 2); break; }
      case DType::kBF16: { const auto b = ringsync::f32_to_bf16(v); std::memcpy(p + 2 * i, &b, 2); break; }
      case DType::kI32: { const auto n = static_cast<std::int32_t>(v); std::memcpy(p + 4 * i, &n, 4); break; }
      case DType::kI64: { const auto n = static_cast<std::int64_t>(v); std::memcpy(p + 8 * i, &n, 8); break; }
      case DType::kU8: p[i] = static_cast<unsigned char>(v); break;
    }
  }
}

double seconds_of(const std::function<void()>& run) {
  const auto start = std::chrono::steady_clock::now();
  run();
  const auto stop = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(stop - start).count();
}

double median_of(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// A case timed in rounds, each round running memcpy and the case back to back (in
// alternating order), so the ratio of the two sees the same machine conditions even
// when other work on the host makes absolute numbers drift.
struct Paired {
  std::vector<double> case_s;
  std::vector<double> memcpy_s;
};

Paired time_paired(int rounds, const std::function<void()>& copy, const std::function<void()>& run) {
  copy();  // warm-up: caches, TLB, branch predictors
  run();
  Paired p;
  for (int r = 0; r < rounds; ++r) {
    if (r % 2 == 0) {
      p.memcpy_s.push_back(seconds_of(copy));
      p.case_s.push_back(seconds_of(run));
    } else {
      p.case_s.push_back(seconds_of(run));
      p.memcpy_s.push_back(seconds_of(copy));
    }
  }
  return p;
}

struct Case {
  const char* label;
  DType dtype;
  std::size_t nsrc;
  bool in_place;
};

}  // namespace

int main(int argc, char** argv) {
  const auto parsed = parse_options(argc, argv);
  if (!parsed) return 2;
  const Options& options = *parsed;

  const reduce::KernelSet* kernels = nullptr;
  std::string available;
  for (const reduce::KernelSet& k : reduce::available_kernels()) {
    available += std::string(available.empty() ? "" : ", ") + k.isa;
    if ((options.isa.empty() && kernels == nullptr) || options.isa == k.isa) kernels = &k;
  }
  if (kernels == nullptr) {
    std::fprintf(stderr, "reduce-bench: this CPU cannot run --isa '%s'; available: %s\n",
                 options.isa.c_str(), available.c_str());
    return 2;
  }

  const std::size_t bytes = options.bytes;
  std::printf("reduce-bench: %s\n", cpu_model().c_str());
  std::printf("kernel_isa() = %s; measuring: %s; available: %s\n", reduce::kernel_isa(),
              kernels->isa, available.c_str());
  std::printf("buffer size %zu bytes (%.1f MiB) each, %d timed runs per case, single thread\n",
              bytes, static_cast<double>(bytes) / (1 << 20), options.reps);
  std::printf("dst GB/s = dst bytes / time; traffic GB/s = (inputs read + dst written) / time; "
              "GB = 1e9 bytes\n\n");

  constexpr std::size_t kMaxInputs = 4;
  std::vector<Buffer> inputs;
  inputs.reserve(kMaxInputs);
  for (std::size_t k = 0; k < kMaxInputs; ++k) inputs.emplace_back(bytes);
  Buffer dst(bytes);

  std::printf("%-22s %9s %9s %11s %11s %10s %10s\n", "case", "dst best", "dst med",
              "traffic best", "traffic med", "vs memcpy", "vs memcpy");
  std::printf("%-22s %9s %9s %11s %11s %10s %10s\n", "", "GB/s", "GB/s", "GB/s", "GB/s",
              "(traffic)", "(dst)");

  std::vector<double> all_memcpy_s;
  const double gb = static_cast<double>(bytes) / 1e9;

  const Case cases[] = {
      {"f32 sum nsrc=2", DType::kF32, 2, false},
      {"f32 sum nsrc=4", DType::kF32, 4, false},
      {"f32 sum nsrc=2 inplace", DType::kF32, 2, true},
      {"bf16 sum nsrc=2", DType::kBF16, 2, false},
      {"f16 sum nsrc=2", DType::kF16, 2, false},
      {"f64 sum nsrc=2", DType::kF64, 2, false},
      {"i32 sum nsrc=2", DType::kI32, 2, false},
  };
  for (const Case& c : cases) {
    const std::size_t count = bytes / ringsync::dtype_size(c.dtype);
    std::vector<const void*> srcs;
    for (std::size_t k = 0; k < c.nsrc; ++k) {
      fill_values(c.dtype, inputs[k].data(), count, static_cast<int>(k));
      srcs.push_back(inputs[k].data());
    }
    void* out = c.in_place ? inputs[0].data() : dst.data();
    // The paired memcpy copies input 1 into dst: never into the in-place accumulator.
    const auto copy_for_case = [&] { std::memcpy(dst.data(), inputs[1].data(), bytes); };
    const Paired p = time_paired(options.reps, copy_for_case, [&] {
      kernels->reduce(out, srcs.data(), c.nsrc, count, c.dtype, ReduceOp::kSum);
    });
    all_memcpy_s.insert(all_memcpy_s.end(), p.memcpy_s.begin(), p.memcpy_s.end());
    // dst-rate ratio per round; traffic ratio scales it by (nsrc + 1) / 2.
    std::vector<double> dst_ratio;
    for (std::size_t r = 0; r < p.case_s.size(); ++r) dst_ratio.push_back(p.memcpy_s[r] / p.case_s[r]);
    const double traffic = static_cast<double>(c.nsrc + 1);
    const double best = *std::min_element(p.case_s.begin(), p.case_s.end());
    const double median = median_of(p.case_s);
    const double ratio = median_of(dst_ratio);
    std::printf("%-22s %9.2f %9.2f %11.2f %11.2f %9.0f%% %9.0f%%\n", c.label, gb / best,
                gb / median, traffic * gb / best, traffic * gb / median,
                100.0 * ratio * traffic / 2.0, 100.0 * ratio);
  }
  const double copy_best = *std::min_element(all_memcpy_s.begin(), all_memcpy_s.end());
  const double copy_median = median_of(all_memcpy_s);
  std::printf("%-22s %9.2f %9.2f %11.2f %11.2f %10s %10s\n", "memcpy (all rounds)", gb / copy_best,
              gb / copy_median, 2 * gb / copy_best, 2 * gb / copy_median, "100%", "100%");
  std::printf("\n'vs memcpy' = median over rounds of (case rate / memcpy rate in the same round)\n");
  return 0;
}
