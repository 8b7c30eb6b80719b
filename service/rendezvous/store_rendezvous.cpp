#include "service/rendezvous/store_rendezvous.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/log.h"
#include "service/local/pending_collective.h"
#include "service/rendezvous/lease_keeper.h"
#include "service/rendezvous/polling.h"
#include "service/rendezvous/token_proof.h"

namespace ringsync::service::rendezvous {

namespace asio = boost::asio;
using nlohmann::json;


StoreRendezvous::StoreRendezvous(asio::io_context& io, std::unique_ptr<Store> store, RendezvousJob job,
                                 std::chrono::seconds lease)
    : io_(io), store_(std::move(store)), job_(std::move(job)), lease_ttl_(lease) {}

std::string StoreRendezvous::node_key(std::uint32_t rank) const {
  char digits[16];
  std::snprintf(digits, sizeof(digits), "%05u", rank);
  return key(std::string("nodes/") + digits);
}

asio::awaitable<Status> StoreRendezvous::check_meta() {
  const std::string salt = random_salt();
  const json mine = {{"nodes", job_.num_nodes},
                     {"slots", job_.slots},
                     {"salt", salt},
                     {"proof", token_proof(job_.token, job_.id, salt)}};
  auto existing = co_await store_->create(key("meta"), mine.dump(), lease_);
  if (!existing.ok()) co_return existing.status();
  if (!*existing) co_return Status::Ok();  // the first node of the job: the meta is ours
  json theirs = json::parse((*existing)->value, nullptr, false);
  const std::string where = store_->name();
  if (!theirs.is_object())
    co_return Status::InvalidArgument("the rendezvous store " + where + " holds something that is not ringsync's "
                                      "under " + key("meta") + "; remove it, or use another job id");
  const auto nodes = theirs.value("nodes", 0u);
  const auto slots = theirs.value("slots", 0u);
  if (nodes != job_.num_nodes || slots != job_.slots)
    co_return Status::InvalidArgument("job '" + job_.id + "' is registered in " + where + " with " +
                                      std::to_string(nodes) + " node(s) x " + std::to_string(slots) +
                                      " slot(s), but this node's trainers say " + std::to_string(job_.num_nodes) +
                                      " x " + std::to_string(job_.slots) +
                                      "; start every rank of the job with the same shape, or use another job id");
  if (!same_proof(theirs.value("proof", ""), token_proof(job_.token, job_.id, theirs.value("salt", ""))))
    co_return Status::InvalidArgument("the rendezvous store " + where + " holds job '" + job_.id +
                                      "' with another token: another job uses this id, or this node's "
                                      "RINGSYNC_JOB_TOKEN is wrong; refused");
  co_return Status::Ok();
}

asio::awaitable<Result<std::uint32_t>> StoreRendezvous::join(std::optional<std::uint32_t> wanted) {
  auto self = shared_from_this();
  auto lease = co_await store_->grant(lease_ttl_);
  if (!lease.ok()) co_return lease.status();
  lease_ = *lease;
  const auto fail = [&](Status why) -> Result<std::uint32_t> {
    leave();
    return why;
  };
  if (Status meta = co_await check_meta(); !meta.ok()) co_return fail(meta);
  auto registered = co_await store_->list(key("nodes/"));
  if (!registered.ok()) co_return fail(registered.status());
  const std::string mine = json{{"address", job_.address}}.dump();
  // This address's earlier registration (the daemon came back): keep its rank.
  if (!wanted)
    for (const auto& e : *registered)
      if (address_of(e) == job_.address) {
        const std::uint32_t rank = static_cast<std::uint32_t>(std::stoul(e.key.substr(e.key.rfind('/') + 1)));
        auto swapped = co_await store_->compare_and_swap(e.key, e.mod_revision, mine, lease_);
        if (!swapped.ok()) co_return fail(swapped.status());
        if (*swapped) wanted = rank;
        break;
      }
  std::vector<std::uint32_t> order;
  if (wanted) {
    order.push_back(*wanted);
  } else {
    for (std::uint32_t r = 0; r < job_.num_nodes; ++r) order.push_back(r);
  }
  std::string holders;
  for (std::uint32_t rank : order) {
    auto existing = co_await store_->create(node_key(rank), mine, lease_);
    if (!existing.ok()) co_return fail(existing.status());
    if (!*existing) {
      asio::co_spawn(io_, keep_alive(self), asio::detached);
      co_return rank;
    }
    const std::string holder = address_of(**existing);
    if (holder == job_.address) {
      auto swapped = co_await store_->compare_and_swap((*existing)->key, (*existing)->mod_revision, mine, lease_);
      if (!swapped.ok()) co_return fail(swapped.status());
      if (*swapped) {
        asio::co_spawn(io_, keep_alive(self), asio::detached);
        co_return rank;
      }
    }
    holders += (holders.empty() ? "" : ", ") + std::to_string(rank) + " at " + holder;
  }
  if (wanted)
    co_return fail(Status::InvalidArgument("node rank " + std::to_string(*wanted) + " of job '" + job_.id +
                                           "' is held by " + holders.substr(holders.find(" at ") + 4) + " in " +
                                           store_->name() + "; give each node its own RINGSYNC_NODE_RANK, or leave "
                                           "it unset to take ranks in arrival order"));
  co_return fail(Status::InvalidArgument("job '" + job_.id + "' already has all its " +
                                         std::to_string(job_.num_nodes) + " nodes registered in " + store_->name() +
                                         " (" + holders + "); this node (" + job_.address +
                                         ") is one too many: check the job's node count"));
}

asio::awaitable<Result<Members>> StoreRendezvous::members(std::chrono::steady_clock::time_point deadline) {
  auto self = shared_from_this();
  std::optional<Status> last_error;
  std::vector<std::uint32_t> missing;
  for (;;) {
    auto registered = co_await store_->list(key("nodes/"));
    if (registered.ok()) {
      last_error.reset();
      Members m;
      m.nodes.resize(job_.num_nodes);
      std::vector<bool> seen(job_.num_nodes, false);
      for (const auto& e : *registered) {
        const std::uint32_t rank = static_cast<std::uint32_t>(std::stoul(e.key.substr(e.key.rfind('/') + 1)));
        if (rank >= job_.num_nodes) continue;
        auto parsed = parse_node_list(address_of(e), job_.slots);
        if (!parsed.ok() || parsed->size() != 1) continue;
        m.nodes[rank] = parsed->front();
        seen[rank] = true;
      }
      missing.clear();
      for (std::uint32_t r = 0; r < job_.num_nodes; ++r)
        if (!seen[r]) missing.push_back(r);
      if (missing.empty()) co_return m;
    } else {
      last_error = registered.status();
    }
    if (left_) co_return Status::Closed("the rendezvous of job '" + job_.id + "' was left");
    if (std::chrono::steady_clock::now() + kPollInterval > deadline) break;
    co_await pause(kPollInterval);
  }
  if (last_error) co_return *last_error;
  co_return Status::Timeout("node(s) " + local::rank_list(missing) + " of job '" + job_.id + "' did not register in " +
                            store_->name() + " in time (--join-timeout); are their trainers started?");
}

asio::awaitable<Result<std::uint64_t>> StoreRendezvous::next_epoch() {
  auto self = shared_from_this();
  for (int attempt = 0; attempt < 16; ++attempt) {
    auto current = co_await store_->get(key("epoch"));
    if (!current.ok()) co_return current.status();
    if (!*current) {
      auto created = co_await store_->create(key("epoch"), "1", 0);
      if (!created.ok()) co_return created.status();
      if (!*created) co_return std::uint64_t{1};
      continue;
    }
    std::uint64_t next = 1;
    try {
      next = std::stoull((*current)->value) + 1;
    } catch (const std::exception&) {
    }
    auto swapped = co_await store_->compare_and_swap(key("epoch"), (*current)->mod_revision, std::to_string(next), 0);
    if (!swapped.ok()) co_return swapped.status();
    if (*swapped) co_return next;
  }
  co_return Status::Internal("the epoch of job '" + job_.id + "' in " + store_->name() + " keeps changing");
}

void StoreRendezvous::leave() {
  if (left_) return;
  left_ = true;
  if (lease_ == 0) return;
  auto self = shared_from_this();
  const Store::Lease lease = std::exchange(lease_, 0);
  asio::co_spawn(
      io_,
      [self, lease]() -> asio::awaitable<void> {
        Status revoked = co_await self->store_->revoke(lease);
        if (!revoked.ok())
          RS_LOG(debug, "rendezvous") << "job '" << self->job_.id << "': " << revoked.message()
                                      << " (its registration expires with its lease)";
      },
      asio::detached);
}

asio::awaitable<void> StoreRendezvous::keep_alive(std::shared_ptr<StoreRendezvous> self) {
  co_await keep_lease_alive(*self->store_, self->lease_, self->left_, self->lease_ttl_, self->job_.id);
}

}  // namespace ringsync::service::rendezvous
