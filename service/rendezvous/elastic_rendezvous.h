// One node's rendezvous for an elastic job (min_nodes..max_nodes) through a
// Store (etcd): which nodes form each run's ring, and in which order.
//
// Every daemon with trainers waiting for the job registers under the job's
// prefix with a lease, a fresh registration (a new revision) for every run. A
// node that leaves a run stops keeping its lease alive but leaves the
// registration: a lost node's expires with its lease, a survivor's is replaced
// when its trainers reconnect. A roster names the nodes of the current run,
// with the registration each one ran with:
//
//   /ringsync/jobs/<job>/meta                 {"min":M,"max":X,"slots":L,"salt":..,"proof":..}
//   /ringsync/jobs/<job>/members/<address>    {"address":"10.0.0.13:29517"}            its lease
//   /ringsync/jobs/<job>/roster               {"epoch":7,"nodes":[{"address":..,"revision":..},..]}
//
// The first roster takes the first `first_nodes` registrations (RINGSYNC_NUM_NODES,
// default max_nodes). The next one is decided once every node of the current
// roster has either registered again (it survived and its trainers reconnected)
// or gone (its registration expired or was revoked): survivors keep their
// places, registrations not in the roster (spares, returning nodes) fill the
// holes in the order they came, then the roster closes up if holes remain and
// grows up to max_nodes. Below min_nodes it waits for more, for
// `below_min_wait`, then fails with a clear error. Nodes of the current run
// still registered as they ran are waited for without a bound: their run goes
// on (a spare waits as long), or their lease has yet to run out. Any waiting
// node may write the next roster; compare-and-swap makes the first one the
// roster. A node not in it (a spare not needed yet) keeps waiting.
//
// Every call is bounded; a store that does not answer is a clear error.
// Shared-owned: the keep-alive loop holds it until leave().
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

#include "common/status.h"
#include "service/rendezvous/rendezvous.h"
#include "service/rendezvous/roster.h"
#include "service/rendezvous/store.h"

namespace ringsync::service::rendezvous {

struct ElasticJob {
  std::string id;
  std::string token;
  std::uint32_t min_nodes = 1;
  std::uint32_t max_nodes = 1;
  std::uint32_t first_nodes = 1;  // the first ring waits for this many
  std::uint32_t slots = 1;
  std::string address;  // this daemon's control address, as the others reach it
  std::chrono::nanoseconds below_min_wait{0};  // --elastic-timeout
};

class ElasticRendezvous final : public Rendezvous, public std::enable_shared_from_this<ElasticRendezvous> {
 public:
  ElasticRendezvous(boost::asio::io_context& io, std::unique_ptr<Store> store, ElasticJob job,
                    std::chrono::seconds lease);

  // Registers this node and waits until a roster places it; returns its node
  // rank there (`wanted` is ignored: an elastic job's places are the roster's).
  boost::asio::awaitable<Result<std::uint32_t>> join(std::optional<std::uint32_t> wanted) override;
  // The roster that placed this node.
  boost::asio::awaitable<Result<Members>> members(std::chrono::steady_clock::time_point deadline) override;
  // The roster's epoch.
  boost::asio::awaitable<Result<std::uint64_t>> next_epoch() override;
  void leave() override;
  std::optional<std::uint32_t> num_nodes() const override;
  // Marks the placed roster's node `node` lost (/ringsync/jobs/<job>/lost/<address>).
  void report_lost(std::uint32_t node) override;
  // Seen by a watch of the registrations (every second while the run goes on).
  std::uint32_t nodes_waiting() const override { return waiting_; }

 private:
  std::string key(const std::string& rest) const { return "/ringsync/jobs/" + job_.id + "/" + rest; }
  boost::asio::awaitable<Status> check_meta();
  boost::asio::awaitable<Status> register_member();
  // One look at the store: this node's place if the roster has it; otherwise
  // writes the next roster when it can be decided. nullopt: not yet.
  // below_since: when the nodes there first fell short of min_nodes (zero: they did not).
  boost::asio::awaitable<Result<std::optional<std::uint32_t>>> try_place(std::chrono::steady_clock::time_point& below_since);
  static boost::asio::awaitable<void> keep_alive(std::shared_ptr<ElasticRendezvous> self);
  // The registrations nodes saw lost (/ringsync/jobs/<job>/lost/).
  boost::asio::awaitable<Result<std::vector<RosterNode>>> lost_marks();
  // While placed and not left: counts registrations the roster has no place for.
  static boost::asio::awaitable<void> watch_waiting(std::shared_ptr<ElasticRendezvous> self);

  boost::asio::io_context& io_;
  std::unique_ptr<Store> store_;
  ElasticJob job_;
  std::chrono::seconds lease_ttl_;
  Store::Lease lease_ = 0;
  std::int64_t revision_ = 0;  // of this node's registration
  bool left_ = false;
  // "run 7 of 3 node(s); left: A; joined: B as node 1" (the roster says what changed).
  void log_change(const Roster& after) const;

  Roster placed_;               // the roster that placed this node
  std::string last_wait_;       // what it last logged it waits for
  std::uint32_t waiting_ = 0;   // nodes_waiting()
};

}  // namespace ringsync::service::rendezvous
