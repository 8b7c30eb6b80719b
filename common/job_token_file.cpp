#include "common/job_token_file.h"

#include "common/private_file.h"

namespace ringsync {

namespace {
constexpr std::size_t kMaxTokenBytes = 4096;
}  // namespace

Result<std::string> read_job_token_file(const std::string& path) {
  const std::string what = "job token file '" + path + "'";
  auto token = read_private_file(path, what, kMaxTokenBytes, "is over 4 KiB; a token is one line");
  if (!token.ok()) return token.status();
  std::string text = std::move(token).value();
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  if (text.empty()) return Status::InvalidArgument(what + " is empty");
  return text;
}

}  // namespace ringsync
