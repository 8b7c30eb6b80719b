#include "service/execution/ring_engine.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "common/log.h"

namespace ringsync::service::execution {

namespace {
// Idle polling rounds, while tasks are in flight, before sleeping on the event
// fd. Each round is a UCX progress (over tcp, an epoll_wait). A few catch the
// next chunk without a wake-up; 200 kept 8 daemons on 2 vCPUs polling instead
// of copying (8 hosts, 64 MiB shaped: 1.28-1.42x the law, 1.08-1.12x with 20).
constexpr int kSpinRounds = 20;
// Sleep bound for transports without an event fd (in-process, for tests).
constexpr int kNoFdSleepMs = 1;
}  // namespace

RingEngine::RingEngine(std::unique_ptr<transport::Transport> transport, Deliver deliver,
                       std::chrono::nanoseconds idle_poll)
    : transport_(std::move(transport)),
      deliver_(std::move(deliver)),
      nodes_(transport_->size()),
      rank_(transport_->rank()),
      idle_poll_(idle_poll) {
  wake_fd_->fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd_->fd < 0)  // out of descriptors: wake() cannot reach the thread, so it polls
    RS_LOG(error, "ring") << "cannot create the data-plane thread's wake-up eventfd (" << std::strerror(errno)
                          << "); it checks for work every " << kNoFdSleepMs
                          << " ms instead. Raise the open-file limit (ulimit -n)";
  thread_ = std::thread([this] { loop(); });
}

RingEngine::~RingEngine() {
  abort(Status::Closed("the ring is being torn down"));
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake();
  thread_.join();
  transport_.reset();
  std::lock_guard lock(wake_fd_->mu);
  if (wake_fd_->fd >= 0) ::close(wake_fd_->fd);
  wake_fd_->fd = -1;
}

void RingEngine::run(MakeTask make, Done done) {
  outstanding_.fetch_add(1, std::memory_order_acq_rel);
  {
    std::lock_guard lock(mu_);
    commands_.push_back({std::move(make), std::move(done)});
  }
  wake();
}

void RingEngine::abort(const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (aborted_) return;
    aborted_ = why;
  }
  wake();
}

void RingEngine::WakeFd::wake() {
  std::lock_guard lock(mu);
  if (fd < 0) return;
  const std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(fd, &one, sizeof(one));
}

void RingEngine::wake() { wake_fd_->wake(); }

std::function<void()> RingEngine::waker() const {
  return [wake_fd = wake_fd_] { wake_fd->wake(); };
}

void RingEngine::take_commands() {
  std::deque<Command> commands;
  std::optional<Status> aborted;
  {
    std::lock_guard lock(mu_);
    commands.swap(commands_);
    aborted = aborted_;
  }
  if (aborted && !cancelled_transport_) {
    // Tasks stop posting; cancel_all completes what they posted, so their
    // buffers are free once they report kError below.
    for (auto& item : items_) item.task->abort(*aborted);
    transport_->cancel_all(*aborted);
    cancelled_transport_ = true;
  }
  for (auto& c : commands) {
    if (aborted) {
      outstanding_.fetch_sub(1, std::memory_order_acq_rel);
      deliver_([done = std::move(c.done), why = *aborted] { done(why); });
      continue;
    }
    Item item{c.make(*transport_), std::move(c.done)};
    Status posted = item.task->post();
    if (!posted.ok()) {
      outstanding_.fetch_sub(1, std::memory_order_acq_rel);
      deliver_([done = std::move(item.done), posted] { done(posted); });
      continue;
    }
    items_.push_back(std::move(item));
  }
}

bool RingEngine::progress_tasks() {
  bool any = false;
  for (std::size_t i = 0; i < items_.size();) {
    const ring::TaskState state = items_[i].task->progress();
    if (state == ring::TaskState::kInProgress) {
      ++i;
      continue;
    }
    any = true;
    Status outcome = state == ring::TaskState::kDone ? Status::Ok() : items_[i].task->status();
    outstanding_.fetch_sub(1, std::memory_order_acq_rel);
    deliver_([done = std::move(items_[i].done), outcome] { done(outcome); });
    items_.erase(items_.begin() + static_cast<std::ptrdiff_t>(i));
  }
  return any;
}

void RingEngine::loop() {
  ::pthread_setname_np(::pthread_self(), "rs-ring");  // in top -H, perf, /proc
  int idle = 0;
  std::chrono::steady_clock::time_point last_busy{};
  bool slept_out = false;  // the last sleep ended at its bound, with tasks in flight
  for (;;) {
    {
      std::lock_guard lock(mu_);
      if (stopping_ && commands_.empty() && items_.empty()) break;
    }
    take_commands();
    bool busy = transport_->progress();
    if (busy && slept_out) missed_wakeups_.fetch_add(1, std::memory_order_relaxed);
    slept_out = false;
    busy = progress_tasks() || busy;
    if (busy) {
      idle = 0;
      last_busy = std::chrono::steady_clock::now();
      continue;
    }
    if (items_.empty() && !cancelled_transport_ && idle_poll_.count() > 0 &&
        std::chrono::steady_clock::now() - last_busy < idle_poll_) {
      std::this_thread::yield();  // the next operation's first messages come from the peers
      continue;
    }
    if (items_.empty() && cancelled_transport_) {
      // Nothing can complete any more; wait for commands (to refuse) or stop.
    } else if (++idle < kSpinRounds && !items_.empty()) {
      continue;
    }
    idle = 0;
    const int fd = cancelled_transport_ ? -1 : transport_->event_fd();
    if (fd >= 0 && !transport_->arm()) continue;  // work arrived while arming
    pollfd fds[2] = {{wake_fd_->fd, POLLIN, 0}, {fd, POLLIN, 0}};
    // Without a wake-up fd, commands are seen only by polling: never block.
    // With tasks in flight, never without a bound (see the header).
    const bool wakeable = wake_fd_->fd >= 0;
    const int timeout = !wakeable || (fd < 0 && !items_.empty()) ? kNoFdSleepMs
                        : items_.empty()                          ? -1
                                                                  : static_cast<int>(kInFlightSleep.count());
    const int n = ::poll(fds, fd >= 0 ? 2 : 1, timeout);
    if (n < 0 && errno != EINTR) {
      RS_LOG(error, "ring") << "poll failed: " << std::strerror(errno);
    }
    slept_out = n == 0 && fd >= 0 && !items_.empty();
    if (wakeable && (fds[0].revents & POLLIN)) {
      std::uint64_t count = 0;
      [[maybe_unused]] ssize_t r = ::read(wake_fd_->fd, &count, sizeof(count));
    }
  }
}

}  // namespace ringsync::service::execution
