#include "service/route/route.h"

#include "common/dtype.h"
#include "common/units.h"

namespace ringsync::service::route {

std::uint64_t local_work_bytes(wire::CollectiveKind kind, std::uint64_t count, DType dtype, std::uint64_t ranks) {
  return wire::extent(kind, count, ranks).payload() * dtype_size(dtype) * ranks;
}

const char* algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::kHalvingDoubling:
      return "halving-doubling";
    case Algorithm::kDirect:
      return "direct";
    default:
      return "ring";
  }
}

Algorithm data_algorithm(const DataRoutes& routes, wire::CollectiveKind kind, std::uint64_t bytes,
                         std::uint32_t nodes) {
  if (kind != wire::CollectiveKind::kAllreduce || nodes < 2) return Algorithm::kRing;
  if (routes.direct_bytes > 0 && bytes <= routes.direct_bytes) return Algorithm::kDirect;
  if (routes.halving_doubling_bytes > 0 && bytes <= routes.halving_doubling_bytes) {
    const bool power_of_two = (nodes & (nodes - 1)) == 0;
    return power_of_two || routes.fold ? Algorithm::kHalvingDoubling : Algorithm::kDirect;
  }
  return Algorithm::kRing;
}

Result<DataRoutes> data_routes(std::string_view algorithm, std::uint64_t direct_max_bytes,
                               std::uint64_t rhd_max_bytes) {
  if (algorithm == "auto") return DataRoutes{direct_max_bytes, rhd_max_bytes, /*fold=*/false};
  if (algorithm == "ring") return DataRoutes{};
  if (algorithm == "rhd") return DataRoutes{0, kAlways};
  if (algorithm == "direct") return DataRoutes{kAlways, 0};
  return Status::InvalidArgument("algorithm must be auto, ring, rhd or direct, got '" + std::string(algorithm) + "'");
}

std::string describe(const DataRoutes& routes) {
  if (routes.direct_bytes == kAlways) return "direct";
  if (routes.halving_doubling_bytes == kAlways && routes.direct_bytes == 0) return "rhd";
  if (routes == DataRoutes{}) return "ring";
  // Limits at or below the direct one never apply; kAlways only comes with --algorithm.
  std::string out = "auto (allreduces by ";
  if (routes.direct_bytes > 0) out += "direct up to " + units::format_bytes(routes.direct_bytes) + ", ";
  if (routes.halving_doubling_bytes > routes.direct_bytes)
    out += "halving-doubling up to " + units::format_bytes(routes.halving_doubling_bytes) +
           (routes.fold ? ", " : " (direct where the node count is not a power of two), ");
  out += "ring above";
  return out + ")";
}

}  // namespace ringsync::service::route
