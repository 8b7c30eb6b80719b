// Whether a trainer's hello is admitted, before anything of it is made: the
// hello itself (protocol, local size, job id), then who sent it (the socket's
// access policy, the owner of the job or of its kept states, the job limit).
// The daemon asks these, then finds or forms the job's ring; what a refusal
// says is what the trainer's error says.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "common/status.h"
#include "common/wire.h"
#include "service/local/client_access.h"
#include "service/local/job.h"
#include "service/local/kept_states.h"

namespace ringsync::service::local {

// Ok, or why the hello cannot be served whoever sent it: another protocol, a
// local size outside [1, max_job_ranks], a job id over 256 bytes.
Status check_hello(const wire::Hello& hello, std::uint32_t max_job_ranks, const std::string& daemon_version);

// What the daemon already holds that decides who may join a job.
struct Admission {
  const AccessPolicy& access;
  const KeptStates& kept;
  const std::map<std::string, Job>& jobs;
  std::size_t max_jobs = 0;
};

struct Admitted {
  Status status;       // Ok, or why not
  bool about_who = false;  // a refusal for who the trainer is (counted as an auth error)
};

// Whether `who` may open or join job `job_id`: the access policy lets it use
// the daemon; a job (or the states kept for it) belongs to the uid that made
// it; a new job needs room under max_jobs.
Admitted admit(const Admission& admission, const std::string& job_id, const Credentials& who);

}  // namespace ringsync::service::local
