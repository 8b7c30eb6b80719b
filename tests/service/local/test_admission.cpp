// Whether a hello is admitted (service/local/admission.h): the hello alone,
// then who sent it against the jobs and kept states the daemon holds.
#include <doctest/doctest.h>

#include "service/local/admission.h"

namespace test_service_local_admission {

using namespace ringsync;
using namespace ringsync::service;

namespace {

wire::Hello hello_of(std::string job, std::uint32_t local_size) {
  wire::Hello h;
  h.protocol_version = wire::kProtocolVersion;
  h.job_id = std::move(job);
  h.local_size = local_size;
  return h;
}

bool says(const Status& s, const std::string& text) { return s.message().find(text) != std::string::npos; }

}  // namespace

TEST_CASE("admission: a hello of another protocol, an out-of-range local size or a long job id is refused") {
  CHECK(local::check_hello(hello_of("j", 4), 8, "1.2.3").ok());
  wire::Hello old = hello_of("j", 4);
  old.protocol_version = wire::kProtocolVersion + 1;
  const Status protocol = local::check_hello(old, 8, "1.2.3");
  CHECK(protocol.code() == StatusCode::kProtocolError);
  CHECK(says(protocol, "ringsyncd 1.2.3"));
  CHECK(says(protocol, "use a matching client library"));
  CHECK(says(local::check_hello(hello_of("j", 0), 8, "1.2.3"), "local size 0 is out of range [1, 8]"));
  CHECK(says(local::check_hello(hello_of("j", 9), 8, "1.2.3"), "--max-job-ranks"));
  CHECK(local::check_hello(hello_of("j", 8), 8, "1.2.3").ok());
  CHECK(says(local::check_hello(hello_of(std::string(257, 'x'), 1), 8, "1.2.3"), "longer than 256 bytes"));
  CHECK(local::check_hello(hello_of(std::string(256, 'x'), 1), 8, "1.2.3").ok());
}

TEST_CASE("admission: a job is its maker's; kept states keep their owner; the job limit counts new jobs only") {
  auto access = local::AccessPolicy::parse(1000, "1001,1002", "");
  REQUIRE(access.ok());
  local::KeptStates kept(1 << 20);
  std::map<std::string, local::Job> jobs;
  jobs.try_emplace("train", "train", 2).first->second.owner_uid = 1001;
  const local::Admission admission{*access, kept, jobs, 2};
  const local::Credentials owner{1001, 1001, 1, {}};
  const local::Credentials other{1002, 1002, 1, {}};

  CHECK(local::admit(admission, "train", owner).status.ok());
  const local::Admitted taken = local::admit(admission, "train", other);
  CHECK(taken.about_who);
  CHECK(says(taken.status, "job 'train' on this ringsyncd belongs to uid 1001, not to uid 1002"));
  CHECK(says(taken.status, "RINGSYNC_JOB_ID"));

  // Not allowed on the socket at all: the access policy's own refusal.
  const local::Admitted stranger = local::admit(admission, "new", {3000, 3000, 1, {}});
  CHECK(stranger.about_who);
  CHECK(says(stranger.status, "does not serve uid 3000"));

  // The states kept for a job that has no ranks now stay their owner's.
  kept.set_owner("resumed", 1001);
  const local::Admitted resumed = local::admit(admission, "resumed", other);
  CHECK(resumed.about_who);
  CHECK(says(resumed.status, "has states kept on this ringsyncd by uid 1001"));
  CHECK(local::admit(admission, "resumed", owner).status.ok());

  // --max-jobs 2 with one job: one more may start; at two, new ones wait, the
  // jobs there still take ranks.
  CHECK(local::admit(admission, "second", other).status.ok());
  jobs.try_emplace("second", "second", 1).first->second.owner_uid = 1002;
  const local::Admitted full = local::admit(admission, "third", owner);
  CHECK_FALSE(full.about_who);
  CHECK(says(full.status, "serves 2 jobs already, its limit (--max-jobs 2)"));
  CHECK(local::admit(admission, "train", owner).status.ok());
}

}  // namespace test_service_local_admission
