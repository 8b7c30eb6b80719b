// The rosters of an elastic job (elastic_rendezvous.h): which nodes form each
// run's ring, in node-rank order, and how the next one follows from the last
// and from who is registered now. Pure: decided the same on every node from the
// same store contents.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace ringsync::service::rendezvous {

struct RosterNode {
  std::string address;        // the daemon's control address
  std::int64_t revision = 0;  // of the registration it ran with (the store's mod revision)
};

struct Roster {
  std::uint64_t epoch = 0;  // 0: no roster yet
  std::vector<RosterNode> nodes;
  // What changed from the run before, written with the roster so that every
  // node logs the same change, however late it first looks.
  std::vector<std::string> left;    // addresses of the last run not in this one
  std::vector<std::string> joined;  // addresses in this run not in the last one
  std::int64_t store_revision = 0;  // of the roster key, for compare-and-swap (0: absent)
};

// A node registered for the job's next run.
struct Registration {
  std::string address;
  std::int64_t revision = 0;
};

std::string roster_json(const Roster& roster);
Result<Roster> parse_roster(const std::string& json);

struct RosterShape {
  std::uint32_t min_nodes = 1;
  std::uint32_t max_nodes = 1;
  std::uint32_t first_nodes = 1;
};

struct NextRoster {
  enum class Kind {
    kWait,      // the current run's nodes have not all come back or gone yet
    kBelowMin,  // fewer than min_nodes are there
    kReady,     // `roster` is the next one
  };
  Kind kind = Kind::kWait;
  Roster roster;
  std::string why;  // kWait / kBelowMin: who is awaited, for logs and errors
};

// The roster after `current` (epoch 0: the first) given the registrations now.
// Survivors (in `current`, registered again since) keep their places; nodes of
// `current` no longer registered leave holes, filled by registrations not in
// `current` in the order they came (revision), then closed up; then the roster
// grows up to max_nodes. A node of `current` still registered as it was (its
// run goes on, or its registration has yet to expire) is waited for, unless
// `lost` names that registration (a node of the run saw it lost).
// Whether a registration could join after `current`: not one of its nodes, and
// not a registration a node saw lost (a dead node's, until its lease runs out).
bool is_newcomer(const Roster& current, const Registration& r, const std::vector<RosterNode>& lost);

NextRoster next_roster(const Roster& current, std::vector<Registration> registered, const RosterShape& shape,
                       const std::vector<RosterNode>& lost = {});

}  // namespace ringsync::service::rendezvous
