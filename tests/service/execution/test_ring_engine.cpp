// RingEngine: ring tasks driven on their own thread, ranks as threads over the
// in-process transport; outcomes delivered to the owner; abort fails what is in flight.
#include <doctest/doctest.h>

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "service/borrowed_transport.h"
#include "service/execution/ring_engine.h"
#include "service/ring/allreduce.h"
#include "service/transport/counting.h"
#include "service/transport/in_process.h"

namespace test_service_execution_ring_engine {

using namespace ringsync;
using namespace ringsync::service;

namespace {

using transport::Borrowed;

// Runs delivered completions on the test thread.
struct Inbox {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::function<void()>> items;
  execution::RingEngine::Deliver deliver() {
    return [this](std::function<void()> f) {
      std::lock_guard lock(mu);
      items.push_back(std::move(f));
      cv.notify_all();
    };
  }
  // Runs completions until `done` holds or 30 s pass; false on the deadline.
  template <typename Pred>
  bool run_until(Pred done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!done()) {
      std::vector<std::function<void()>> batch;
      {
        std::unique_lock lock(mu);
        if (!cv.wait_until(lock, deadline, [&] { return !items.empty(); })) return false;
        batch.swap(items);
      }
      for (auto& f : batch) f();
    }
    return true;
  }
};

std::unique_ptr<ring::Task> allreduce_task(transport::Transport& t, std::vector<float>& data,
                                           std::uint32_t sequence) {
  ring::RingOptions options;
  options.sequence = sequence;
  options.chunk_bytes = 4096;
  return std::make_unique<ring::Allreduce>(t, data.data(), data.size(), DType::kF32, ReduceOp::kSum,
                                           1, options);
}

}  // namespace

TEST_CASE("ring engine: concurrent allreduces on 3 nodes, counted per link") {
  constexpr int kNodes = 3;
  transport::InProcessFabric fabric(kNodes);
  Inbox inbox;
  std::vector<std::shared_ptr<transport::LinkCounters>> counters;
  std::vector<std::unique_ptr<execution::RingEngine>> engines;
  for (int r = 0; r < kNodes; ++r) {
    counters.push_back(std::make_shared<transport::LinkCounters>(kNodes));
    engines.push_back(std::make_unique<execution::RingEngine>(
        std::make_unique<transport::CountingTransport>(std::make_unique<Borrowed>(fabric.endpoint(r)),
                                                       counters.back()),
        inbox.deliver()));
  }
  constexpr std::size_t kCount = 10007;
  std::vector<std::vector<float>> a(kNodes), b(kNodes);
  int finished = 0;
  for (int r = 0; r < kNodes; ++r) {
    a[r].assign(kCount, static_cast<float>(r + 1));
    b[r].assign(kCount, static_cast<float>(10 * (r + 1)));
    for (auto* data : {&a[r], &b[r]}) {
      const std::uint32_t seq = data == &a[r] ? 1 : 2;
      engines[r]->run([data, seq](transport::Transport& t) { return allreduce_task(t, *data, seq); },
                      [&finished](const Status& s) {
                        CHECK(s.ok());
                        ++finished;
                      });
    }
  }
  REQUIRE(inbox.run_until([&] { return finished == 2 * kNodes; }));
  for (int r = 0; r < kNodes; ++r) {
    CHECK(std::all_of(a[r].begin(), a[r].end(), [](float v) { return v == 6.0f; }));
    CHECK(std::all_of(b[r].begin(), b[r].end(), [](float v) { return v == 60.0f; }));
  }
  // Each node sends 2(N-1)/N of each buffer to its right neighbour only.
  const std::uint64_t per_node = 2 * kCount * sizeof(float) * 2 * (kNodes - 1) / kNodes;
  for (int r = 0; r < kNodes; ++r) {
    const int right = (r + 1) % kNodes;
    const int left = (r + kNodes - 1) % kNodes;
    CHECK(counters[r]->sent[right].load() >= per_node - 2 * 2 * sizeof(float));
    CHECK(counters[r]->sent[right].load() <= per_node + 2 * 2 * sizeof(float));
    CHECK(counters[r]->sent[left].load() == 0);
    CHECK(counters[r]->received[left].load() == counters[left]->sent[r].load());
  }
}

