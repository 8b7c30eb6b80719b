#include "service/rendezvous/elastic_rendezvous.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/units.h"
#include "service/rendezvous/lease_keeper.h"
#include "service/rendezvous/polling.h"
#include "service/rendezvous/token_proof.h"

namespace ringsync::service::rendezvous {

namespace asio = boost::asio;
using nlohmann::json;


ElasticRendezvous::ElasticRendezvous(asio::io_context& io, std::unique_ptr<Store> store, ElasticJob job,
                                     std::chrono::seconds lease)
    : io_(io), store_(std::move(store)), job_(std::move(job)), lease_ttl_(lease) {}

asio::awaitable<Status> ElasticRendezvous::check_meta() {
  const std::string salt = random_salt();
  const json mine = {{"elastic", true},
                     {"min", job_.min_nodes},
                     {"max", job_.max_nodes},
                     {"slots", job_.slots},
                     {"salt", salt},
                     {"proof", token_proof(job_.token, job_.id, salt)}};
  auto existing = co_await store_->create(key("meta"), mine.dump(), lease_);
  if (!existing.ok()) co_return existing.status();
  if (!*existing) co_return Status::Ok();
  json theirs = json::parse((*existing)->value, nullptr, false);
  const std::string where = store_->name();
  if (!theirs.is_object())
    co_return Status::InvalidArgument("the rendezvous store " + where + " holds something that is not ringsync's "
                                      "under " + key("meta") + "; remove it, or use another job id");
  if (!theirs.value("elastic", false))
    co_return Status::InvalidArgument("job '" + job_.id + "' is registered in " + where +
                                      " with a fixed node count, but this node's trainers say it is elastic "
                                      "(RINGSYNC_MIN_NODES/RINGSYNC_MAX_NODES); start every rank the same way, or "
                                      "use another job id");
  const auto min = theirs.value("min", 0u), max = theirs.value("max", 0u), slots = theirs.value("slots", 0u);
  if (min != job_.min_nodes || max != job_.max_nodes || slots != job_.slots)
    co_return Status::InvalidArgument(
        "job '" + job_.id + "' is registered in " + where + " with " + std::to_string(min) + " to " +
        std::to_string(max) + " node(s) x " + std::to_string(slots) + " slot(s), but this node's trainers say " +
        std::to_string(job_.min_nodes) + " to " + std::to_string(job_.max_nodes) + " x " +
        std::to_string(job_.slots) + "; start every rank of the job with the same shape, or use another job id");
  if (!same_proof(theirs.value("proof", ""), token_proof(job_.token, job_.id, theirs.value("salt", ""))))
    co_return Status::InvalidArgument("the rendezvous store " + where + " holds job '" + job_.id +
                                      "' with another token: another job uses this id, or this node's "
                                      "RINGSYNC_JOB_TOKEN is wrong; refused");
  co_return Status::Ok();
}

asio::awaitable<Status> ElasticRendezvous::register_member() {
  const std::string mine = json{{"address", job_.address}}.dump();
  const std::string member = key("members/" + job_.address);
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto existing = co_await store_->create(member, mine, lease_);
    if (!existing.ok()) co_return existing.status();
    if (!*existing) {
      auto written = co_await store_->get(member);
      if (!written.ok()) co_return written.status();
      if (*written) {
        revision_ = (*written)->mod_revision;
        co_return Status::Ok();
      }
      continue;  // revoked meanwhile: again
    }
    // This address's registration of an earlier run (revoked in the background,
    // or a daemon that restarted before its lease ran out): this one takes over.
    auto swapped = co_await store_->compare_and_swap(member, (*existing)->mod_revision, mine, lease_);
    if (!swapped.ok()) co_return swapped.status();
    if (!*swapped) continue;
    auto written = co_await store_->get(member);
    if (!written.ok()) co_return written.status();
    if (*written) {
      revision_ = (*written)->mod_revision;
      co_return Status::Ok();
    }
  }
  co_return Status::Internal("the registration of " + job_.address + " for job '" + job_.id + "' in " +
                             store_->name() + " keeps changing under it");
}

