// What the rendezvous algorithms (store_rendezvous.h, elastic_rendezvous.h)
// share while they wait on the store: how often they look again, a pause that
// keeps the control thread free, and where an entry says its node listens.
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>

#include "service/rendezvous/store.h"

namespace ringsync::service::rendezvous {

inline constexpr auto kPollInterval = std::chrono::milliseconds(100);

// Resumes after `d` on the calling coroutine's executor.
boost::asio::awaitable<void> pause(std::chrono::milliseconds d);

// The "address" of a node's JSON entry; "" when the entry has none.
std::string address_of(const Entry& entry);

}  // namespace ringsync::service::rendezvous
