#include "service/rendezvous/memory_store.h"

namespace ringsync::service::rendezvous {

namespace asio = boost::asio;

void MemoryStore::State::expire(Lease lease) {
  leases.erase(lease);
  std::erase_if(entries, [lease](const auto& e) { return e.second.lease == lease; });
  ++revision;
}

asio::awaitable<Result<Store::Lease>> MemoryStore::grant(std::chrono::seconds) {
  if (state_->down) co_return unreachable();
  const Lease id = state_->next_lease++;
  state_->leases.insert(id);
  co_return id;
}

asio::awaitable<Status> MemoryStore::keep_alive(Lease lease) {
  if (state_->down) co_return unreachable();
  co_return state_->leases.count(lease) ? Status::Ok() : Status::PeerLost("the lease has expired");
}

asio::awaitable<Status> MemoryStore::revoke(Lease lease) {
  if (state_->down) co_return unreachable();
  state_->expire(lease);
  co_return Status::Ok();
}

asio::awaitable<Result<std::optional<Entry>>> MemoryStore::create(const std::string& key, const std::string& value,
                                                                   Lease lease) {
  if (state_->down) co_return unreachable();
  auto it = state_->entries.find(key);
  if (it != state_->entries.end()) co_return std::optional<Entry>(Entry{key, it->second.value, it->second.mod_revision});
  state_->entries[key] = State::Value{value, ++state_->revision, lease};
  co_return std::optional<Entry>();
}

asio::awaitable<Result<bool>> MemoryStore::compare_and_swap(const std::string& key, std::int64_t revision,
                                                            const std::string& value, Lease lease) {
  if (state_->down) co_return unreachable();
  auto it = state_->entries.find(key);
  if (it == state_->entries.end() || it->second.mod_revision != revision) co_return false;
  it->second = State::Value{value, ++state_->revision, lease};
  co_return true;
}

asio::awaitable<Result<std::optional<Entry>>> MemoryStore::get(const std::string& key) {
  if (state_->down) co_return unreachable();
  auto it = state_->entries.find(key);
  if (it == state_->entries.end()) co_return std::optional<Entry>();
  co_return std::optional<Entry>(Entry{key, it->second.value, it->second.mod_revision});
}

asio::awaitable<Result<std::vector<Entry>>> MemoryStore::list(const std::string& prefix) {
  if (state_->down) co_return unreachable();
  std::vector<Entry> out;
  for (auto it = state_->entries.lower_bound(prefix); it != state_->entries.end() && it->first.rfind(prefix, 0) == 0;
       ++it)
    out.push_back(Entry{it->first, it->second.value, it->second.mod_revision});
  co_return out;
}

}  // namespace ringsync::service::rendezvous
