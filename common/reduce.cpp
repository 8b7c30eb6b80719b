// Runtime dispatch of the reduction kernels: the best instruction-set variant this CPU
// runs is picked once; every variant stays callable for tests and benchmarks.
#include "common/reduce.h"

#include <cpuid.h>
#include <unistd.h>

#include <array>
#include <fstream>
#include <string>

#include "common/reduce_kernels.h"

namespace ringsync::reduce {
namespace detail {
namespace {

// "32768K" -> bytes; 0 when unreadable.
std::size_t parse_cache_size(const std::string& text) {
  std::size_t value = 0;
  std::size_t i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
    value = value * 10 + static_cast<std::size_t>(text[i] - '0');
  }
  if (i < text.size() && text[i] == 'K') return value << 10;
  if (i < text.size() && text[i] == 'M') return value << 20;
  return value;
}

// Size of one instance of the last-level cache seen by cpu0. sysfs reports the cache
// one core actually shares; sysconf(_SC_LEVEL3_CACHE_SIZE) can report a whole
// multi-die package (e.g. 384 MiB for an EPYC whose cores each see a 32 MiB L3).
std::size_t read_last_level_cache_bytes() {
  int best_level = 0;
  std::size_t best_size = 0;
  for (int index = 0; index < 16; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(dir + "/level");
    std::ifstream size_file(dir + "/size");
    int level = 0;
    std::string size_text;
    if (!(level_file >> level) || !(size_file >> size_text)) break;
    const std::size_t size = parse_cache_size(size_text);
    if (level > best_level && size > 0) {
      best_level = level;
      best_size = size;
    }
  }
  if (best_size > 0) return best_size;
  const long size = sysconf(_SC_LEVEL3_CACHE_SIZE);
  if (size > 0) return static_cast<std::size_t>(size);
  return std::size_t{32} << 20;  // unknown: assume a typical server L3
}

std::size_t last_level_cache_bytes() {
  static const std::size_t bytes = read_last_level_cache_bytes();
  return bytes;
}

}  // namespace

bool prefer_streaming_stores(std::size_t dst_bytes, std::size_t nsrc) {
  // Working set = inputs + output. Streaming only once it is well past the cache: the
  // result of a smaller reduction is usually read again soon (sent, or reduced further).
  const std::size_t working_set_limit = 2 * last_level_cache_bytes();
  return dst_bytes >= working_set_limit / (nsrc + 1);
}

}  // namespace detail

namespace {

struct KernelTable {
  std::array<KernelSet, 3> sets{};
  std::size_t size = 0;
};

// CPUID leaf 1, ECX bit 29 (clang 14's __builtin_cpu_supports knows no "f16c").
bool has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  return __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & (1u << 29)) != 0;
}

const KernelTable& kernel_table() {
  static const KernelTable table = [] {
    KernelTable t;
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512dq")) {
      t.sets[t.size++] = {"avx512f", &detail::reduce_avx512, &detail::divide_avx512};
    }
    if (__builtin_cpu_supports("avx2") && has_f16c()) {
      t.sets[t.size++] = {"avx2", &detail::reduce_avx2, &detail::divide_avx2};
    }
    t.sets[t.size++] = {"default", &detail::reduce_default, &detail::divide_default};
    return t;
  }();
  return table;
}

const KernelSet& best_kernels() {
  static const KernelSet& best = kernel_table().sets[0];
  return best;
}

}  // namespace

void reduce(void* dst, const void* const* srcs, std::size_t nsrc, std::size_t count, DType dtype,
            ReduceOp op) {
  best_kernels().reduce(dst, srcs, nsrc, count, dtype, op);
}

void divide(void* data, std::size_t count, DType dtype, std::size_t divisor) {
  best_kernels().divide(data, count, dtype, divisor);
}

const char* kernel_isa() { return best_kernels().isa; }

std::span<const KernelSet> available_kernels() {
  const KernelTable& table = kernel_table();
  return {table.sets.data(), table.size};
}

}  // namespace ringsync::reduce
