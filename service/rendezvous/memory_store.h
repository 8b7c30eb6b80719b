// The Store in this process's memory: the same semantics as etcd's (revisions,
// leases, create-if-absent, compare-and-swap), for unit tests of the
// rendezvous logic with several "nodes" in one test. Answers at once; can be
// told to fail (a store that went away) and to expire a lease (a daemon that
// crashed). Several MemoryStore handles share one State.
#pragma once

#include <map>
#include <memory>
#include <set>

#include "service/rendezvous/store.h"

namespace ringsync::service::rendezvous {

class MemoryStore final : public Store {
 public:
  struct State {
    struct Value {
      std::string value;
      std::int64_t mod_revision = 0;
      Lease lease = 0;
    };
    std::map<std::string, Value> entries;
    std::set<Lease> leases;
    std::int64_t revision = 0;
    Lease next_lease = 1;
    bool down = false;  // every call fails, as an unreachable etcd
    void expire(Lease lease);
  };

  explicit MemoryStore(std::shared_ptr<State> state, std::string name = "memory://test")
      : state_(std::move(state)), name_(std::move(name)) {}

  const std::string& name() const override { return name_; }
  boost::asio::awaitable<Result<Lease>> grant(std::chrono::seconds ttl) override;
  boost::asio::awaitable<Status> keep_alive(Lease lease) override;
  boost::asio::awaitable<Status> revoke(Lease lease) override;
  boost::asio::awaitable<Result<std::optional<Entry>>> create(const std::string& key, const std::string& value,
                                                              Lease lease) override;
  boost::asio::awaitable<Result<bool>> compare_and_swap(const std::string& key, std::int64_t revision,
                                                        const std::string& value, Lease lease) override;
  boost::asio::awaitable<Result<std::optional<Entry>>> get(const std::string& key) override;
  boost::asio::awaitable<Result<std::vector<Entry>>> list(const std::string& prefix) override;

 private:
  Status unreachable() const { return Status::Closed("the rendezvous store " + name_ + " is down"); }
  std::shared_ptr<State> state_;
  std::string name_;
};

}  // namespace ringsync::service::rendezvous
