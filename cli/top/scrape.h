// One look at every daemon's /metrics, all at once over Boost.Beast, each bounded
// by a deadline: a daemon that does not answer costs `timeout`, never a hang.
#pragma once

#include <chrono>
#include <string>
#include <utility>  // before Boost 1.74's awaitable.hpp, which uses std::exchange without it
#include <vector>

#include <boost/asio/awaitable.hpp>

#include "cli/top/targets.h"
#include "common/metrics_text.h"
#include "common/status.h"

namespace ringsync::cli::top {

struct Scrape {
  std::string instance;                          // HOST:PORT
  std::chrono::steady_clock::time_point at;      // when the answer (or the error) came
  Result<std::vector<metrics::Sample>> samples = Status::Closed("not read yet");
  // The JSON of the daemon's GET /debug/inflight, read after its metrics (an
  // older daemon answers 404: the error says so).
  Result<std::string> in_flight = Status::Closed("not read yet");
};

// Every target's samples and in-flight view, in target order; an unreachable
// daemon, an HTTP error or text that does not parse gives that target an
// error that says which.
boost::asio::awaitable<std::vector<Scrape>> scrape_all(std::vector<Target> targets,
                                                       std::chrono::nanoseconds timeout);

}  // namespace ringsync::cli::top
