#include "common/dtype.h"

#include <array>

namespace ringsync {
namespace {
constexpr std::array<std::string_view, kNumDTypes> kDTypeNames = {"f32", "f64", "f16", "bf16",
                                                                  "i32", "i64", "u8"};
constexpr std::array<std::size_t, kNumDTypes> kDTypeSizes = {4, 8, 2, 2, 4, 8, 1};
constexpr std::array<std::string_view, kNumReduceOps> kOpNames = {"sum", "avg", "min", "max",
                                                                   "prod"};
}  // namespace

bool is_valid(DType t) { return static_cast<int>(t) < kNumDTypes; }
bool is_valid(ReduceOp op) { return static_cast<int>(op) < kNumReduceOps; }

std::size_t dtype_size(DType t) { return is_valid(t) ? kDTypeSizes[static_cast<int>(t)] : 0; }

std::string_view dtype_name(DType t) {
  return is_valid(t) ? kDTypeNames[static_cast<int>(t)] : std::string_view("invalid");
}

std::string_view reduce_op_name(ReduceOp op) {
  return is_valid(op) ? kOpNames[static_cast<int>(op)] : std::string_view("invalid");
}

std::optional<DType> parse_dtype(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (kDTypeNames[i] == name) return static_cast<DType>(i);
  return std::nullopt;
}

std::optional<ReduceOp> parse_reduce_op(std::string_view name) {
  for (int i = 0; i < kNumReduceOps; ++i)
    if (kOpNames[i] == name) return static_cast<ReduceOp>(i);
  return std::nullopt;
}

}  // namespace ringsync
