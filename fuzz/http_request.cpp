// The metrics endpoint's requests (service/observe/http_answer.h): bytes as a client
// would send them on one connection, read with Beast's parser under the
// daemon's limits and answered as the server answers, request after request
// while the connection stays open. Every answer is a well-formed response:
// a status Prometheus or a probe can read, a Content-Length equal to the body
// (or to the GET body for HEAD), and a closed connection after a refusal.
#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>

#include <boost/asio/buffer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "canary.h"
#include "common/status.h"
#include "service/observe/http_answer.h"

namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using namespace ringsync;

// A connection's incoming bytes, all known up front, in reads of at most
// `step` bytes (so the parser sees requests split as a network splits them).
class Bytes {
 public:
  Bytes(const std::uint8_t* data, std::size_t size, std::size_t step) : data_(data), left_(size), step_(step) {}

  template <class Buffers>
  std::size_t read_some(const Buffers& buffers, boost::system::error_code& ec) {
    ec = {};
    if (left_ == 0) {
      ec = asio::error::eof;
      return 0;
    }
    const std::size_t n = asio::buffer_copy(buffers, asio::buffer(data_, std::min(left_, step_)));
    data_ += n;
    left_ -= n;
    return n;
  }
  template <class Buffers>
  std::size_t read_some(const Buffers& buffers) {
    boost::system::error_code ec;
    const std::size_t n = read_some(buffers, ec);
    if (ec) throw boost::system::system_error(ec);
    return n;
  }

 private:
  const std::uint8_t* data_;
  std::size_t left_;
  std::size_t step_;
};

service::observe::MetricsServerOptions options() {
  service::observe::MetricsServerOptions o;
  o.header_limit = 1024;  // small, so that the fuzzer reaches the limits
  o.body_limit = 512;
  o.not_ready = [] { return std::string("forming the ring"); };
  o.post = [](std::string_view path, const std::string& body) -> Result<std::string> {
    if (body.empty()) return Status::InvalidArgument("empty body for " + std::string(path));
    return std::string("{}");
  };
  return o;
}

void check(const service::observe::http_answer::Response& res, bool head) {
  const unsigned status = res.result_int();
  fuzz::require(status >= 200 && status < 600);
  const auto length = res[http::field::content_length];
  fuzz::require(!length.empty());
  if (!head) fuzz::require(std::to_string(res.body().size()) == std::string(length.data(), length.size()));
  std::ostringstream wire;
  wire << res;  // serializes without throwing
  fuzz::require(wire.str().rfind("HTTP/1.", 0) == 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::crash_on_canary(data, size);
  static const service::observe::MetricsServerOptions kOptions = options();
  static const std::function<std::string()> kRender = [] { return std::string("ringsync_up 1\n"); };
  // The first byte picks how the bytes arrive: whole or in small pieces.
  const std::size_t step = size > 0 && (data[0] & 1) ? 7 : service::observe::http_answer::kReadAhead;
  Bytes in(data, size, step);
  boost::beast::flat_buffer buffer(service::observe::http_answer::kReadAhead);
  for (int requests = 0; requests < 64; ++requests) {
    service::observe::http_answer::Parser parser;
    service::observe::http_answer::limit_parser(parser, kOptions);
    boost::system::error_code ec;
    http::read(in, buffer, parser, ec);
    if (ec) {
      if (auto answer = service::observe::http_answer::rejection(ec)) {
        check(*answer, false);
        fuzz::require(answer->result_int() >= 400 && answer->result_int() < 500 && !answer->keep_alive());
      }
      return 0;
    }
    const auto& request = parser.get();
    const auto res = service::observe::http_answer::respond(kOptions, kRender, request);
    check(res, request.method() == http::verb::head);
    if (request.method() == http::verb::head) fuzz::require(res.body().empty());
    if (!res.keep_alive()) return 0;
  }
  return 0;
}
