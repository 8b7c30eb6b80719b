// top's WAITING section: every collective still waiting on any daemon of the
// job, from each daemon's GET /debug/inflight, and which node the others wait
// on. A collective that hangs shows here as a row that does not go away; the
// verdict line names the node (or the local ranks) at the bottom of it.
#pragma once

#include <string>
#include <vector>

#include "cli/top/scrape.h"

namespace ringsync::cli::top {

struct WaitRow {
  std::string instance, job_id;
  std::string node;   // the daemon's node rank in the job ("-" for a job of one node)
  std::string phase;  // local ranks, planning, gather, data plane, copy-out, ...
  std::string what;   // the tensor, or the operation: "allreduce 'grad' (#7)"
  double age_seconds = 0;
  std::string waits_for;  // "node 1 (10.0.0.2:29517) over tcp/eth0: 256 KiB, step 1, chunk 0, for 4.1 s"
};

struct Waiting {
  std::vector<WaitRow> rows;  // oldest first
  // Per job, the node (or a node's local ranks) the most entries elsewhere
  // wait for: "job train waits on node 1 (10.0.0.2:29517): 3 entries on 2 daemons".
  std::vector<std::string> verdicts;
  // Daemons whose view could not be read (an older daemon: 404).
  std::vector<std::string> unread;
};

// From the latest scrape of every daemon; `job_id` "" for all jobs.
Waiting waiting_of(const std::vector<Scrape>& scrapes, const std::string& job_id);

}  // namespace ringsync::cli::top
