#include "service/integrity/verify_results.h"

#include <string>

namespace ringsync::service::integrity {

Result<VerifyResults> parse_verify_results(std::string_view text) {
  if (text == "off") return VerifyResults::kOff;
  if (text == "sample") return VerifyResults::kSample;
  if (text == "all") return VerifyResults::kAll;
  return Status::InvalidArgument("verify-results must be off, sample or all, got '" + std::string(text) + "'");
}

std::string_view verify_results_name(VerifyResults mode) {
  switch (mode) {
    case VerifyResults::kOff: return "off";
    case VerifyResults::kSample: return "sample";
    case VerifyResults::kAll: return "all";
  }
  return "off";
}

bool result_is_shared(wire::CollectiveKind kind) { return wire::traits(kind).shared_result; }

}  // namespace ringsync::service::integrity
