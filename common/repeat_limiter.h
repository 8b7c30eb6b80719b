// Keeps one misbehaving source from flooding the log: a port scanner, a
// misconfigured client reconnecting in a loop, a peer with the wrong key. The
// first event from a source is logged; further ones within `window` are only
// counted, and the next one logged after the window says how many were left
// out ("... 500 more like this from 198.18.0.9 in the last 60 s").
//
// Sources are strings (an address without its port, "uid 1000"). At most
// `max_sources` are remembered; past that the stalest is forgotten, so a flood
// of distinct sources costs bounded memory (and is logged, one line each, as
// what it is). Not thread-safe: one per thread or guarded by its owner.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace ringsync {

class RepeatLimiter {
 public:
  using Clock = std::chrono::steady_clock;

  explicit RepeatLimiter(Clock::duration window = std::chrono::seconds(60), std::size_t max_sources = 1024);

  struct Verdict {
    bool log = false;             // write this event's line
    std::uint64_t left_out = 0;   // events from the source not logged before it
    Clock::duration over{};       // the time those were counted over
  };
  Verdict admit(const std::string& source, Clock::time_point now = Clock::now());

  // " (and 500 more like this from 198.18.0.9 in the last 60 s)", or "" when
  // nothing was left out: to append to the logged line.
  static std::string left_out_text(const Verdict& v, const std::string& source);

  std::size_t sources() const { return sources_.size(); }

 private:
  struct Source {
    Clock::time_point logged;  // when its last line was written
    std::uint64_t left_out = 0;
  };
  Clock::duration window_;
  std::size_t max_sources_;
  std::map<std::string, Source> sources_;
};

}  // namespace ringsync
