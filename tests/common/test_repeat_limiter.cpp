#include <doctest/doctest.h>

#include <string>

#include "common/repeat_limiter.h"

namespace test_common_repeat_limiter {

using ringsync::RepeatLimiter;
using namespace std::chrono_literals;

TEST_CASE("repeat limiter: one line per source a window, then a count of what was left out") {
  RepeatLimiter limiter(60s, 8);
  const auto t0 = RepeatLimiter::Clock::time_point{} + 1000s;
  CHECK(limiter.admit("198.18.0.9", t0).log);
  for (int i = 1; i <= 500; ++i) CHECK_FALSE(limiter.admit("198.18.0.9", t0 + std::chrono::milliseconds(i)).log);
  // Another source is not held back by the first.
  CHECK(limiter.admit("198.18.0.7", t0 + 1s).log);
  const auto later = limiter.admit("198.18.0.9", t0 + 61s);
  REQUIRE(later.log);
  CHECK(later.left_out == 500);
  CHECK(RepeatLimiter::left_out_text(later, "198.18.0.9") ==
        " (and 500 more like this from 198.18.0.9 in the last 61 s)");
  // The count starts again after a logged line.
  CHECK_FALSE(limiter.admit("198.18.0.9", t0 + 62s).log);
  const auto again = limiter.admit("198.18.0.9", t0 + 125s);
  CHECK(again.left_out == 1);
  CHECK(RepeatLimiter::left_out_text(RepeatLimiter::Verdict{true, 0, {}}, "x").empty());
}

TEST_CASE("repeat limiter: a flood of distinct sources costs bounded memory") {
  RepeatLimiter limiter(60s, 4);
  const auto t0 = RepeatLimiter::Clock::time_point{} + 1000s;
  for (int i = 0; i < 100; ++i) CHECK(limiter.admit("10.0.0." + std::to_string(i), t0 + std::chrono::seconds(i)).log);
  CHECK(limiter.sources() == 4);
  // The newest are remembered, the stalest forgotten.
  CHECK_FALSE(limiter.admit("10.0.0.99", t0 + 100s).log);
  CHECK(limiter.admit("10.0.0.0", t0 + 100s).log);
}

}  // namespace test_common_repeat_limiter
