// One node's rendezvous for a multi-node job through a Store (etcd): the
// node registers under the job's prefix with a lease (a crashed daemon's
// registration expires), claims a node rank by compare-and-swap in arrival
// order (or keeps its rank when it comes back at the same address), and waits
// until every node has registered; the member list, with an epoch node 0
// takes from a counter in the store, is what forms the ring.
//
//   /ringsync/jobs/<job>/meta          {"nodes":N,"slots":L,"salt":..,"proof":..}   first node's lease
//   /ringsync/jobs/<job>/nodes/00002   {"address":"10.0.0.13:29517"}             that node's lease
//   /ringsync/jobs/<job>/epoch         "7"                                        no lease
//
// Every call is bounded; a store that does not answer is a clear error, never
// a hang, and other jobs of the daemon are not held up (control thread,
// asynchronous). Shared-owned: the keep-alive loop holds it until leave().
#pragma once

#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/hostfile.h"
#include "common/status.h"
#include "service/rendezvous/rendezvous.h"
#include "service/rendezvous/store.h"

namespace ringsync::service::rendezvous {

struct RendezvousJob {
  std::string id;
  std::string token;
  std::uint32_t num_nodes = 0;
  std::uint32_t slots = 0;
  std::string address;  // this daemon's control address, as the others reach it
};

class StoreRendezvous final : public Rendezvous, public std::enable_shared_from_this<StoreRendezvous> {
 public:
  // lease: how long a registration outlives its daemon's last keep-alive.
  StoreRendezvous(boost::asio::io_context& io, std::unique_ptr<Store> store, RendezvousJob job,
                  std::chrono::seconds lease);

  // Registers this node and returns its node rank: `wanted` when given (an
  // error if another address holds it), else the rank this address held, else
  // the first free one. Refused: another shape or token for the job, or every
  // rank taken. Then keeps the registration alive until leave().
  boost::asio::awaitable<Result<std::uint32_t>> join(std::optional<std::uint32_t> wanted) override;
  // Every node of the job, once all have registered, or an error at `deadline`
  // naming those that did not (or what the store said).
  boost::asio::awaitable<Result<Members>> members(std::chrono::steady_clock::time_point deadline) override;
  // Node 0, before each roster: the job's next epoch (a counter in the store).
  boost::asio::awaitable<Result<std::uint64_t>> next_epoch() override;
  // Ends the registration (revokes the lease, in the background).
  void leave() override;

  const std::string& store_name() const { return store_->name(); }
  boost::asio::io_context& io() { return io_; }

 private:
  std::string key(const std::string& rest) const { return "/ringsync/jobs/" + job_.id + "/" + rest; }
  std::string node_key(std::uint32_t rank) const;
  boost::asio::awaitable<Status> check_meta();
  static boost::asio::awaitable<void> keep_alive(std::shared_ptr<StoreRendezvous> self);

  boost::asio::io_context& io_;
  std::unique_ptr<Store> store_;
  RendezvousJob job_;
  std::chrono::seconds lease_ttl_;
  Store::Lease lease_ = 0;
  bool left_ = false;
};

}  // namespace ringsync::service::rendezvous