asio::awaitable<Result<std::uint32_t>> ElasticRendezvous::join(std::optional<std::uint32_t> /*wanted*/) {
  auto self = shared_from_this();
  auto lease = co_await store_->grant(lease_ttl_);
  if (!lease.ok()) co_return lease.status();
  lease_ = *lease;
  const auto fail = [&](Status why) -> Result<std::uint32_t> {
    leave();
    return why;
  };
  if (Status meta = co_await check_meta(); !meta.ok()) co_return fail(meta);
  if (Status registered = co_await register_member(); !registered.ok()) co_return fail(registered);
  asio::co_spawn(io_, keep_alive(self), asio::detached);
  std::chrono::steady_clock::time_point below_since{};
  for (;;) {
    if (left_) co_return Status::Closed("the rendezvous of job '" + job_.id + "' was left");
    auto placed = co_await try_place(below_since);
    if (!placed.ok()) co_return fail(placed.status());
    if (*placed) {
      if (placed_.nodes.size() < job_.max_nodes) asio::co_spawn(io_, watch_waiting(self), asio::detached);
      co_return **placed;
    }
    co_await pause(kPollInterval);
  }
}

asio::awaitable<Result<std::optional<std::uint32_t>>> ElasticRendezvous::try_place(
    std::chrono::steady_clock::time_point& below_since) {
  using Placed = std::optional<std::uint32_t>;
  auto roster_entry = co_await store_->get(key("roster"));
  if (!roster_entry.ok()) co_return roster_entry.status();
  Roster current;
  if (*roster_entry) {
    auto parsed = parse_roster((*roster_entry)->value);
    if (!parsed.ok())
      co_return Status::InvalidArgument("job '" + job_.id + "' in " + store_->name() + ": " + parsed.status().message());
    current = std::move(parsed).value();
    current.store_revision = (*roster_entry)->mod_revision;
    for (std::size_t i = 0; i < current.nodes.size(); ++i)
      if (current.nodes[i].address == job_.address && current.nodes[i].revision == revision_) {
        placed_ = current;
        log_change(placed_);
        co_return Placed(static_cast<std::uint32_t>(i));
      }
  }
  auto members = co_await store_->list(key("members/"));
  if (!members.ok()) co_return members.status();
  std::vector<Registration> registered;
  for (const auto& e : *members) {
    const std::string address = address_of(e);
    if (!address.empty()) registered.push_back({address, e.mod_revision});
  }
  const auto now = std::chrono::steady_clock::now();
  // Nodes of the last run still registered as they ran are waited for: their
  // run goes on (a spare waits for as long), or their lease has yet to expire
  // (a lost node's does within --rendezvous-lease), or they are on their way
  // back. Only fewer nodes than the minimum is given up on.
  auto lost = co_await lost_marks();
  if (!lost.ok()) co_return lost.status();
  NextRoster next = next_roster(current, registered, {job_.min_nodes, job_.max_nodes, job_.first_nodes}, *lost);
  if (next.kind != NextRoster::Kind::kReady) {
    if (next.why != last_wait_) {
      last_wait_ = next.why;
      RS_LOG(info, "rendezvous") << "job '" << job_.id << "': waiting for the next run's nodes: " << next.why;
    }
    if (next.kind != NextRoster::Kind::kBelowMin) {
      below_since = {};
      co_return Placed();
    }
    if (below_since == std::chrono::steady_clock::time_point{}) below_since = now;
    if (now - below_since >= job_.below_min_wait)
      co_return Status::Timeout("job '" + job_.id + "' cannot go on: " + next.why + " after waiting " +
                                units::format_seconds(job_.below_min_wait) +
                                " (--elastic-timeout); start more nodes, or lower RINGSYNC_MIN_NODES");
    co_return Placed();
  }
  const bool in_it = std::any_of(next.roster.nodes.begin(), next.roster.nodes.end(), [&](const RosterNode& n) {
    return n.address == job_.address && n.revision == revision_;
  });
  if (!in_it) co_return Placed();  // a spare: the roster does not need this node (yet)
  // Write it; whoever writes first makes the roster, the others read it next time.
  Result<bool> written = false;
  if (current.store_revision == 0) {
    auto created = co_await store_->create(key("roster"), roster_json(next.roster), 0);
    if (!created.ok()) co_return created.status();
    written = !*created;
  } else {
    written = co_await store_->compare_and_swap(key("roster"), current.store_revision, roster_json(next.roster), 0);
    if (!written.ok()) co_return written.status();
  }
  if (*written) {
    std::string names;
    for (const auto& n : next.roster.nodes) names += (names.empty() ? "" : ", ") + n.address;
    RS_LOG(info, "rendezvous") << "job '" << job_.id << "': run " << next.roster.epoch << " has "
                               << next.roster.nodes.size() << " node(s): " << names;
  }
  below_since = {};
  co_return Placed();  // read back on the next look
}

asio::awaitable<Result<Members>> ElasticRendezvous::members(std::chrono::steady_clock::time_point) {
  auto self = shared_from_this();
  Members m;
  for (const auto& n : placed_.nodes) {
    auto parsed = parse_node_list(n.address, job_.slots);
    if (!parsed.ok() || parsed->size() != 1)
      co_return Status::InvalidArgument("job '" + job_.id + "': the roster names '" + n.address +
                                        "', which is not a HOST:PORT");
    m.nodes.push_back(parsed->front());
  }
  co_return m;
}

