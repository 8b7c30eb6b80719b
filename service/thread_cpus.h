// Where the daemon's threads run (--control-cpus). The control thread
// busy-polls the trainers' channels and the peer links after every small
// collective; on a core of its own it answers them without waiting for the
// scheduler. The ring's thread, the reduce pool and the threads libraries
// start stay on every CPU the daemon was given: a thread inherits its
// creator's CPUs, so the control thread creates them inside a ThreadCpusScope
// that lends it the daemon's CPUs for the moment.
#pragma once

#include <vector>

#include "common/status.h"

namespace ringsync::service {

// The CPUs the calling thread may run on.
Result<std::vector<int>> thread_cpus();

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

}  // namespace ringsync::service
