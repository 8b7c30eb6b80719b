#include "bench/bench_check.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <vector>

#include "common/half.h"

namespace ringsync::bench {
namespace {

// Inputs repeat every kPeriod elements. A prime, so the pattern lines up with no
// power-of-two chunk, slice or rank boundary.
constexpr std::size_t kPeriod = 1021;

// Salts keep the input kinds unrelated to one another.
enum Salt : std::uint64_t { kSumSalt = 1, kMinMaxSalt = 2, kRankDataSalt = 3 };

// splitmix64's finaliser: a deterministic, well-spread hash.
std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

std::uint64_t draw(Salt salt, int rank, std::size_t j) {
  return mix((salt << 56) ^ (static_cast<std::uint64_t>(rank) * kPeriod + j));
}

// The largest integer that a sum may reach and stay exact in dtype, and apart from
// the unwritten mark (255 for uint8).
std::uint64_t exact_sum_limit(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 1ull << 24;
    case DType::kF64: return 1ull << 53;
    case DType::kF16: return 2048;
    case DType::kBF16: return 256;
    case DType::kI32: return (1ull << 31) - 1;
    case DType::kI64: return 1ull << 53;  // folded in double below
    case DType::kU8: return 254;
  }
  return 1;
}

// The largest k with 2^k exact and finite in dtype (and apart from the mark).
int max_power_of_two(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 127;
    case DType::kF64: return 1023;
    case DType::kF16: return 15;
    case DType::kBF16: return 127;
    case DType::kI32: return 30;
    case DType::kI64: return 62;
    case DType::kU8: return 7;
  }
  return 0;
}

// Rank r's allreduce input at position j (of the period), an exact small integer.
double allreduce_value(DType dtype, ReduceOp op, int r, std::size_t j, int ranks) {
  const auto n = static_cast<std::uint64_t>(ranks);
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAvg: {
      // Values 0..m-1 with n * (m-1) within the exact limit.
      const std::uint64_t m = std::min<std::uint64_t>(11, exact_sum_limit(dtype) / n + 1);
      if (m >= 2) return static_cast<double>(draw(kSumSalt, r, j) % m);
      // More ranks than that: a single 1 among them at each position.
      return j % n == static_cast<std::uint64_t>(r) ? 1.0 : 0.0;
    }
    case ReduceOp::kMin:
    case ReduceOp::kMax: return static_cast<double>(draw(kMinMaxSalt, r, j) % 100);
    case ReduceOp::kProd: {
      // A 2 from the ranks r with (r + j) % p == 0: at most ceil(n / p) of them, so
      // the product is at most 2^max_power_of_two.
      const auto k = static_cast<std::uint64_t>(max_power_of_two(dtype));
      const std::uint64_t p = std::max<std::uint64_t>(3, (n + k - 1) / k);
      return (static_cast<std::uint64_t>(r) + j) % p == 0 ? 2.0 : 1.0;
    }
  }
  return 0;
}

double rank_value(int r, std::size_t j) {
  return static_cast<double>(draw(kRankDataSalt, r, j) % 100);
}

// The bits of an exact integer (or power of two) v as an element of dtype.
std::uint64_t encode(DType dtype, double v) {
  switch (dtype) {
    case DType::kF32: return std::bit_cast<std::uint32_t>(static_cast<float>(v));
    case DType::kF64: return std::bit_cast<std::uint64_t>(v);
    case DType::kF16: return f32_to_f16(static_cast<float>(v));
    case DType::kBF16: return f32_to_bf16(static_cast<float>(v));
    case DType::kI32: return static_cast<std::uint32_t>(static_cast<std::int32_t>(v));
    case DType::kI64: return static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
    case DType::kU8: return static_cast<std::uint8_t>(v);
  }
  return 0;
}

// avg: the exact sum divided by n as the kernels do (common/reduce.h).
std::uint64_t encode_average(DType dtype, double sum, int ranks) {
  switch (dtype) {
    case DType::kF32:
    case DType::kF16:
    case DType::kBF16: {
      const float q = static_cast<float>(sum) / static_cast<float>(ranks);
      return dtype == DType::kF32   ? std::bit_cast<std::uint32_t>(q)
             : dtype == DType::kF16 ? f32_to_f16(q)
                                    : f32_to_bf16(q);
    }
    case DType::kF64: return std::bit_cast<std::uint64_t>(sum / ranks);
    default: return encode(dtype, static_cast<double>(static_cast<std::int64_t>(sum) / ranks));
  }
}

// The expected allreduce result at position j: the fold is exact in double (every
// partial result is an integer below 2^53 or a power of two), whatever the order.
std::uint64_t expected_allreduce(DType dtype, ReduceOp op, std::size_t j, int ranks) {
  double acc = allreduce_value(dtype, op, 0, j, ranks);
  for (int r = 1; r < ranks; ++r) {
    const double v = allreduce_value(dtype, op, r, j, ranks);
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg: acc += v; break;
      case ReduceOp::kMin: acc = std::min(acc, v); break;
      case ReduceOp::kMax: acc = std::max(acc, v); break;
      case ReduceOp::kProd: acc *= v; break;
    }
  }
  return op == ReduceOp::kAvg ? encode_average(dtype, acc, ranks) : encode(dtype, acc);
}

