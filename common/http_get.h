// A minimal blocking HTTP/1.1 GET over IPv4 with timeouts, for the CLI and
// tests that read a daemon's /metrics. Not a general HTTP client.
#pragma once

#include <string>

#include "common/status.h"

namespace ringsync {

struct HttpResponse {
  int status = 0;       // 200, 404, ...
  std::string headers;  // status line and headers, CRLF-separated
  std::string body;
};

// host_port is "A.B.C.D:PORT". Fails on connect errors, timeouts (5 s), or a
// response that is not HTTP.
Result<HttpResponse> http_get(const std::string& host_port, const std::string& path);

}  // namespace ringsync