asio::awaitable<Result<std::uint64_t>> ElasticRendezvous::next_epoch() {
  auto self = shared_from_this();
  co_return placed_.epoch;
}

void ElasticRendezvous::log_change(const Roster& after) const {
  std::string left, joined;
  for (const auto& a : after.left) left += (left.empty() ? "" : ", ") + a;
  for (std::size_t i = 0; i < after.nodes.size(); ++i)
    if (std::find(after.joined.begin(), after.joined.end(), after.nodes[i].address) != after.joined.end())
      joined += (joined.empty() ? "" : ", ") + after.nodes[i].address + " as node " + std::to_string(i);
  RS_LOG(info, "rendezvous") << "job '" << job_.id << "': run " << after.epoch << " of " << after.nodes.size()
                             << " node(s)" << (left.empty() ? "" : "; left: " + left)
                             << (joined.empty() ? "" : "; joined: " + joined);
}

asio::awaitable<void> ElasticRendezvous::watch_waiting(std::shared_ptr<ElasticRendezvous> self) {
  while (!self->left_) {
    co_await pause(std::chrono::seconds(1));
    if (self->left_) co_return;
    auto members = co_await self->store_->list(self->key("members/"));
    if (!members.ok()) continue;  // the next look, or the next reset, tells
    auto lost = co_await self->lost_marks();
    if (!lost.ok()) continue;
    std::uint32_t waiting = 0;
    for (const auto& e : *members) {
      const std::string address = address_of(e);
      if (!address.empty() && is_newcomer(self->placed_, {address, e.mod_revision}, *lost)) ++waiting;
    }
    const auto room = static_cast<std::uint32_t>(self->job_.max_nodes - self->placed_.nodes.size());
    waiting = std::min(waiting, room);
    if (waiting != self->waiting_)
      RS_LOG(info, "rendezvous") << "job '" << self->job_.id << "': " << waiting
                                 << " node(s) wait to join its next run";
    self->waiting_ = waiting;
  }
}

asio::awaitable<Result<std::vector<RosterNode>>> ElasticRendezvous::lost_marks() {
  auto marked = co_await store_->list(key("lost/"));
  if (!marked.ok()) co_return marked.status();
  std::vector<RosterNode> lost;
  for (const auto& e : *marked) {
    json j = json::parse(e.value, nullptr, false);
    if (j.is_object()) lost.push_back({j.value("address", ""), j.value("revision", std::int64_t{0})});
  }
  co_return lost;
}

void ElasticRendezvous::report_lost(std::uint32_t node) {
  if (node >= placed_.nodes.size()) return;
  const RosterNode lost = placed_.nodes[node];
  auto self = shared_from_this();
  asio::co_spawn(
      io_,
      [self, lost]() -> asio::awaitable<void> {
        const std::string mark = self->key("lost/" + lost.address);
        const std::string value = json{{"address", lost.address}, {"revision", lost.revision}}.dump();
        auto existing = co_await self->store_->create(mark, value, 0);
        Status failed = existing.ok() ? Status::Ok() : existing.status();
        if (existing.ok() && *existing && (*existing)->value != value) {
          // An older loss of this address: the newest registration's mark replaces it.
          auto swapped = co_await self->store_->compare_and_swap(mark, (*existing)->mod_revision, value, 0);
          if (!swapped.ok()) failed = swapped.status();
        }
        if (!failed.ok())
          RS_LOG(debug, "rendezvous") << "job '" << self->job_.id << "': marking " << lost.address
                                      << " lost failed: " << failed.message()
                                      << " (the next run waits for its lease instead)";
      },
      asio::detached);
}

std::optional<std::uint32_t> ElasticRendezvous::num_nodes() const {
  if (placed_.epoch == 0) return std::nullopt;
  return static_cast<std::uint32_t>(placed_.nodes.size());
}

void ElasticRendezvous::leave() {
  // The registration stays, no longer kept alive: until this node registers for
  // the next run (its trainers reconnect) or the lease runs out, the next roster
  // waits for it, so that a survivor on its way back is not taken for lost.
  left_ = true;
  lease_ = 0;
}

asio::awaitable<void> ElasticRendezvous::keep_alive(std::shared_ptr<ElasticRendezvous> self) {
  co_await keep_lease_alive(*self->store_, self->lease_, self->left_, self->lease_ttl_, self->job_.id);
}

}  // namespace ringsync::service::rendezvous
