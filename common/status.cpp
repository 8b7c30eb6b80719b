#include "common/status.h"

namespace ringsync {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kMismatch: return "mismatch";
    case StatusCode::kPeerLost: return "peer lost";
    case StatusCode::kTimeout: return "timeout";
    case StatusCode::kProtocolError: return "protocol error";
    case StatusCode::kOutOfMemory: return "out of memory";
    case StatusCode::kClosed: return "closed";
    case StatusCode::kInternal: return "internal error";
  }
  return "unknown status";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

}  // namespace ringsync
