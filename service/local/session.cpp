#include "service/local/session.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <sys/socket.h>

#include "common/fd_passing.h"
#include "common/log.h"
#include "service/transport/framed_read.h"

namespace ringsync::service::local {

namespace asio = boost::asio;
using asio::use_awaitable;

ClientSession::ClientSession(SessionHost& host, SessionLimits limits, Socket socket, std::uint64_t id)
    : host_(host),
      limits_(limits),
      socket_(std::move(socket)),
      id_(id),
      queue_(socket_.get_executor()),
      handshake_deadline_(socket_.get_executor()),
      flush_deadline_(socket_.get_executor()),
      hello_wait_(socket_.get_executor()) {
  credentials_ = peer_credentials(socket_.native_handle());
  peer_pid_ = credentials_.pid;
  liveness.heard = std::chrono::steady_clock::now();
}

void ClientSession::start() {
  boost::system::error_code ec;
  socket_.non_blocking(true, ec);
  handshake_deadline_.expires_after(limits_.handshake_timeout);
  auto self = shared_from_this();
  handshake_deadline_.async_wait([self](boost::system::error_code wait_ec) {
    if (wait_ec || self->membership || self->closed_) return;
    RS_LOG(warn, "session") << "client " << self->id_
                                 << " sent no hello in time; closing the connection";
    self->host_.metrics().error(observe::ErrorKind::kHandshakeTimeout);
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
    host_.metrics().error(observe::ErrorKind::kSlowClient);
    close();
    return;
  }
  std::vector<std::uint8_t> bytes = wire::encode(message);
  if (channel_active_ && queue_.empty() && !fd_of && push_now(bytes)) return;
  queue_.push(Outgoing{std::move(bytes), std::move(fd_of), channel_active_});
}

Status ClientSession::open_channel() {
  auto channel = shm::Channel::create("ringsync:channel:" + std::to_string(id_));
  if (!channel.ok()) return channel.status();
  channel_.emplace(std::move(channel).value());
  return Status::Ok();
}

void ClientSession::hello_answered() {
  hello_answered_ = true;
  hello_wait_.cancel();
}

void ClientSession::send_channel_offer(wire::HelloReply reply) {
  reply.channel_bytes = shm::Channel::kBytes;
  send(reply, channel_->region());
  channel_active_ = true;
}

bool ClientSession::push_now(const std::vector<std::uint8_t>& bytes) {
  switch (channel_->to_client().push(bytes)) {
    case shm::ShmRing::Push::kDone:
      if (channel_->to_client().consumer_sleeping()) ring_doorbell_soon();
      return true;
    case shm::ShmRing::Push::kFull: return false;
    case shm::ShmRing::Push::kTooLarge:
      // No reply comes near wire::kMaxFrameBytes; a bug if reached.
      RS_LOG(error, "session") << "client " << id_ << ": a reply of " << bytes.size()
                               << " bytes does not fit the channel; closing the connection";
      close();
      return true;
    case shm::ShmRing::Push::kCorrupt: break;
  }
  channel_corrupt(Status::ProtocolError(
      "the shared-memory channel is corrupt: the trainer's read position in the reply ring makes no sense"));
  return true;  // dropped: the connection is closing
}

void ClientSession::ring_doorbell_soon() {
  // Not from inside this handler: the woken trainer may take this core at
  // once, ahead of the rest of the handler's work (the other ranks' replies,
  // the next node's message). The handlers queued now run first.
  if (doorbell_posted_) return;
  doorbell_posted_ = true;
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    self->doorbell_posted_ = false;
    if (!self->closed_) self->ring_doorbell();
  });
}

void ClientSession::ring_doorbell() {
  // One byte wakes the trainer; when the socket is full it is awake anyway.
  const char bell = 0;
  (void)::send(socket_.native_handle(), &bell, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
}

void ClientSession::channel_corrupt(const Status& why) {
  // Nothing more can be said through a channel the trainer scribbled over.
  warn_limited(why.to_string() + "; closing the connection");
  host_.metrics().error(observe::ErrorKind::kProtocol);
  close();
}

std::size_t ClientSession::drain() {
  if (!channel_active_ || closed_ || flush_then_close_) return 0;
  if (!queue_.empty()) queue_.wake();  // room may have appeared in the reply ring
  auto& ring = channel_->to_daemon();
  std::size_t handled = 0;
  auto self = shared_from_this();
  while (handled < kDrainBatch && !closed_ && !flush_then_close_) {
    auto frame = ring.peek(limits_.max_frame_bytes);
    if (!frame.ok()) {
      // A frame too large is answered as on the socket; a scribbled ring is not.
      if (ring.corrupt()) {
        channel_corrupt(frame.status());
      } else {
        protocol_error(frame.status());
      }
      break;
    }
    if (frame->empty()) break;
    // Copy before verifying: the trainer can still write to the ring.
    body_.assign(frame->begin() + wire::kFrameHeaderBytes, frame->end());
    ring.pop();
    ++handled;
    auto message = wire::decode(body_);
    if (!message.ok()) {
      protocol_error(message.status());
      break;
    }
    if (Status s = host_.on_message(self, std::move(message).value()); !s.ok()) {
      protocol_error(s);
      break;
    }
  }
  return handled;
}

bool ClientSession::set_sleeping(bool sleeping) {
  if (!channel_active_ || closed_) return false;
  auto& ring = channel_->to_daemon();
  if (flush_then_close_) {
    // A closing session drains nothing more: its frames must not keep the
    // loop awake, nor its trainer ring for them.
    ring.set_sleeping(false);
    return false;
  }
  ring.set_sleeping(sleeping);
  return sleeping && ring.readable();
}

void ClientSession::close_after_flush() {
  if (closed_ || flush_then_close_) return;
  flush_then_close_ = true;
  hello_wait_.cancel();
  queue_.wake();
  arm_flush_deadline();
}

void ClientSession::arm_flush_deadline() {
  flush_deadline_.expires_after(kFlushTimeout);
  flush_deadline_.async_wait([self = shared_from_this(), written = frames_written_](boost::system::error_code ec) {
    if (ec || self->closed_) return;
    if (self->frames_written_ != written) return self->arm_flush_deadline();
    RS_LOG(warn, "session") << "client " << self->id_ << " took none of its last replies for "
                            << kFlushTimeout.count() << " s; closing the connection";
    self->host_.metrics().error(observe::ErrorKind::kFlushTimeout);
    self->close();
  });
}

void ClientSession::close() {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ec;
  socket_.shutdown(Socket::shutdown_both, ec);
  socket_.close(ec);
  queue_.wake();
  handshake_deadline_.cancel();
  flush_deadline_.cancel();
  hello_wait_.cancel();
}

void ClientSession::warn_limited(const std::string& what) {
  // A client that reconnects and errs in a loop gets one line a minute.
  const std::string source = peer_pid_ > 0 ? "pid " + std::to_string(peer_pid_) : "an unknown process";
  const auto verdict = host_.client_warnings().admit(source);
  if (verdict.log)
    RS_LOG(warn, "session") << "client " << id_ << ": " << what << RepeatLimiter::left_out_text(verdict, source);
}

void ClientSession::protocol_error(const Status& status) {
  warn_limited(status.to_string() + "; closing the connection");
  host_.metrics().error(observe::ErrorKind::kProtocol);
  // Request id 0 marks an error about the connection itself.
  send(wire::Completion{0, status});
  close_after_flush();
  if (channel_active_) {
    // The socket path leaves its job at once (read_loop ends); a channel
    // session reads doorbells until its replies are out, so leave now: the
    // job's other ranks get peer lost instead of waiting for the timeout.
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->host_.on_disconnect(self); });
  }
}

