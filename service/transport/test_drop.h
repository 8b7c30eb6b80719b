// Test only: a lost message, so tests can see the deadlines end an operation
// that stalls. RINGSYNC_TEST_DROP_SEND=<node rank>:<n> in a daemon's
// environment makes it, wherever it is that node of a multi-node job, drop
// its n-th data-plane send (counted from 1 over the daemon's life, every job
// and ring together): the send is reported done, nothing reaches the peer,
// and the peer's receive waits. Once only. The daemon warns at start-up when
// it is set. Never set it outside tests.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>

#include "service/transport/transport.h"

namespace ringsync::service::transport {

inline constexpr std::string_view kDropSendEnv = "RINGSYNC_TEST_DROP_SEND";

struct DropSend {
  std::uint32_t node = 0;
  std::uint64_t nth = 1;
};

// What the environment asks for, read once; nullopt when unset or malformed.
std::optional<DropSend> drop_send();
// Parses "<node>:<n>" (n >= 1).
std::optional<DropSend> parse_drop_send(std::string_view text);

// Sends counted over the daemon's life (every ring together).
std::shared_ptr<std::atomic<std::uint64_t>> daemon_sends();

// Forwards everything but the n-th send counted by `sends` (by default the
// daemon's; a test gives its own).
class DroppingTransport final : public Transport {
 public:
  DroppingTransport(std::unique_ptr<Transport> inner, std::uint64_t nth,
                    std::shared_ptr<std::atomic<std::uint64_t>> sends = daemon_sends())
      : inner_(std::move(inner)), nth_(nth), sends_(std::move(sends)) {}

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  void send(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Callback done) override;
  void recv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Callback done) override {
    inner_->recv(peer, tag, data, bytes, std::move(done));
  }
  bool progress() override;
  int event_fd() const override { return inner_->event_fd(); }
  bool arm() override { return dropped_ == nullptr && inner_->arm(); }
  void cancel_all(const Status& why) override;
  std::string peer_transports(int peer) const override { return inner_->peer_transports(peer); }

 private:
  std::unique_ptr<Transport> inner_;
  std::uint64_t nth_;
  std::shared_ptr<std::atomic<std::uint64_t>> sends_;
  Callback dropped_;  // the dropped send's callback, run at the next progress()
};

}  // namespace ringsync::service::transport
