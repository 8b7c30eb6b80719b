#include "service/rendezvous/lease_keeper.h"

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log.h"

namespace ringsync::service::rendezvous {

namespace asio = boost::asio;

asio::awaitable<void> keep_lease_alive(Store& store, const Store::Lease& lease, const bool& left,
                                       std::chrono::seconds ttl, std::string job_id) {
  const auto period = std::max<std::chrono::milliseconds>(std::chrono::milliseconds(100), ttl / 3);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!left) {
    timer.expires_after(period);
    boost::system::error_code ec;
    co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (left || lease == 0) co_return;
    Status alive = co_await store.keep_alive(lease);
    if (!alive.ok())
      RS_LOG(warn, "rendezvous") << "job '" << job_id << "': keeping this node's registration alive failed: "
                                 << alive.message();
  }
}

}  // namespace ringsync::service::rendezvous
