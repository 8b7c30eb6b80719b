// The daemon's control port, one for every job it serves: accepts TCP
// connections from other daemons, reads each one's first frame (a PeerHello)
// and hands the link to the job the hello names. A hello for a job that has
// no route here yet (its trainers have not connected to this daemon) waits
// for one up to `park_timeout`, then is refused with a message naming the job
// and this address, so the other daemon's join fails clearly instead of
// hanging. With TLS (Options::tls) every connection first passes a TLS
// handshake in which the peer shows a certificate the CA signed; one that
// fails is closed before any ringsync frame is read, logged (once a minute a
// source) and counted (Options::on_tls_refusal). Control thread only.
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/peer_wire.h"
#include "common/repeat_limiter.h"
#include "common/status.h"
#include "service/formation/peer_link.h"

namespace ringsync::service::formation {

class ControlListener {
 public:
  using OnHello = std::function<void(const std::shared_ptr<PeerLink>&, const peer_wire::PeerHello&)>;

  struct Options {
    // A connection that sends no hello in this time is closed.
    std::chrono::nanoseconds handshake_timeout = std::chrono::seconds(10);
    // How long a hello for a job without a route waits for one.
    std::chrono::nanoseconds park_timeout = std::chrono::seconds(60);
    // Mutual TLS for every connection (control_tls.h); null: plain text.
    std::shared_ptr<ControlTls> tls;
    // Runs for every connection refused at the TLS handshake; may be empty.
    std::function<void()> on_tls_refusal;
  };
  // Hellos waiting for a route at once; more are refused at once.
  static constexpr std::size_t kMaxParked = 256;

  // Binds and listens on `address` (HOST:PORT; the flag named in errors is
  // --control-address).
  static Result<std::unique_ptr<ControlListener>> open(boost::asio::io_context& io, const std::string& address,
                                                       Options options);
  ~ControlListener();
  ControlListener(const ControlListener&) = delete;
  ControlListener& operator=(const ControlListener&) = delete;

  // Hellos naming `job_id` go to `on_hello` from now on (also those
  // waiting). Returns the route's id: unroute() removes only that route, so
  // an ending ring never removes the route of the job's next ring.
  std::uint64_t route(const std::string& job_id, OnHello on_hello);
  void unroute(const std::string& job_id, std::uint64_t id);
  // Stops accepting; links already handed over are not touched.
  void close();

  // Where it listens: the bound port, with the host it was given ("0.0.0.0:29517").
  const std::string& address() const { return address_; }
  std::uint16_t port() const { return port_; }

 private:
  ControlListener(boost::asio::io_context& io, Options options);
  boost::asio::awaitable<void> accept_loop(std::weak_ptr<int> alive);
  // The TLS handshake of one accepted connection, then greet().
  boost::asio::awaitable<void> secure(boost::asio::ip::tcp::socket socket, std::string peer,
                                      std::weak_ptr<int> alive);
  // Waits (up to the handshake timeout) for the link's hello and routes it.
  void greet(ControlStream stream, const std::string& peer, const std::weak_ptr<int>& alive);
  void on_first(const std::shared_ptr<PeerLink>& link, peer_wire::PeerHello hello);
  void park(const std::shared_ptr<PeerLink>& link, peer_wire::PeerHello hello);

  struct Parked {
    std::weak_ptr<PeerLink> link;
    peer_wire::PeerHello hello;
  };

  boost::asio::io_context& io_;
  Options options_;
  boost::asio::ip::tcp::acceptor acceptor_;
  std::string address_;
  RepeatLimiter junk_log_;  // connections that open with something other than a hello
  RepeatLimiter tls_log_;   // connections refused at the TLS handshake
  std::uint16_t port_ = 0;
  bool closed_ = false;
  struct Route {
    std::uint64_t id = 0;
    OnHello on_hello;
  };
  std::map<std::string, Route> routes_;
  std::uint64_t next_route_ = 1;
  std::map<std::string, std::vector<Parked>> parked_;
  std::size_t parked_count_ = 0;
  // Posted work and timers check it: the listener may be gone when they run.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace ringsync::service::formation
