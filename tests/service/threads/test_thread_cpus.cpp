// Each case runs on a thread of its own: binding the test runner's thread
// would leak into every later test.
#include "service/threads/thread_cpus.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace test_service_threads_thread_cpus {

using ringsync::StatusCode;
using ringsync::service::threads::set_thread_cpus;
using ringsync::service::threads::thread_cpus;
using ringsync::service::threads::ThreadCpusScope;

namespace {

// Runs `body` on a new thread and waits for it.
template <typename F>
void on_a_thread(F body) {
  std::thread t(body);
  t.join();
}

// The CPUs a thread started now from the calling thread gets.
std::vector<int> cpus_of_a_new_thread() {
  std::vector<int> cpus;
  on_a_thread([&] { cpus = thread_cpus().value(); });
  return cpus;
}

}  // namespace

TEST_CASE("thread CPUs: read back sorted, and a new thread inherits its creator's") {
  on_a_thread([] {
    const auto all = thread_cpus();
    REQUIRE(all.ok());
    REQUIRE_FALSE(all->empty());
    CHECK(std::is_sorted(all->begin(), all->end()));
    CHECK(cpus_of_a_new_thread() == *all);
  });
}

TEST_CASE("thread CPUs: binding narrows this thread and what it creates; a scope lends the rest back") {
  on_a_thread([] {
    const std::vector<int> all = thread_cpus().value();
    if (all.size() < 2) {
      MESSAGE("skipped: one CPU, nothing to narrow");
      return;
    }
    const std::vector<int> one{all.back()};
    REQUIRE(set_thread_cpus(one).ok());
    CHECK(thread_cpus().value() == one);
    CHECK(cpus_of_a_new_thread() == one);
    {
      ThreadCpusScope spread(all);
      CHECK(thread_cpus().value() == all);
      CHECK(cpus_of_a_new_thread() == all);
    }
    CHECK(thread_cpus().value() == one);  // back where it was
    {
      ThreadCpusScope nothing({});
      CHECK(thread_cpus().value() == one);
    }
    CHECK(thread_cpus().value() == one);
  });
}

TEST_CASE("thread CPUs: a CPU this thread may not use is refused, and nothing changes") {
  on_a_thread([] {
    const std::vector<int> all = thread_cpus().value();
    int missing = 0;
    while (std::binary_search(all.begin(), all.end(), missing)) ++missing;
    const auto refused = set_thread_cpus({all.front(), missing});
    CHECK(refused.code() == StatusCode::kInvalidArgument);
    CHECK(refused.message().starts_with("CPU " + std::to_string(missing) + " is not one ringsyncd may run on ("));
    CHECK(thread_cpus().value() == all);
    CHECK(set_thread_cpus({}).code() == StatusCode::kInvalidArgument);
    CHECK(thread_cpus().value() == all);
  });
}

}  // namespace test_service_threads_thread_cpus