asio::awaitable<void> ClientSession::read_loop(std::shared_ptr<ClientSession> self) {
  std::vector<std::uint8_t> body;
  auto read_exactly = [this](asio::mutable_buffer buffer) -> asio::awaitable<boost::system::error_code> {
    boost::system::error_code ec;
    co_await asio::async_read(socket_, buffer, asio::redirect_error(use_awaitable, ec));
    co_return ec;
  };
  for (;;) {
    boost::system::error_code ec;
    const transport::FrameRead read =
        co_await transport::read_frame(read_exactly, body, limits_.max_frame_bytes);
    if (closed_) break;
    if (!read.bad_length.ok()) {
      protocol_error(read.bad_length);
      break;
    }
    if (read.ec) {
      if (read.ec == asio::error::eof && read.mid_frame) {
        RS_LOG(debug, "session") << "client " << id_ << " closed mid-frame";
      }
      break;
    }
    auto message = wire::decode(body);
    if (!message.ok()) {
      protocol_error(message.status());
      break;
    }
    const bool hello = std::holds_alternative<wire::Hello>(*message);
    Status handled = host_.on_message(self, std::move(message).value());
    if (!handled.ok()) {
      protocol_error(handled);
      break;
    }
    while (hello && !hello_answered_ && !closed_ && !flush_then_close_) {
      hello_wait_.expires_at(asio::steady_timer::time_point::max());
      co_await hello_wait_.async_wait(asio::redirect_error(use_awaitable, ec));
    }
    if (flush_then_close_ || closed_) break;
    if (channel_active_) {
      co_await serve_channel();
      break;
    }
  }
  host_.on_disconnect(self);
}

asio::awaitable<void> ClientSession::serve_channel() {
  // Every byte from the trainer now is a doorbell: its ring has frames, or
  // room for the replies waiting here. Read on while closing: a writer
  // flushing into a full ring waits for the trainer's doorbells.
  std::array<std::uint8_t, 256> bells;
  while (!closed_) {
    drain();
    if (!queue_.empty()) queue_.wake();
    boost::system::error_code ec;
    co_await socket_.async_read_some(asio::buffer(bells), asio::redirect_error(use_awaitable, ec));
    if (ec) {
      // The trainer is gone: what it wrote last (its Leave) is read first;
      // nobody will make room for what is queued.
      drain();
      close();
      co_return;
    }
  }
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

asio::awaitable<bool> ClientSession::write_channel(Outgoing& frame) {
  if (frame.fd_of) {
    // The descriptor goes first, on the socket, so it is there when the
    // trainer reads the frame that names it.
    Outgoing carrier{{0}, std::move(frame.fd_of)};
    if (!co_await write_one(carrier)) co_return false;
  }
  bool announced = false;
  while (!closed_) {
    if (push_now(frame.bytes)) co_return !closed_;
    if (!announced) {
      // Full: ask the trainer to ring when it made room, then look once more.
      channel_->to_client().set_waiting(true);
      announced = true;
      continue;
    }
    co_await queue_.wait();  // the trainer's doorbell: room in the ring
    announced = false;
  }
  co_return false;
}

asio::awaitable<void> ClientSession::write_loop(std::shared_ptr<ClientSession> /*keepalive*/) {
  while (!closed_) {
    if (queue_.empty()) {
      if (flush_then_close_) break;
      co_await queue_.wait();
      continue;
    }
    // The frame stays queued until written: send() puts a frame straight
    // into the channel only when nothing is queued before it.
    Outgoing& frame = queue_.front();
    const bool written = frame.via_channel ? co_await write_channel(frame) : co_await write_one(frame);
    if (!written) break;
    queue_.pop();
    ++frames_written_;
  }
  close();
}

}  // namespace ringsync::service::local
