// ControlTls and ControlStream over real loopback TCP in one io_context: two
// ends with certificates of one CA handshake and carry bytes both ways; a
// plain-text client, a client whose certificate another CA signed and a
// silent client are refused by the TLS server with why; ControlTls::load
// refuses bad files naming the flag.
#include <doctest/doctest.h>

#include <sys/stat.h>

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <string>

#include "service/formation/control_stream.h"
#include "service/formation/control_tls.h"
#include "tls_certificates.h"

namespace test_service_formation_control_stream {

using namespace ringsync;
using namespace ringsync::service::formation;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;

namespace {

std::shared_ptr<ControlTls> load(const test::TlsCertificates& certs, const std::string& name, const std::string& ca) {
  auto tls = ControlTls::load({certs.file(name + ".pem"), certs.file(name + ".key"), certs.file(ca)});
  REQUIRE_MESSAGE(tls.ok(), tls.status().message());
  return *tls;
}

// One accepted and one connected socket on loopback.
struct SocketPair {
  explicit SocketPair(asio::io_context& io) : accepted(io), connected(io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    connected.connect(acceptor.local_endpoint());
    acceptor.accept(accepted);
  }
  tcp::socket accepted;
  tcp::socket connected;
};

// How one end's TLS handshake ended. Only the status: a stream holds timers
// of the io_context it ran on, so it must not outlive handshake().
struct Outcome {
  Status why;
  bool ok() const { return why.ok(); }
  const Status& status() const { return why; }
};

// The server's outcome of a TLS handshake against `client` (a coroutine
// given the connected socket), both run to their end.
struct Handshakes {
  std::optional<Outcome> server;
  std::optional<Outcome> client;
};

Outcome outcome_of(const Result<ControlStream>& r) { return Outcome{r.ok() ? Status::Ok() : r.status()}; }

Handshakes handshake(ControlTls& server_tls, std::shared_ptr<ControlTls> client_tls, std::chrono::nanoseconds timeout,
                     const std::string& plain_bytes = "") {
  asio::io_context io;
  SocketPair pair(io);
  Handshakes out;
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        auto server = co_await ControlStream::secure(std::move(pair.accepted), server_tls,
                                                     ControlStream::Role::kAccepted, timeout);
        out.server = outcome_of(server);
      },
      asio::detached);
  if (client_tls) {
    asio::co_spawn(
        io,
        [&]() -> asio::awaitable<void> {
          auto client = co_await ControlStream::secure(std::move(pair.connected), *client_tls,
                                                       ControlStream::Role::kConnected, timeout);
          out.client = outcome_of(client);
        },
        asio::detached);
  } else if (!plain_bytes.empty()) {
    asio::write(pair.connected, asio::buffer(plain_bytes));
  }
  io.run_for(timeout + 5s);
  return out;
}

}  // namespace

TEST_CASE("control stream: two ends whose certificates one CA signed handshake and carry bytes both ways") {
  const test::TlsCertificates certs;
  auto tls = load(certs, "node", "ca.pem");
  asio::io_context io;
  SocketPair pair(io);
  std::optional<Result<ControlStream>> server, client;
  const std::string hello = "hello", pong = "pong";
  std::string heard_by_server(5, '\0'), heard_by_client(4, '\0');
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        server = co_await ControlStream::secure(std::move(pair.accepted), *tls, ControlStream::Role::kAccepted, 5s);
        if (!server->ok()) co_return;
        const auto read_ec = co_await (*server)->read(asio::buffer(heard_by_server));
        CHECK_MESSAGE(!read_ec, read_ec.message());
        const auto write_ec = co_await (*server)->write(asio::buffer(pong));
        CHECK_MESSAGE(!write_ec, write_ec.message());
      },
      asio::detached);
  asio::co_spawn(
      io,
      [&]() -> asio::awaitable<void> {
        client = co_await ControlStream::secure(std::move(pair.connected), *tls, ControlStream::Role::kConnected, 5s);
        if (!client->ok()) co_return;
        const auto write_ec = co_await (*client)->write(asio::buffer(hello));
        CHECK_MESSAGE(!write_ec, write_ec.message());
        const auto read_ec = co_await (*client)->read(asio::buffer(heard_by_client));
        CHECK_MESSAGE(!read_ec, read_ec.message());
      },
      asio::detached);
  io.run_for(10s);
  REQUIRE(server.has_value());
  REQUIRE(client.has_value());
  REQUIRE_MESSAGE(server->ok(), server->status().message());
  REQUIRE_MESSAGE(client->ok(), client->status().message());
  CHECK((*server)->encrypted());
  CHECK(heard_by_server == "hello");
  CHECK(heard_by_client == "pong");
}

TEST_CASE("control stream: the TLS server refuses a plain-text hello, a rogue CA's certificate and silence") {
  const test::TlsCertificates certs;
  auto tls = load(certs, "node", "ca.pem");

  SUBCASE("plain text") {
    auto out = handshake(*tls, nullptr, 5s, std::string{'\x40', '\0', '\0', '\0'} + "a ringsync hello in plain text");
    REQUIRE(out.server.has_value());
    REQUIRE_FALSE(out.server->ok());
    CHECK_MESSAGE(out.server->status().message().find("the TLS handshake failed") != std::string::npos,
                  out.server->status().message());
  }
  SUBCASE("a certificate another CA signed (the client trusts both)") {
    auto out = handshake(*tls, load(certs, "rogue", "both-cas.pem"), 5s);
    REQUIRE(out.server.has_value());
    REQUIRE_FALSE(out.server->ok());
    CHECK_MESSAGE(out.server->status().message().find("certificate verify failed") != std::string::npos,
                  out.server->status().message());
  }
  SUBCASE("a client that says nothing: refused at the deadline") {
    auto out = handshake(*tls, nullptr, 300ms);
    REQUIRE(out.server.has_value());
    REQUIRE_FALSE(out.server->ok());
    CHECK(out.server->status().code() == StatusCode::kTimeout);
    CHECK_MESSAGE(out.server->status().message().find("did not finish the TLS handshake within") != std::string::npos,
                  out.server->status().message());
  }
}

TEST_CASE("control tls: bad files are refused, each naming its flag") {
  const test::TlsCertificates certs;
  const auto error = [&](const std::string& cert, const std::string& key, const std::string& ca) {
    auto tls = ControlTls::load({cert.empty() ? "" : certs.file(cert), key.empty() ? "" : certs.file(key),
                                 ca.empty() ? "" : certs.file(ca)});
    return tls.ok() ? std::string("loaded") : tls.status().message();
  };
  CHECK(error("node.pem", "", "") ==
        "TLS for the control plane needs --tls-cert, --tls-key and --tls-ca together; --tls-key, --tls-ca missing");
  CHECK(error("node.pem", "node.key", "none.pem").find("(--tls-ca): No such file") != std::string::npos);
  CHECK(error("node.pem", "rogue.key", "ca.pem").find("is not the key of the certificate") != std::string::npos);
  CHECK(error("rogue.pem", "rogue.key", "ca.pem").find("does not verify against") != std::string::npos);
  ::chmod(certs.file("node.key").c_str(), 0640);
  CHECK(error("node.pem", "node.key", "ca.pem").find("has mode 0640") != std::string::npos);
  ::chmod(certs.file("node.key").c_str(), 0600);
  CHECK(error("node.pem", "node.key", "ca.pem") == "loaded");
}

}  // namespace test_service_formation_control_stream
