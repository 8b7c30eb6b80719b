// Where the daemon's threads run (--control-cpus). The control thread
// busy-polls the trainers' channels and the peer links after every small
// collective, and each step of a small allreduce waits until it runs: on a
// core no trainer polls on, it runs at once. Only it is bound. The ring's
// thread, the reduce pool and the threads libraries start keep every CPU the
// daemon was given (the control CPUs too: the ring's thread is busy when the
// control thread waits for it). A thread inherits its creator's CPUs, so the
// control thread creates them inside a ThreadCpusScope that lends it the
// daemon's CPUs for the moment. The CPUs are taken once, at start: a cpuset
// change later (which on cgroup v1 resets every thread's CPUs) undoes it.
#pragma once

#include <vector>

#include "common/status.h"

namespace ringsync::service::threads {

// The CPUs the calling thread may run on.
Result<std::vector<int>> thread_cpus();

// Ok when every one of `cpus` is in `allowed` (both sorted); otherwise an
// InvalidArgument naming the first that is not, and what is allowed.
Status within(const std::vector<int>& cpus, const std::vector<int>& allowed);

// Keeps the calling thread on `cpus` (sorted, distinct); threads it creates
// from now on start there too. Every CPU must be one the thread may use now:
// otherwise an InvalidArgument names it and nothing changes.
Status set_thread_cpus(const std::vector<int>& cpus);

// While alive, the calling thread runs on `cpus`, so that threads created
// meanwhile start there; then it is back where it was. Empty `cpus`: nothing.
class ThreadCpusScope {
 public:
  explicit ThreadCpusScope(const std::vector<int>& cpus);
  ~ThreadCpusScope();
  ThreadCpusScope(const ThreadCpusScope&) = delete;
  ThreadCpusScope& operator=(const ThreadCpusScope&) = delete;

 private:
  std::vector<int> restore_;
};

}  // namespace ringsync::service::threads
