#include "service/thread_cpus.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "common/cpu_list.h"
#include "common/log.h"

namespace ringsync::service {

Result<std::vector<int>> thread_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (const int rc = ::pthread_getaffinity_np(::pthread_self(), sizeof set, &set); rc != 0)
    return Status::Internal(std::string("cannot read this thread's CPUs: ") + std::strerror(rc));
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  return cpus;
}

Status set_thread_cpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return Status::InvalidArgument("no CPUs to run on");
  auto allowed = thread_cpus();
  if (!allowed.ok()) return allowed.status();
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE || !std::binary_search(allowed->begin(), allowed->end(), c))
      return Status::InvalidArgument("CPU " + std::to_string(c) + " is not one ringsyncd may run on (" +
                                     format_cpu_list(*allowed) + ")");
    CPU_SET(c, &set);
  }
  if (const int rc = ::pthread_setaffinity_np(::pthread_self(), sizeof set, &set); rc != 0)
    return Status::Internal("cannot keep this thread on CPUs " + format_cpu_list(cpus) + ": " + std::strerror(rc));
  return Status::Ok();
}

ThreadCpusScope::ThreadCpusScope(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  auto now = thread_cpus();
  if (!now.ok()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : cpus)
    if (c >= 0 && c < CPU_SETSIZE) CPU_SET(c, &set);
  // Lending more CPUs than the thread has: its own restriction never takes any
  // away from the daemon, so this fails only if the daemon's CPUs were taken
  // from it meanwhile (a cgroup change); the new thread then starts where the
  // kernel allows, which is correct, only less spread.
  if (::pthread_setaffinity_np(::pthread_self(), sizeof set, &set) != 0) {
    RS_LOG(debug, "daemon") << "could not lend CPUs " << format_cpu_list(cpus) << " to a new thread";
    return;
  }
  restore_ = std::move(now).value();
}

ThreadCpusScope::~ThreadCpusScope() {
  if (restore_.empty()) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int c : restore_) CPU_SET(c, &set);
  (void)::pthread_setaffinity_np(::pthread_self(), sizeof set, &set);
}

}  // namespace ringsync::service
