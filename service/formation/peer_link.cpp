#include "service/formation/peer_link.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <mutex>

#include "common/log.h"
#include "common/repeat_limiter.h"
#include "service/transport/framed_read.h"

namespace ringsync::service::formation {

namespace asio = boost::asio;
using asio::use_awaitable;

namespace {
// Control frames are small; a plan of many fused tensors is the largest.
constexpr std::size_t kMaxPeerFrameBytes = wire::kMaxFrameBytes;

// A port scanner or a stray client sends junk on every connection it opens:
// one line per source a minute (every link of the process shares the count).
void warn_bad_frame(const std::string& peer, const std::string& why) {
  static std::mutex mu;
  static RepeatLimiter limiter;
  RepeatLimiter::Verdict verdict;
  {
    std::lock_guard lock(mu);
    verdict = limiter.admit(peer);
  }
  if (verdict.log) RS_LOG(warn, "ring") << "from " << peer << ": " << why << RepeatLimiter::left_out_text(verdict, peer);
}

}  // namespace

PeerLink::PeerLink(ControlStream stream, std::string peer_name)
    : stream_(std::move(stream)),
      peer_name_(std::move(peer_name)),
      queue_(stream_.get_executor()),
      heartbeat_timer_(stream_.get_executor()),
      leave_deadline_(stream_.get_executor()),
      last_heard_(std::chrono::steady_clock::now()) {}

std::string PeerLink::local_address() const { return local_address_; }

void PeerLink::start(OnMessage on_message, OnClosed on_closed) {
  set_handlers(std::move(on_message), std::move(on_closed));
  boost::system::error_code ec;
  stream_.socket().set_option(asio::ip::tcp::no_delay(true), ec);
  local_address_ = stream_.socket().local_endpoint(ec).address().to_string();
  asio::co_spawn(stream_.get_executor(), read_loop(shared_from_this()), asio::detached);
  asio::co_spawn(stream_.get_executor(), write_loop(shared_from_this()), asio::detached);
}

void PeerLink::set_handlers(OnMessage on_message, OnClosed on_closed) {
  on_message_ = std::move(on_message);
  on_closed_ = std::move(on_closed);
}

void PeerLink::start_heartbeats(std::chrono::nanoseconds interval,
                                std::chrono::nanoseconds timeout) {
  last_heard_ = std::chrono::steady_clock::now();
  asio::co_spawn(stream_.get_executor(), heartbeat_loop(shared_from_this(), interval, timeout),
                 asio::detached);
}

void PeerLink::send(const peer_wire::Message& message) {
  if (closed_) return;
  queue_.push(peer_wire::encode(message));
}

void PeerLink::close(const Status& why) {
  if (closed_) return;
  closed_ = true;
  stream_.close();
  queue_.wake();
  heartbeat_timer_.cancel();
  leave_deadline_.cancel();
  on_message_ = nullptr;  // handlers may hold whoever holds this link: break the cycle
  if (auto handler = std::move(on_closed_)) handler(why);
}

void PeerLink::goodbye(const Status& why, bool finished, std::int32_t lost_node) {
  if (closed_ || leaving_) return;
  send(peer_wire::Goodbye{0, why.message(), finished, lost_node, why.code() == StatusCode::kTimeout});
  leaving_ = why;
  heartbeat_timer_.cancel();
  on_message_ = nullptr;
  leave_deadline_.expires_after(std::chrono::seconds(1));
  leave_deadline_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec) self->close(*self->leaving_);
  });
  if (auto handler = std::move(on_closed_)) handler(why);
}

asio::awaitable<void> PeerLink::read_loop(std::shared_ptr<PeerLink> /*keepalive*/) {
  std::vector<std::uint8_t> body;
  auto read_exactly = [this](asio::mutable_buffer buffer) { return stream_.read(buffer); };
  while (!closed_) {
    const transport::FrameRead read = co_await transport::read_frame(read_exactly, body, kMaxPeerFrameBytes);
    if (read.ec) {
      close(Status::PeerLost("its connection closed (" + read.ec.message() +
                             "): its daemon died or went away without a goodbye"));
      break;
    }
    if (!read.bad_length.ok()) {
      warn_bad_frame(peer_name_, read.bad_length.message());
      close(Status::ProtocolError("bad frame from " + peer_name_ + ": " + read.bad_length.message()));
      break;
    }
    bytes_received_ += wire::kFrameHeaderBytes + body.size();
    auto message = peer_wire::decode(body);
    if (!message.ok()) {
      warn_bad_frame(peer_name_, message.status().message());
      close(Status::ProtocolError("bad frame from " + peer_name_ + ": " +
                                  message.status().message()));
      break;
    }
    last_heard_ = std::chrono::steady_clock::now();
    if (std::holds_alternative<peer_wire::Heartbeat>(*message)) continue;
    if (on_message_) on_message_(std::move(message).value());
  }
}

asio::awaitable<void> PeerLink::write_loop(std::shared_ptr<PeerLink> /*keepalive*/) {
  while (!closed_) {
    if (queue_.empty()) {
      if (leaving_) {
        leave_deadline_.cancel();
        close(*leaving_);
        break;
      }
      co_await queue_.wait();
      continue;
    }
    std::vector<std::uint8_t> frame = std::move(queue_.front());
    queue_.pop();
    const boost::system::error_code ec = co_await stream_.write(asio::buffer(frame));
    if (ec) {
      close(Status::PeerLost("sending to it failed (" + ec.message() + ")"));
      break;
    }
    bytes_sent_ += frame.size();
  }
}

asio::awaitable<void> PeerLink::heartbeat_loop(std::shared_ptr<PeerLink> /*keepalive*/,
                                               std::chrono::nanoseconds interval,
                                               std::chrono::nanoseconds timeout) {
  while (!closed_) {
    send(peer_wire::Heartbeat{0, ++heartbeats_sent_});
    boost::system::error_code ec;
    const auto slept_from = std::chrono::steady_clock::now();
    heartbeat_timer_.expires_after(interval);
    co_await heartbeat_timer_.async_wait(asio::redirect_error(use_awaitable, ec));
    if (closed_ || leaving_) break;
    const auto now = std::chrono::steady_clock::now();
    const auto silent = now - last_heard_;
    if (silent > timeout) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(silent).count();
      // Woken a timeout late: this process did not run meanwhile, so the
      // silence is its own (the peer's frames wait unread in the socket).
      const Status why = Status::PeerLost("it sent nothing for " + std::to_string(ms) +
                                          " ms (heartbeat timeout: its daemon is stopped or hung, or the network "
                                          "to it is cut)");
      if (now - slept_from > interval + timeout / 2) {
        own_stall_ = std::chrono::duration_cast<std::chrono::milliseconds>(now - slept_from - interval);
        close(why);
      } else {
        // Said on the way out: a peer that was only stopped reads it when it
        // runs again, and knows it was the one gone quiet.
        goodbye(why, false, peer_wire::kLostNodeYou);
      }
      break;
    }
  }
}

}  // namespace ringsync::service::formation
