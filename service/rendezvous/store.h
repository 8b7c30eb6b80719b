// A key-value store the daemons of a job rendezvous through (Gloo's Store
// idea): keys under a job's prefix, leases so that a crashed daemon's keys
// expire, compare-and-swap to claim a node rank, and every call bounded by a
// deadline. Implementations: etcd v3 (etcd_store.h) and one in memory for
// tests of the rendezvous itself (memory_store.h).
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace ringsync::service::rendezvous {

struct Entry {
  std::string key;
  std::string value;
  std::int64_t mod_revision = 0;  // the store's revision of the entry's last change
};

class Store {
 public:
  using Lease = std::int64_t;

  virtual ~Store() = default;

  // Where the store is, for messages ("etcd://10.0.0.5:2379").
  virtual const std::string& name() const = 0;

  // A lease that expires `ttl` after its last keep-alive.
  virtual boost::asio::awaitable<Result<Lease>> grant(std::chrono::seconds ttl) = 0;
  // Renews the lease; an error also when it has expired.
  virtual boost::asio::awaitable<Status> keep_alive(Lease lease) = 0;
  // Ends the lease now: its keys go.
  virtual boost::asio::awaitable<Status> revoke(Lease lease) = 0;

  // Writes key = value (under `lease`, 0: none) if the key does not exist;
  // nullopt when it wrote, else the entry that is there.
  virtual boost::asio::awaitable<Result<std::optional<Entry>>> create(const std::string& key, const std::string& value,
                                                                      Lease lease) = 0;
  // Writes key = value if the key's mod_revision is still `revision`; whether it did.
  virtual boost::asio::awaitable<Result<bool>> compare_and_swap(const std::string& key, std::int64_t revision,
                                                                const std::string& value, Lease lease) = 0;
  virtual boost::asio::awaitable<Result<std::optional<Entry>>> get(const std::string& key) = 0;
  // Every entry whose key starts with `prefix`, in key order.
  virtual boost::asio::awaitable<Result<std::vector<Entry>>> list(const std::string& prefix) = 0;
};

}  // namespace ringsync::service::rendezvous
