#include "service/formation/control_stream.h"

#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "common/units.h"

namespace ringsync::service::formation {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;
using asio::use_awaitable;

ControlStream::ControlStream(Socket socket) : stream_(std::move(socket)) {}

ControlStream::ControlStream(std::shared_ptr<TlsSocket> tls) : stream_(std::move(tls)) {}

ControlStream::Socket& ControlStream::socket() {
  if (auto* tls = std::get_if<std::shared_ptr<TlsSocket>>(&stream_)) return (*tls)->next_layer();
  return std::get<Socket>(stream_);
}

asio::awaitable<Result<ControlStream>> ControlStream::secure(Socket socket, ControlTls& tls, Role role,
                                                             std::chrono::nanoseconds timeout,
                                                             std::function<void()>* abort) {
  const bool accepted = role == Role::kAccepted;
  auto stream = std::make_shared<TlsSocket>(std::move(socket), accepted ? tls.server() : tls.client());
  // A silent peer (or one that speaks plain text and waits for an answer)
  // holds nothing past the deadline. The timer's handler may run after this
  // coroutine ended: it shares what it touches.
  struct Race {
    bool handshaken = false;
    bool timed_out = false;
  };
  auto race = std::make_shared<Race>();
  asio::steady_timer deadline(stream->get_executor());
  deadline.expires_after(timeout);
  deadline.async_wait([weak = std::weak_ptr<TlsSocket>(stream), race](boost::system::error_code ec) {
    if (ec || race->handshaken) return;
    race->timed_out = true;
    boost::system::error_code ignored;
    if (auto s = weak.lock()) s->next_layer().close(ignored);
  });
  if (abort)
    *abort = [weak = std::weak_ptr<TlsSocket>(stream)] {
      boost::system::error_code ignored;
      if (auto s = weak.lock()) s->next_layer().close(ignored);
    };
  boost::system::error_code ec;
  co_await stream->async_handshake(accepted ? ssl::stream_base::server : ssl::stream_base::client,
                                   asio::redirect_error(use_awaitable, ec));
  deadline.cancel();
  if (abort) *abort = nullptr;
  if (!ec && !race->timed_out) {
    race->handshaken = true;
    co_return ControlStream(std::move(stream));
  }
  boost::system::error_code ignored;
  stream->next_layer().close(ignored);
  if (race->timed_out)
    co_return Status::Timeout("it did not finish the TLS handshake within " + units::format_seconds(timeout));
  std::string why = "the TLS handshake failed: " + ec.message();
  const long verify = SSL_get_verify_result(stream->native_handle());
  if (verify != X509_V_OK)
    why += " (its certificate: " + std::string(X509_verify_cert_error_string(verify)) +
           "; is it signed by the CA of --tls-ca?)";
  else if (ec.category() == asio::error::get_ssl_category() || ec == ssl::error::stream_truncated)
    why += accepted ? " (does it run without --tls-cert/--tls-key/--tls-ca, or with another CA?)"
                    : " (does it run without TLS, or refuse this node's certificate?)";
  co_return Status::InvalidArgument(why);
}

asio::awaitable<boost::system::error_code> ControlStream::read(asio::mutable_buffer buffer) {
  boost::system::error_code ec;
  if (auto* tls = std::get_if<std::shared_ptr<TlsSocket>>(&stream_))
    co_await asio::async_read(**tls, buffer, asio::redirect_error(use_awaitable, ec));
  else
    co_await asio::async_read(std::get<Socket>(stream_), buffer, asio::redirect_error(use_awaitable, ec));
  co_return ec;
}

asio::awaitable<boost::system::error_code> ControlStream::write(asio::const_buffer buffer) {
  boost::system::error_code ec;
  if (auto* tls = std::get_if<std::shared_ptr<TlsSocket>>(&stream_))
    co_await asio::async_write(**tls, buffer, asio::redirect_error(use_awaitable, ec));
  else
    co_await asio::async_write(std::get<Socket>(stream_), buffer, asio::redirect_error(use_awaitable, ec));
  co_return ec;
}

void ControlStream::close() {
  boost::system::error_code ec;
  socket().shutdown(Socket::shutdown_both, ec);
  socket().close(ec);
}

}  // namespace ringsync::service::formation
