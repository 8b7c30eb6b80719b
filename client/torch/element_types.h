// torch's element types and reduce ops in the C ABI's terms, with the errors that
// name what is not supported. Header-only: included by process_group.cpp alone.
//
// Reductions take the seven dtypes the daemon reduces (float32, float64, float16,
// bfloat16, int32, int64, uint8), and bool under MIN and MAX (as uint8: exact,
// MAX is "any", MIN is "all"). Collectives that only move data (broadcast,
// allgather, alltoall) take every dtype: those without a daemon dtype move as
// bytes.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "ringsync/ringsync.h"

namespace ringsync::torch_backend {

// The daemon's dtype for a torch dtype; nullopt for the others.
inline std::optional<rs_dtype_t> daemon_dtype(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Float: return RS_F32;
    case c10::ScalarType::Double: return RS_F64;
    case c10::ScalarType::Half: return RS_F16;
    case c10::ScalarType::BFloat16: return RS_BF16;
    case c10::ScalarType::Int: return RS_I32;
    case c10::ScalarType::Long: return RS_I64;
    case c10::ScalarType::Byte: return RS_U8;
    default: return std::nullopt;
  }
}

// torch's Python name of a dtype ("int16" for Short), as users write it.
inline std::string dtype_name(c10::ScalarType type) {
  switch (type) {
    case c10::ScalarType::Byte: return "uint8";
    case c10::ScalarType::Char: return "int8";
    case c10::ScalarType::Short: return "int16";
    case c10::ScalarType::Int: return "int32";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::BFloat16: return "bfloat16";
    case c10::ScalarType::Bool: return "bool";
    case c10::ScalarType::ComplexHalf: return "complex32";
    case c10::ScalarType::ComplexFloat: return "complex64";
    case c10::ScalarType::ComplexDouble: return "complex128";
    default: return c10::toString(type);
  }
}

inline const char* op_name(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

// A reduction's element type and op; a RuntimeError naming the call and what it
// does not support otherwise.
struct Reduction {
  rs_dtype_t dtype;
  rs_op_t op;
};

inline Reduction reduction(const char* call, c10::ScalarType type, const c10d::ReduceOp& reduce) {
  const auto red = static_cast<c10d::ReduceOp::RedOpType>(reduce);
  rs_op_t op = RS_SUM;
  switch (red) {
    case c10d::ReduceOp::SUM: op = RS_SUM; break;
    case c10d::ReduceOp::AVG: op = RS_AVG; break;
    case c10d::ReduceOp::PRODUCT: op = RS_PROD; break;
    case c10d::ReduceOp::MIN: op = RS_MIN; break;
    case c10d::ReduceOp::MAX: op = RS_MAX; break;
    default:
      TORCH_CHECK(false, "ringsync ", call, ": ReduceOp.", op_name(red),
                  " is not supported; the ringsync backend reduces with SUM, AVG, PRODUCT, "
                  "MIN and MAX");
  }
  if (type == c10::ScalarType::Bool) {
    TORCH_CHECK(op == RS_MIN || op == RS_MAX, "ringsync ", call, ": bool tensors reduce with "
                "MIN or MAX only (not ", op_name(red), "); convert to uint8 or int32 to add "
                "or multiply them");
    return Reduction{RS_U8, op};
  }
  const auto dtype = daemon_dtype(type);
  TORCH_CHECK(dtype.has_value(), "ringsync ", call, ": dtype ", dtype_name(type),
              " is not supported for reductions; use float32, float64, float16, bfloat16, "
              "int32, int64 or uint8 (bool with MIN or MAX)");
  return Reduction{*dtype, op};
}

// How a data-moving collective sends `numel` elements of `type`: in the daemon's
// dtype where there is one, else as bytes.
struct Movement {
  rs_dtype_t dtype;
  std::size_t count;
};

inline Movement movement(c10::ScalarType type, std::size_t numel) {
  if (const auto dtype = daemon_dtype(type)) return Movement{*dtype, numel};
  return Movement{RS_U8, numel * c10::elementSize(type)};
}

}  // namespace ringsync::torch_backend
