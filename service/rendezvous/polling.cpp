#include "service/rendezvous/polling.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

namespace ringsync::service::rendezvous {

namespace asio = boost::asio;

asio::awaitable<void> pause(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

std::string address_of(const Entry& entry) {
  const nlohmann::json j = nlohmann::json::parse(entry.value, nullptr, false);
  return j.is_object() ? j.value("address", "") : "";
}

}  // namespace ringsync::service::rendezvous