// One period of element bits.
using Table = std::vector<std::uint64_t>;

template <class Value>
Table table_of(Value value_at) {
  Table t(kPeriod);
  for (std::size_t j = 0; j < kPeriod; ++j) t[j] = value_at(j);
  return t;
}

// Element access by width only: the bits are compared, never the values, so NaN
// marks compare unequal and the float types need no special case.
template <class Bits>
void fill_bits(void* buf, std::size_t count, const Table& table) {
  auto* out = static_cast<unsigned char*>(buf);
  std::size_t j = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const auto v = static_cast<Bits>(table[j]);
    std::memcpy(out + i * sizeof(Bits), &v, sizeof(Bits));
    if (++j == kPeriod) j = 0;
  }
}

// `first`: the pattern index of buf's first element.
template <class Bits>
std::int64_t count_bits_wrong(const void* buf, std::size_t count, const Table& table,
                              std::size_t first) {
  const auto* in = static_cast<const unsigned char*>(buf);
  std::int64_t wrong = 0;
  std::size_t j = first % kPeriod;
  for (std::size_t i = 0; i < count; ++i) {
    Bits v;
    std::memcpy(&v, in + i * sizeof(Bits), sizeof(Bits));
    wrong += v != static_cast<Bits>(table[j]) ? 1 : 0;
    if (++j == kPeriod) j = 0;
  }
  return wrong;
}

void fill(void* buf, std::size_t count, DType dtype, const Table& table) {
  switch (dtype_size(dtype)) {
    case 1: return fill_bits<std::uint8_t>(buf, count, table);
    case 2: return fill_bits<std::uint16_t>(buf, count, table);
    case 4: return fill_bits<std::uint32_t>(buf, count, table);
    default: return fill_bits<std::uint64_t>(buf, count, table);
  }
}

std::int64_t count_wrong(const void* buf, std::size_t count, DType dtype, const Table& table,
                         std::size_t first = 0) {
  switch (dtype_size(dtype)) {
    case 1: return count_bits_wrong<std::uint8_t>(buf, count, table, first);
    case 2: return count_bits_wrong<std::uint16_t>(buf, count, table, first);
    case 4: return count_bits_wrong<std::uint32_t>(buf, count, table, first);
    default: return count_bits_wrong<std::uint64_t>(buf, count, table, first);
  }
}

Table rank_data_table(DType dtype, int rank) {
  return table_of([&](std::size_t j) { return encode(dtype, rank_value(rank, j)); });
}

Table allreduce_table(DType dtype, ReduceOp op, int ranks) {
  return table_of([&](std::size_t j) { return expected_allreduce(dtype, op, j, ranks); });
}

}  // namespace

void mark_unwritten(void* recv, std::size_t bytes) { std::memset(recv, 0xFF, bytes); }

void fill_allreduce_input(void* send, std::size_t count, DType dtype, ReduceOp op, int rank,
                          int ranks) {
  fill(send, count, dtype, table_of([&](std::size_t j) {
         return encode(dtype, allreduce_value(dtype, op, rank, j, ranks));
       }));
}

std::int64_t count_allreduce_wrong(const void* recv, std::size_t count, DType dtype, ReduceOp op,
                                   int ranks) {
  return count_wrong(recv, count, dtype, allreduce_table(dtype, op, ranks));
}

void fill_rank_data(void* send, std::size_t count, DType dtype, int rank) {
  fill(send, count, dtype, rank_data_table(dtype, rank));
}

std::int64_t count_broadcast_wrong(const void* recv, std::size_t count, DType dtype, int root) {
  return count_wrong(recv, count, dtype, rank_data_table(dtype, root));
}

std::int64_t count_allgather_wrong(const void* recv, std::size_t count, DType dtype, int ranks) {
  const auto* parts = static_cast<const unsigned char*>(recv);
  const std::size_t part_bytes = count * dtype_size(dtype);
  std::int64_t wrong = 0;
  for (int r = 0; r < ranks; ++r)
    wrong += count_wrong(parts + static_cast<std::size_t>(r) * part_bytes, count, dtype,
                         rank_data_table(dtype, r));
  return wrong;
}

std::int64_t count_reduce_scatter_wrong(const void* recv, std::size_t count, DType dtype,
                                        ReduceOp op, int rank, int ranks) {
  return count_wrong(recv, count, dtype, allreduce_table(dtype, op, ranks),
                     static_cast<std::size_t>(rank) * count);
}

std::int64_t count_alltoall_wrong(const void* recv, std::size_t count, DType dtype, int rank,
                                  int ranks) {
  // Block r came from rank r, which sent its data from block `rank` of its input.
  const auto* blocks = static_cast<const unsigned char*>(recv);
  const std::size_t block_bytes = count * dtype_size(dtype);
  std::int64_t wrong = 0;
  for (int r = 0; r < ranks; ++r)
    wrong += count_wrong(blocks + static_cast<std::size_t>(r) * block_bytes, count, dtype,
                         rank_data_table(dtype, r), static_cast<std::size_t>(rank) * count);
  return wrong;
}

}  // namespace ringsync::bench
