#include "common/repeat_limiter.h"

#include <algorithm>

namespace ringsync {

RepeatLimiter::RepeatLimiter(Clock::duration window, std::size_t max_sources)
    : window_(window), max_sources_(std::max<std::size_t>(1, max_sources)) {}

RepeatLimiter::Verdict RepeatLimiter::admit(const std::string& source, Clock::time_point now) {
  auto it = sources_.find(source);
  if (it == sources_.end()) {
    if (sources_.size() >= max_sources_) {
      auto stalest = std::min_element(sources_.begin(), sources_.end(), [](const auto& a, const auto& b) {
        return a.second.logged < b.second.logged;
      });
      sources_.erase(stalest);
    }
    sources_.emplace(source, Source{now, 0});
    return {true, 0, {}};
  }
  Source& s = it->second;
  if (now - s.logged < window_) {
    ++s.left_out;
    return {false, 0, {}};
  }
  Verdict v{true, s.left_out, now - s.logged};
  s.logged = now;
  s.left_out = 0;
  return v;
}

std::string RepeatLimiter::left_out_text(const Verdict& v, const std::string& source) {
  if (v.left_out == 0) return "";
  const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(v.over).count();
  return " (and " + std::to_string(v.left_out) + " more like this from " + source + " in the last " +
         std::to_string(seconds) + " s)";
}

}  // namespace ringsync
