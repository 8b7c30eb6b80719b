// Element types and reduction operators shared by client, daemon and kernels.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ringsync {

// Values match rs_dtype_t (ringsync.h) and DType (client.fbs).
enum class DType : std::uint8_t { kF32 = 0, kF64, kF16, kBF16, kI32, kI64, kU8 };
inline constexpr int kNumDTypes = 7;

// Values match rs_op_t (ringsync.h) and ReduceOp (client.fbs).
enum class ReduceOp : std::uint8_t { kSum = 0, kAvg, kMin, kMax, kProd };
inline constexpr int kNumReduceOps = 5;

std::size_t dtype_size(DType t);
std::string_view dtype_name(DType t);        // "f32", "bf16", ...
std::string_view reduce_op_name(ReduceOp op);  // "sum", "avg", ...
std::optional<DType> parse_dtype(std::string_view name);
std::optional<ReduceOp> parse_reduce_op(std::string_view name);
bool is_valid(DType t);
bool is_valid(ReduceOp op);

}  // namespace ringsync
