#include "service/session.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "common/fd_passing.h"
#include "common/log.h"
#include "service/daemon.h"

namespace ringsync::service {

namespace asio = boost::asio;
using asio::use_awaitable;

ClientSession::ClientSession(Daemon& daemon, Socket socket, std::uint64_t id)
    : daemon_(daemon),
      socket_(std::move(socket)),
      id_(id),
      wake_writer_(socket_.get_executor()),
      handshake_deadline_(socket_.get_executor()) {}

void ClientSession::start() {
  boost::system::error_code ec;
  socket_.non_blocking(true, ec);
  wake_writer_.expires_at(asio::steady_timer::time_point::max());
  handshake_deadline_.expires_after(daemon_.config().client_handshake_timeout);
  auto self = shared_from_this();
  handshake_deadline_.async_wait([self](boost::system::error_code wait_ec) {
    if (wait_ec || self->membership || self->closed_) return;
    RS_LOG(warn, "session") << "client " << self->id_
                                 << " sent no hello in time; closing the connection";
    self->daemon_.metrics().error("handshake_timeout");
    self->close();
  });
  asio::co_spawn(socket_.get_executor(), read_loop(self), asio::detached);
  asio::co_spawn(socket_.get_executor(), write_loop(self), asio::detached);
}

void ClientSession::send(const wire::Message& message, std::shared_ptr<shm::Region> fd_of) {
  if (closed_ || flush_then_close_) return;
  if (queue_.size() >= kMaxQueuedFrames) {
    // A client this far behind is not reading its socket: drop it rather than
    // hold an unbounded backlog for it.
    RS_LOG(warn, "session") << "client " << id_ << " has " << queue_.size()
                            << " unread replies; closing the connection";
    daemon_.metrics().error("slow_client");
    close();
    return;
  }
  queue_.push_back(Outgoing{wire::encode(message), std::move(fd_of)});
  wake_writer_.cancel();
}

void ClientSession::close_after_flush() {
  flush_then_close_ = true;
  wake_writer_.cancel();
}

void ClientSession::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ec;
  socket_.shutdown(Socket::shutdown_both, ec);
  socket_.close(ec);
  wake_writer_.cancel();
  handshake_deadline_.cancel();
}

void ClientSession::protocol_error(const Status& status) {
  RS_LOG(warn, "session") << "client " << id_ << ": " << status.to_string()
                               << "; closing the connection";
  daemon_.metrics().error("protocol");
  // Request id 0 marks an error about the connection itself.
  send(wire::Completion{0, status});
  close_after_flush();
}

asio::awaitable<void> ClientSession::read_loop(std::shared_ptr<ClientSession> self) {
  std::vector<std::uint8_t> body;
  for (;;) {
    boost::system::error_code ec;
    std::array<std::uint8_t, wire::kFrameHeaderBytes> header;
    co_await asio::async_read(socket_, asio::buffer(header), asio::redirect_error(use_awaitable, ec));
    if (ec || closed_) break;
    auto length = wire::frame_length(header, daemon_.config().max_frame_bytes);
    if (!length.ok()) {
      protocol_error(length.status());
      break;
    }
    body.resize(*length);
    co_await asio::async_read(socket_, asio::buffer(body), asio::redirect_error(use_awaitable, ec));
    if (ec || closed_) {
      if (ec == asio::error::eof) {
        RS_LOG(debug, "session") << "client " << id_ << " closed mid-frame";
      }
      break;
    }
    auto message = wire::decode(body);
    if (!message.ok()) {
      protocol_error(message.status());
      break;
    }
    Status handled = daemon_.on_message(self, std::move(message).value());
    if (!handled.ok()) {
      protocol_error(handled);
      break;
    }
    if (flush_then_close_) break;
  }
  daemon_.on_disconnect(self);
}

asio::awaitable<bool> ClientSession::write_one(Outgoing& frame) {
  boost::system::error_code ec;
  std::size_t sent = 0;
  if (frame.fd_of) {
    for (;;) {
      const ssize_t n = send_with_fd(socket_.native_handle(), frame.bytes.data(),
                                     frame.bytes.size(), frame.fd_of->fd());
      if (n >= 0) {
        sent = static_cast<std::size_t>(n);
        // The trainer has its own descriptor now; the daemon keeps only the
        // mapping, so descriptors do not pile up with buffers.
        frame.fd_of->close_fd();
        break;
      }
      if (n != -EAGAIN && n != -EWOULDBLOCK) co_return false;
      co_await socket_.async_wait(Socket::wait_write, asio::redirect_error(use_awaitable, ec));
      if (ec) co_return false;
    }
  }
  if (sent < frame.bytes.size())
    co_await asio::async_write(socket_, asio::buffer(frame.bytes.data() + sent,
                                                     frame.bytes.size() - sent),
                               asio::redirect_error(use_awaitable, ec));
  co_return !ec;
}

asio::awaitable<void> ClientSession::write_loop(std::shared_ptr<ClientSession> /*keepalive*/) {
  while (!closed_) {
    if (queue_.empty()) {
      if (flush_then_close_) break;
      boost::system::error_code ec;
      wake_writer_.expires_at(asio::steady_timer::time_point::max());
      co_await wake_writer_.async_wait(asio::redirect_error(use_awaitable, ec));
      continue;
    }
    Outgoing frame = std::move(queue_.front());
    queue_.pop_front();
    if (!co_await write_one(frame)) break;
  }
  close();
}

}  // namespace ringsync::service
