#include "service/local/admission.h"

namespace ringsync::service::local {

Status check_hello(const wire::Hello& hello, std::uint32_t max_job_ranks, const std::string& daemon_version) {
  if (hello.protocol_version != wire::kProtocolVersion)
    return Status::ProtocolError("client protocol version " + std::to_string(hello.protocol_version) +
                                 " is not supported by ringsyncd " + daemon_version + " (protocol " +
                                 std::to_string(wire::kProtocolVersion) + "); use a matching client library");
  if (hello.local_size == 0 || hello.local_size > max_job_ranks)
    return Status::InvalidArgument("local size " + std::to_string(hello.local_size) + " is out of range [1, " +
                                   std::to_string(max_job_ranks) + "] (this ringsyncd's --max-job-ranks)");
  if (hello.job_id.size() > 256) return Status::InvalidArgument("job id is longer than 256 bytes");
  return Status::Ok();
}

Admitted admit(const Admission& a, const std::string& job_id, const Credentials& who) {
  if (Status allowed = a.access.admit(who); !allowed.ok()) return {allowed, true};
  const auto job = a.jobs.find(job_id);
  const bool new_job = job == a.jobs.end();
  // States kept for a job outlive its ranks here: they stay their user's.
  if (const auto keeper = a.kept.owner(job_id); new_job && keeper && *keeper != who.uid)
    return {Status::InvalidArgument("job '" + job_id + "' has states kept on this ringsyncd by uid " +
                                    std::to_string(*keeper) + ", not by uid " + std::to_string(who.uid) +
                                    "; give this job an id of its own (RINGSYNC_JOB_ID)"),
            true};
  // A job belongs to the user whose trainer made it: another user's trainers
  // cannot attach to it (nor read its buffers or kept state through it).
  if (!new_job && job->second.owner_uid != who.uid)
    return {Status::InvalidArgument("job '" + job_id + "' on this ringsyncd belongs to uid " +
                                    std::to_string(job->second.owner_uid) + ", not to uid " + std::to_string(who.uid) +
                                    "; give this job an id of its own (RINGSYNC_JOB_ID)"),
            true};
  if (new_job && a.jobs.size() >= a.max_jobs)
    return {Status::InvalidArgument("this ringsyncd serves " + std::to_string(a.jobs.size()) +
                                    " jobs already, its limit (--max-jobs " + std::to_string(a.max_jobs) + "); job '" +
                                    job_id + "' is refused: wait for a job to end, or raise --max-jobs"),
            false};
  return {Status::Ok(), false};
}

}  // namespace ringsync::service::local
