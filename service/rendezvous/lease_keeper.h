// Keeps a node's registration in a rendezvous store alive: a keep-alive of its
// lease every third of the lease's time to live, until the node leaves
// (`left`) or the lease is dropped (`lease` 0). A failure is logged: the
// registration then expires with the lease. The caller keeps the referenced
// objects alive until the coroutine has ended (its owner's shared_ptr).
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>

#include "service/rendezvous/store.h"

namespace ringsync::service::rendezvous {

boost::asio::awaitable<void> keep_lease_alive(Store& store, const Store::Lease& lease, const bool& left,
                                              std::chrono::seconds ttl, std::string job_id);

}  // namespace ringsync::service::rendezvous
