#include "fake_daemon.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <span>
#include <vector>

#include "common/fd_passing.h"

namespace ringsync::testing {

std::string temp_socket_path(const std::string& tag) {
  static std::atomic<int> counter{0};
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/rs-client-" + tag + "-" + std::to_string(getpid()) +
         "-" + std::to_string(counter++) + ".sock";
}

FakeDaemon::FakeDaemon(Options options)
    : options_(std::move(options)), path_(temp_socket_path("fake")) {
  listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(listen_fd_ >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path_.c_str(), sizeof(addr.sun_path) - 1);
  ::unlink(path_.c_str());
  REQUIRE(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
  REQUIRE(listen(listen_fd_, 4) == 0);
  thread_ = std::thread([this] { serve(); });
}

FakeDaemon::~FakeDaemon() {
  ::shutdown(listen_fd_, SHUT_RDWR);
  drop_client();
  thread_.join();
  ::close(listen_fd_);
  if (client_fd_ >= 0) ::close(client_fd_);
  ::unlink(path_.c_str());
}

rs_config_t FakeDaemon::config(int rank, int size) const {
  rs_config_t c;
  rs_config_init(&c);
  c.socket_path = path_.c_str();
  c.job_id = "test";
  c.local_rank = rank;
  c.local_size = size;
  c.connect_timeout_ms = 2000;
  return c;
}

void FakeDaemon::serve() {
  const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  {
    std::lock_guard lock(mu_);
    client_fd_ = fd;
    if (fd < 0) client_gone_ = true;
  }
  if (fd < 0) {
    cv_.notify_all();
    return;
  }
  std::vector<std::uint8_t> in;
  std::vector<int> fds;
  for (;;) {
    while (in.size() >= wire::kFrameHeaderBytes) {
      auto length = wire::frame_length(std::span<const std::uint8_t, wire::kFrameHeaderBytes>(
                                           in.data(), wire::kFrameHeaderBytes),
                                       wire::kMaxFrameBytes);
      CHECK(length.ok());
      if (!length.ok()) break;
      if (in.size() < wire::kFrameHeaderBytes + *length) break;
      std::vector<std::uint64_t> aligned((*length + 7) / 8);  // FlatBuffers wants alignment
      std::memcpy(aligned.data(), in.data() + wire::kFrameHeaderBytes, *length);
      auto message = wire::decode({reinterpret_cast<const std::uint8_t*>(aligned.data()), *length});
      CHECK(message.ok());
      if (!message.ok()) break;
      in.erase(in.begin(),
               in.begin() + static_cast<std::ptrdiff_t>(wire::kFrameHeaderBytes + *length));
      if (auto* hello = std::get_if<wire::Hello>(&*message)) {
        {
          std::lock_guard lock(mu_);
          hello_ = *hello;
        }
        if (options_.answer_hello) {
          wire::HelloReply reply{options_.hello_status, options_.protocol_version, "fake"};
          reply.heartbeat_ms = options_.heartbeat_ms;
          send(reply);
        }
        continue;
      }
      if (auto* alloc = std::get_if<wire::AllocBuffer>(&*message);
          alloc && options_.answer_allocs) {
        grant(*alloc);
        continue;
      }
      {
        std::lock_guard lock(mu_);
        queue_.push_back(std::move(*message));
      }
      cv_.notify_all();
    }
    std::uint8_t chunk[4096];
    const ssize_t n = recv_with_fds(fd, chunk, sizeof(chunk), fds);
    if (n <= 0) break;
    in.insert(in.end(), chunk, chunk + n);
  }
  for (int extra : fds) ::close(extra);
  {
    std::lock_guard lock(mu_);
    client_gone_ = true;
  }
  cv_.notify_all();
}

std::optional<wire::Message> FakeDaemon::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return !queue_.empty() || client_gone_; });
  if (queue_.empty()) return std::nullopt;
  wire::Message m = std::move(queue_.front());
  queue_.pop_front();
  return m;
}

bool FakeDaemon::client_gone(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return client_gone_; });
}

void FakeDaemon::send(const wire::Message& message, int fd) {
  const std::vector<std::uint8_t> frame = wire::encode(message);
  std::lock_guard lock(mu_);
  if (client_fd_ < 0) return;
  std::size_t sent = 0;
  if (fd >= 0) {
    const ssize_t n = send_with_fd(client_fd_, frame.data(), frame.size(), fd);
    if (n < 0) return;  // the client is gone
    sent = static_cast<std::size_t>(n);
  }
  while (sent < frame.size()) {
    const ssize_t n = ::send(client_fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n < 0) return;
    sent += static_cast<std::size_t>(n);
  }
}

void FakeDaemon::complete(std::uint64_t request_id, Status status) {
  send(wire::Completion{request_id, std::move(status)});
}

std::byte* FakeDaemon::buffer(std::uint32_t buffer_id) {
  std::lock_guard lock(mu_);
  auto it = regions_.find(buffer_id);
  return it == regions_.end() ? nullptr : it->second.data();
}

void FakeDaemon::grant(const wire::AllocBuffer& request) {
  auto region = shm::Region::create(request.bytes, "fake-daemon");
  CHECK(region.ok());
  if (!region.ok()) return;
  const int fd = region->fd();
  std::uint32_t id;
  {
    std::lock_guard lock(mu_);
    id = next_buffer_id_++;
    ++allocations_;
    regions_.emplace(id, std::move(*region));
  }
  send(wire::AllocReply{request.request_id, Status::Ok(), id, request.bytes}, fd);
}

int FakeDaemon::allocations() const {
  std::lock_guard lock(mu_);
  return allocations_;
}

void FakeDaemon::drop_client() {
  std::lock_guard lock(mu_);
  if (client_fd_ >= 0) ::shutdown(client_fd_, SHUT_RDWR);
}

}  // namespace ringsync::testing
