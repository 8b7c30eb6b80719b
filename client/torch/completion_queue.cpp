#include "client/torch/completion_queue.h"

#include <condition_variable>
#include <deque>
#include <utility>

namespace ringsync::torch_backend {
namespace {

using Clock = std::chrono::steady_clock;

// How long one rs_wait_timeout() may block before the thread looks whether it is
// being closed. Not a limit on collectives: an unfinished one is simply waited again.
constexpr int kWaitSliceMs = 200;

struct Entry {
  std::vector<rs_request_t*> requests;
  std::size_t next = 0;  // requests[0, next) have completed (and are freed)
  Outcome outcome;
  CompletionQueue::Done done;
};

Outcome closed_outcome() {
  return Outcome{RS_CLOSED,
                 "the ringsync process group was closed (destroy_process_group(), or the "
                 "process exiting) before this collective completed"};
}

}  // namespace

struct CompletionQueue::State {
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Entry> entries;
  bool closing = false;
  Clock::time_point give_up_at = Clock::time_point::max();
  std::size_t abandoned = 0;

  bool past_deadline() {
    std::lock_guard<std::mutex> lock(mutex);
    return closing && Clock::now() >= give_up_at;
  }

  // Waits for the entry's requests; false when closing ran past its deadline first.
  bool wait_for(Entry& entry) {
    for (; entry.next < entry.requests.size(); ++entry.next) {
      for (;;) {
        const rs_status_t status = rs_wait_timeout(entry.requests[entry.next], kWaitSliceMs);
        if (status == RS_IN_PROGRESS) {
          if (past_deadline()) return false;
          continue;
        }
        // The request is freed. Keep waiting for the others even after a failure:
        // the daemon may still be writing their buffers.
        if (status != RS_SUCCESS && entry.outcome.ok())
          entry.outcome = Outcome{status, rs_last_error()};
        break;
      }
    }
    return true;
  }

  void abandon(Entry& entry) {
    for (std::size_t i = entry.next; i < entry.requests.size(); ++i)
      rs_request_free(entry.requests[i]);
    entry.done(closed_outcome());
    // Deliberately leaked: the tensors it holds stay valid for the daemon to write.
    new Done(std::move(entry.done));
    std::lock_guard<std::mutex> lock(mutex);
    ++abandoned;
  }

  void run() {
    for (;;) {
      Entry entry;
      {
        std::unique_lock<std::mutex> lock(mutex);
        wake.wait(lock, [&] { return !entries.empty() || closing; });
        if (entries.empty()) return;
        entry = std::move(entries.front());
        entries.pop_front();
      }
      if (wait_for(entry)) {
        entry.done(entry.outcome);
        continue;
      }
      abandon(entry);
      std::deque<Entry> rest;
      {
        std::lock_guard<std::mutex> lock(mutex);
        rest.swap(entries);
      }
      for (auto& e : rest) abandon(e);
      return;
    }
  }
};

CompletionQueue::CompletionQueue() : state_(std::make_shared<State>()) {
  thread_ = std::thread([state = state_] { state->run(); });
}

CompletionQueue::~CompletionQueue() { detach(); }

void CompletionQueue::push(std::vector<rs_request_t*> requests, Done done) {
  Entry entry{std::move(requests), 0, Outcome{}, std::move(done)};
  {
    std::lock_guard<std::mutex> lock(state_->mutex);
    if (!state_->closing) {
      state_->entries.push_back(std::move(entry));
      state_->wake.notify_one();
      return;
    }
  }
  state_->abandon(entry);
}

void CompletionQueue::stop(std::chrono::milliseconds drain) {
  std::lock_guard<std::mutex> lock(state_->mutex);
  if (state_->closing) return;
  state_->closing = true;
  state_->give_up_at = Clock::now() + drain;
  state_->wake.notify_all();
}

std::size_t CompletionQueue::close(std::chrono::milliseconds drain) {
  stop(drain);
  std::call_once(stopped_, [&] {
    if (thread_.get_id() != std::this_thread::get_id()) thread_.join();
    else thread_.detach();  // a Done closing its own process group
  });
  std::lock_guard<std::mutex> lock(state_->mutex);
  return state_->abandoned;
}

void CompletionQueue::detach(std::chrono::milliseconds drain) {
  stop(drain);
  std::call_once(stopped_, [&] { thread_.detach(); });
}

}  // namespace ringsync::torch_backend