TEST_CASE("ring engine: abort fails the task in flight and every later one") {
  constexpr int kNodes = 2;
  transport::InProcessFabric fabric(kNodes);
  Inbox inbox;
  // Only node 0 runs: its allreduce waits for node 1 forever, until the abort.
  execution::RingEngine engine(std::make_unique<Borrowed>(fabric.endpoint(0)), inbox.deliver());
  std::vector<float> data(1000, 1.0f);
  std::vector<Status> outcomes;
  engine.run([&](transport::Transport& t) { return allreduce_task(t, data, 1); },
             [&](const Status& s) { outcomes.push_back(s); });
  engine.abort(Status::PeerLost("node 1 was lost"));
  engine.run([&](transport::Transport& t) { return allreduce_task(t, data, 2); },
             [&](const Status& s) { outcomes.push_back(s); });
  REQUIRE(inbox.run_until([&] { return outcomes.size() == 2; }));
  for (const auto& s : outcomes) {
    CHECK(s.code() == StatusCode::kPeerLost);
    CHECK(s.message().find("node 1 was lost") != std::string::npos);
  }
}

TEST_CASE("ring engine: polling after the last task, one operation after another completes each") {
  // A window far longer than the test: the engines must take new work while
  // polling, and stop when destroyed.
  constexpr int kNodes = 2;
  transport::InProcessFabric fabric(kNodes);
  Inbox inbox;
  std::vector<std::unique_ptr<execution::RingEngine>> engines;
  for (int r = 0; r < kNodes; ++r)
    engines.push_back(std::make_unique<execution::RingEngine>(std::make_unique<Borrowed>(fabric.endpoint(r)),
                                                            inbox.deliver(), std::chrono::seconds(60)));
  std::vector<std::vector<float>> data(kNodes);
  for (std::uint32_t op = 1; op <= 5; ++op) {
    int finished = 0;
    for (int r = 0; r < kNodes; ++r) {
      data[r].assign(1001, static_cast<float>(r + op));
      engines[r]->run([&data, r, op](transport::Transport& t) { return allreduce_task(t, data[r], op); },
                      [&finished](const Status& s) {
                        CHECK(s.ok());
                        ++finished;
                      });
    }
    REQUIRE(inbox.run_until([&] { return finished == kNodes; }));
    for (int r = 0; r < kNodes; ++r)
      CHECK(std::all_of(data[r].begin(), data[r].end(), [op](float v) { return v == static_cast<float>(2 * op + 1); }));
  }
  engines.clear();  // joins threads that are still inside their polling window
}

namespace {

// An endpoint whose event fd never fires: every wake-up is lost, as UCX's
// shared memory loses them across network namespaces.
class Deaf final : public Borrowed {
 public:
  explicit Deaf(transport::Transport& t) : Borrowed(t), fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~Deaf() override { ::close(fd_); }
  int event_fd() const override { return fd_; }
  bool arm() override { return true; }

 private:
  int fd_;
};

}  // namespace

TEST_CASE("ring engine: a transport that loses every wake-up slows the operation, never hangs it, and is counted") {
  constexpr int kNodes = 2;
  transport::InProcessFabric fabric(kNodes);
  Inbox inbox;
  std::vector<std::unique_ptr<execution::RingEngine>> engines;
  for (int r = 0; r < kNodes; ++r)
    engines.push_back(std::make_unique<execution::RingEngine>(std::make_unique<Deaf>(fabric.endpoint(r)), inbox.deliver()));
  std::vector<std::vector<float>> data(kNodes);
  int finished = 0;
  for (int r = 0; r < kNodes; ++r) {
    data[r].assign(3001, static_cast<float>(r + 1));
    // Node 1 comes late: node 0 is asleep by then, and nothing wakes it but its bound.
    if (r == 1) std::this_thread::sleep_for(execution::RingEngine::kInFlightSleep * 3);
    engines[r]->run([&data, r](transport::Transport& t) { return allreduce_task(t, data[r], 1); },
                    [&finished](const Status& s) {
                      CHECK(s.ok());
                      ++finished;
                    });
  }
  REQUIRE(inbox.run_until([&] { return finished == kNodes; }));
  for (int r = 0; r < kNodes; ++r)
    CHECK(std::all_of(data[r].begin(), data[r].end(), [](float v) { return v == 3.0f; }));
  CHECK(engines[0]->missed_wakeups() > 0);
}

}  // namespace test_service_execution_ring_engine
