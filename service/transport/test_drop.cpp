#include "service/transport/test_drop.h"

#include <charconv>
#include <cstdlib>
#include <string>

namespace ringsync::service::transport {

std::shared_ptr<std::atomic<std::uint64_t>> daemon_sends() {
  static const auto sends = std::make_shared<std::atomic<std::uint64_t>>(0);
  return sends;
}

std::optional<DropSend> parse_drop_send(std::string_view text) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) return std::nullopt;
  DropSend d;
  const auto node = text.substr(0, colon);
  const auto nth = text.substr(colon + 1);
  const auto whole = [](std::string_view part, auto& value) {
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), value);
    return error == std::errc{} && end == part.data() + part.size();
  };
  if (!whole(node, d.node) || !whole(nth, d.nth) || d.nth == 0) return std::nullopt;
  return d;
}

std::optional<DropSend> drop_send() {
  static const std::optional<DropSend> spec = [] {
    const char* value = std::getenv(std::string(kDropSendEnv).c_str());
    return value == nullptr ? std::nullopt : parse_drop_send(value);
  }();
  return spec;
}

void DroppingTransport::send(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Callback done) {
  if (sends_->fetch_add(1) + 1 == nth_) {
    dropped_ = std::move(done);  // "sent": completes at the next progress(), as a real send would
    return;
  }
  inner_->send(peer, tag, data, bytes, std::move(done));
}

bool DroppingTransport::progress() {
  if (auto done = std::move(dropped_)) {
    dropped_ = nullptr;
    done(Status::Ok());
    inner_->progress();
    return true;
  }
  return inner_->progress();
}

void DroppingTransport::cancel_all(const Status& why) {
  if (auto done = std::move(dropped_)) {
    dropped_ = nullptr;
    done(why);
  }
  inner_->cancel_all(why);
}

}  // namespace ringsync::service::transport
