// Errors as values: a Status (code + message) and Result<T> = value or Status.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace ringsync {

// Mirrors rs_status_t in the public C header and StatusCode in client.fbs.
enum class StatusCode : std::uint8_t {
  kOk = 0,
  kInvalidArgument,
  kMismatch,
  kPeerLost,
  kTimeout,
  kProtocolError,
  kOutOfMemory,
  kClosed,
  kInternal,
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status Mismatch(std::string m) { return {StatusCode::kMismatch, std::move(m)}; }
  static Status PeerLost(std::string m) { return {StatusCode::kPeerLost, std::move(m)}; }
  static Status Timeout(std::string m) { return {StatusCode::kTimeout, std::move(m)}; }
  static Status ProtocolError(std::string m) { return {StatusCode::kProtocolError, std::move(m)}; }
  static Status OutOfMemory(std::string m) { return {StatusCode::kOutOfMemory, std::move(m)}; }
  static Status Closed(std::string m) { return {StatusCode::kClosed, std::move(m)}; }
  static Status Internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "mismatch: tensor 'w' ..." — code name then message, for logs.
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(Status status) : v_(std::move(status)) {}

  bool ok() const { return std::holds_alternative<T>(v_); }
  const Status& status() const {
    static const Status kOk;
    return ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() { return value(); }
  const T& operator*() const { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace ringsync

// The one helper: return the Status of an expression if it is not ok.
#define RINGSYNC_RETURN_IF_ERROR(expr)            \
  do {                                            \
    ::ringsync::Status rs_status_ = (expr);       \
    if (!rs_status_.ok()) return rs_status_;      \
  } while (0)
