// A job as its trainers' hellos describe it (RINGSYNC_NODES, RINGSYNC_NODE_RANK,
// RINGSYNC_NUM_NODES, RINGSYNC_RENDEZVOUS, RINGSYNC_JOB_TOKEN and the local
// size), checked and turned into the JobSpec this daemon serves; and whether
// two ranks of one job describe it the same way.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "common/wire.h"
#include "service/cluster/job_spec.h"

namespace ringsync::service::local {

struct JobDefaults {
  std::string rendezvous;          // --rendezvous: for jobs that give neither nodes nor one
  std::uint16_t control_port = 0;  // where this daemon listens for other nodes; 0: it does not
};

// The job of this hello, or an error that says which setting is wrong and
// how to fix it. node_rank stays unset (the spec's 0) when a rendezvous
// assigns it: then `assigned_rank` is false.
struct DescribedJob {
  cluster::JobSpec spec;
  bool rank_known = true;  // false: the rendezvous assigns this node's place
};
Result<DescribedJob> describe_job(const wire::Hello& hello, const JobDefaults& defaults);

// "" when a later rank's description matches the job's, else what differs
// ("RINGSYNC_NODES is a,b here but c,d for the job's first rank").
std::string description_mismatch(const DescribedJob& job, const DescribedJob& rank);

}  // namespace ringsync::service::local
