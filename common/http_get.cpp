#include "common/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace ringsync {

namespace {

// The body of a chunked response (RFC 9112 7.1): size lines in hex, each chunk
// followed by CRLF, a zero-size chunk at the end (trailers ignored).
Result<std::string> dechunk(const std::string& raw) {
  std::string body;
  std::size_t at = 0;
  for (;;) {
    const auto line_end = raw.find("\r\n", at);
    if (line_end == std::string::npos) return Status::ProtocolError("a chunk size line without its end");
    char* end = nullptr;
    const std::string size_text = raw.substr(at, line_end - at);
    const unsigned long long size = std::strtoull(size_text.c_str(), &end, 16);
    if (end == size_text.c_str()) return Status::ProtocolError("a chunk size that is not hex: '" + size_text + "'");
    if (size == 0) return body;
    at = line_end + 2;
    if (size > raw.size() - at) return Status::ProtocolError("the response ended inside a chunk");
    body.append(raw, at, size);
    at += size + 2;
  }
}

}  // namespace

Result<HttpResponse> http_get(const std::string& host_port, const std::string& path) {
  const auto colon = host_port.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (colon == std::string::npos ||
      ::inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &addr.sin_addr) != 1)
    return Status::InvalidArgument("not an IPv4 HOST:PORT: '" + host_port + "'");
  addr.sin_port = htons(static_cast<std::uint16_t>(std::atoi(host_port.c_str() + colon + 1)));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::Internal(std::string("socket: ") + std::strerror(errno));
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return Status::Closed("cannot connect to " + host_port + ": " + why);
  }
  const std::string request =
      "GET " + path + " HTTP/1.1\r\nHost: " + host_port + "\r\nConnection: close\r\n\r\n";
  std::string response;
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) ==
      static_cast<ssize_t>(request.size())) {
    char buf[16384];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;)
      response.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  const auto split = response.find("\r\n\r\n");
  if (response.rfind("HTTP/1.", 0) != 0 || split == std::string::npos || response.size() < 12)
    return Status::ProtocolError("no HTTP response from " + host_port + path);
  HttpResponse out;
  out.status = std::atoi(response.c_str() + 9);
  out.headers = response.substr(0, split);
  out.body = response.substr(split + 4);
  std::string lower_headers = out.headers;
  for (char& c : lower_headers) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower_headers.find("\r\ntransfer-encoding: chunked") != std::string::npos) {
    auto body = dechunk(out.body);
    if (!body.ok())
      return Status::ProtocolError("a bad chunked response from " + host_port + path + ": " + body.status().message());
    out.body = std::move(body).value();
  }
  return out;
}

}  // namespace ringsync
