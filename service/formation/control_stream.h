// The byte stream under one control connection: a plain TCP socket, or TLS
// over it when the daemon runs with --tls-* (control_tls.h). PeerLink reads
// and writes frames through it without knowing which. secure() runs the TLS
// handshake on a connected socket, bounded by a deadline, before any
// ringsync frame: a peer that stays silent, speaks plain text or shows a
// certificate the CA did not sign is refused there.
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <variant>

#include "common/status.h"
#include "service/formation/control_tls.h"

namespace ringsync::service::formation {

class ControlStream {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using TlsSocket = boost::asio::ssl::stream<Socket>;
  enum class Role { kAccepted, kConnected };  // TLS server (node 0) or client (a worker)

  // Plain text.
  explicit ControlStream(Socket socket);

  // TLS over `socket` once its handshake is done: the other end proved it
  // holds a certificate `tls`'s CA signed. Fails (and closes the socket) on
  // any handshake error or at `timeout`, with why. While it runs, `*abort`
  // (when given) ends it at once: the owner's stop.
  static boost::asio::awaitable<Result<ControlStream>> secure(Socket socket, ControlTls& tls, Role role,
                                                              std::chrono::nanoseconds timeout,
                                                              std::function<void()>* abort = nullptr);

  // Exactly the buffer's bytes; an error code on failure or close.
  boost::asio::awaitable<boost::system::error_code> read(boost::asio::mutable_buffer buffer);
  boost::asio::awaitable<boost::system::error_code> write(boost::asio::const_buffer buffer);
  // Closes the connection at once (no TLS close_notify: the peer learns of it
  // from the closed socket, as with plain text).
  void close();

  Socket& socket();
  Socket::executor_type get_executor() { return socket().get_executor(); }
  bool encrypted() const { return std::holds_alternative<std::shared_ptr<TlsSocket>>(stream_); }

 private:
  explicit ControlStream(std::shared_ptr<TlsSocket> tls);
  std::variant<Socket, std::shared_ptr<TlsSocket>> stream_;
};

}  // namespace ringsync::service::formation
