// One node's one local rank submitting a collective in place: the
// PendingCollective a node's JobRing, Negotiator or Executor is handed once
// its only rank submitted, answered through `done`.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "service/local/pending_collective.h"

namespace ringsync::test {

using namespace ringsync::service;

inline local::PendingCollective one_rank_collective(wire::CollectiveKind kind, const std::string& name,
                                                    collective::Contribution where, std::size_t count,
                                                    std::function<void(const Status&)> done) {
  local::PendingCollective p;
  p.name = name;
  p.job_id = "j";
  p.present = {true};
  p.first_submit = Clock::now();
  local::Submission s;
  s.request.kind = kind;
  s.request.name = name;
  s.request.count = count;
  s.where = where;
  s.submitted = p.first_submit;
  s.complete = std::move(done);
  p.submissions.push_back(std::move(s));
  return p;
}

// The same, in place on host floats.
inline local::PendingCollective one_rank_collective(wire::CollectiveKind kind, const std::string& name, float* data,
                                                    std::size_t count, std::function<void(const Status&)> done) {
  auto* bytes = reinterpret_cast<std::byte*>(data);
  return one_rank_collective(kind, name, collective::Contribution{bytes, bytes}, count, std::move(done));
}

}  // namespace ringsync::test
