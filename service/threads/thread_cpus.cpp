#include "service/threads/thread_cpus.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "common/cpu_list.h"
#include "common/log.h"

namespace ringsync::service::threads {

namespace {

// A CPU set sized at run time (CPU_ALLOC): a kernel built for more CPUs than
// cpu_set_t holds refuses to report affinity into a fixed 1024-bit set.
class CpuMask {
 public:
  explicit CpuMask(int cpus) : cpus_(cpus), bytes_(CPU_ALLOC_SIZE(cpus)), set_(CPU_ALLOC(cpus)) {
    if (set_ != nullptr) CPU_ZERO_S(bytes_, set_);
  }
  ~CpuMask() {
    if (set_ != nullptr) CPU_FREE(set_);
  }
  CpuMask(CpuMask&& other) noexcept
      : cpus_(other.cpus_), bytes_(other.bytes_), set_(std::exchange(other.set_, nullptr)) {}
  CpuMask(const CpuMask&) = delete;
  CpuMask& operator=(const CpuMask&) = delete;
  CpuMask& operator=(CpuMask&&) = delete;

  // A mask naming `cpus` (each below kMaxCpu + 1).
  static CpuMask of(const std::vector<int>& cpus) {
    CpuMask mask(cpus.empty() ? 1 : cpus.back() + 1);
    for (int c : cpus) mask.add(c);
    return mask;
  }

  bool ok() const { return set_ != nullptr; }
  void add(int cpu) {
    if (set_ != nullptr && cpu >= 0 && cpu < cpus_) CPU_SET_S(static_cast<std::size_t>(cpu), bytes_, set_);
  }
  std::vector<int> list() const {
    std::vector<int> out;
    for (int c = 0; set_ != nullptr && c < cpus_; ++c)
      if (CPU_ISSET_S(static_cast<std::size_t>(c), bytes_, set_)) out.push_back(c);
    return out;
  }
  // pthread_{get,set}affinity_np on the calling thread: 0 or an errno value.
  int read() { return ::pthread_getaffinity_np(::pthread_self(), bytes_, set_); }
  int apply() const { return ::pthread_setaffinity_np(::pthread_self(), bytes_, set_); }

 private:
  int cpus_;
  std::size_t bytes_;
  cpu_set_t* set_;
};

}  // namespace

Result<std::vector<int>> thread_cpus() {
  for (int cpus = 1024;; cpus *= 2) {
    CpuMask mask(cpus);
    if (!mask.ok()) return Status::Internal("cannot read this thread's CPUs: out of memory");
    const int rc = mask.read();
    if (rc == 0) return mask.list();
    // EINVAL: the kernel knows more CPUs than the mask holds.
    if (rc != EINVAL || cpus > kMaxCpu)
      return Status::Internal(std::string("cannot read this thread's CPUs: ") + std::strerror(rc));
  }
}

Status within(const std::vector<int>& cpus, const std::vector<int>& allowed) {
  for (int c : cpus)
    if (!std::binary_search(allowed.begin(), allowed.end(), c))
      return Status::InvalidArgument("CPU " + std::to_string(c) + " is not one ringsyncd may run on (" +
                                     format_cpu_list(allowed) + ")");
  return Status::Ok();
}

Status set_thread_cpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return Status::InvalidArgument("no CPUs to run on");
  auto allowed = thread_cpus();
  if (!allowed.ok()) return allowed.status();
  RINGSYNC_RETURN_IF_ERROR(within(cpus, *allowed));
  const CpuMask mask = CpuMask::of(cpus);
  if (!mask.ok()) return Status::Internal("cannot keep this thread on CPUs " + format_cpu_list(cpus) + ": out of memory");
  if (const int rc = mask.apply(); rc != 0)
    return Status::Internal("cannot keep this thread on CPUs " + format_cpu_list(cpus) + ": " + std::strerror(rc));
  return Status::Ok();
}

ThreadCpusScope::ThreadCpusScope(const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  auto now = thread_cpus();
  if (!now.ok() || *now == cpus) return;
  const CpuMask lend = CpuMask::of(cpus);
  // Fails only if the daemon's CPUs were taken from it meanwhile (a cgroup
  // change): the new thread then starts where the kernel allows, which is
  // correct, only less spread.
  if (!lend.ok() || lend.apply() != 0) {
    RS_LOG(warn, "daemon") << "could not lend CPUs " << format_cpu_list(cpus) << " to a new thread";
    return;
  }
  restore_ = std::move(now).value();
}

ThreadCpusScope::~ThreadCpusScope() {
  if (restore_.empty()) return;
  const CpuMask back = CpuMask::of(restore_);
  if (!back.ok() || back.apply() != 0)
    RS_LOG(warn, "daemon") << "could not put the control thread back on CPUs " << format_cpu_list(restore_)
                           << "; it runs on every CPU of the daemon from now on";
}

}  // namespace ringsync::service::threads
