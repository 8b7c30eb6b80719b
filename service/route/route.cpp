#include "service/route/route.h"

#include "common/dtype.h"
#include "common/units.h"

namespace ringsync::service::route {

std::uint64_t local_work_bytes(wire::CollectiveKind kind, std::uint64_t count, DType dtype, std::uint64_t ranks) {
  return wire::extent(kind, count, ranks).payload() * dtype_size(dtype) * ranks;
}

const char* algorithm_name(Algorithm algorithm) {
  return algorithm == Algorithm::kHalvingDoubling ? "halving-doubling" : "ring";
}

Algorithm data_algorithm(std::uint64_t halving_doubling_bytes, wire::CollectiveKind kind, std::uint64_t bytes,
                         std::uint32_t nodes) {
  if (kind != wire::CollectiveKind::kAllreduce || nodes < 2) return Algorithm::kRing;
  return halving_doubling_bytes > 0 && bytes <= halving_doubling_bytes ? Algorithm::kHalvingDoubling : Algorithm::kRing;
}

Result<std::uint64_t> halving_doubling_limit(std::string_view algorithm, std::uint64_t rhd_max_bytes) {
  if (algorithm == "auto") return rhd_max_bytes;
  if (algorithm == "ring") return std::uint64_t{0};
  if (algorithm == "rhd") return kAlways;
  return Status::InvalidArgument("algorithm must be auto, ring or rhd, got '" + std::string(algorithm) + "'");
}

std::string describe_limit(std::uint64_t halving_doubling_bytes) {
  if (halving_doubling_bytes == 0) return "ring";
  if (halving_doubling_bytes == kAlways) return "rhd";
  return "auto (halving-doubling allreduces up to " + units::format_bytes(halving_doubling_bytes) + ", ring above)";
}

}  // namespace ringsync::service::route
