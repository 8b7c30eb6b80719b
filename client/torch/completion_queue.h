// The progress of a process group's collectives. libringsync starts no threads:
// a request advances only while some thread waits on it. So that a Work completes
// while the trainer computes (DDP overlaps its allreduces with the backward pass),
// one thread per process group waits on the requests in submission order (the
// order torch.distributed makes every rank issue them in) and reports each outcome.
//
// Plain C++ over the C ABI, no torch: the Work that an outcome completes is the
// caller's business (the Done callback).
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ringsync/ringsync.h"

namespace ringsync::torch_backend {

// How a collective ended: RS_SUCCESS, or the first failure among its requests
// with the library's message (rs_last_error() of the waiting thread).
struct Outcome {
  rs_status_t status = RS_SUCCESS;
  std::string message;

  bool ok() const { return status == RS_SUCCESS; }
};

class CompletionQueue {
 public:
  using Done = std::function<void(const Outcome&)>;

  CompletionQueue();
  ~CompletionQueue();  // detach() with the default drain
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Takes the requests of one collective (waited on and freed here, never by the
  // caller) and calls `done` on the queue's thread once every one of them has
  // completed. After close(), `done` is called at once with RS_CLOSED.
  void push(std::vector<rs_request_t*> requests, Done done);

  // Takes no more work and gives the collectives queued up to `drain` to finish.
  // Those still pending then are abandoned (rs_request_free): their Done gets
  // RS_CLOSED and is kept alive, never destroyed, because what it holds (the
  // tensors) may still be written by the daemon until the connection closes.
  //
  // close() waits for that and returns how many were abandoned. Call it without
  // holding a lock that a Done may need (for torch: not holding the GIL, since a
  // future's Python callbacks run in Done). detach() only starts it: the thread
  // finishes on its own, so a destructor that may hold the GIL can call it.
  // Both are idempotent.
  static constexpr std::chrono::milliseconds kDefaultDrain{10000};
  std::size_t close(std::chrono::milliseconds drain = kDefaultDrain);
  void detach(std::chrono::milliseconds drain = kDefaultDrain);

 private:
  struct State;  // shared with the thread, which may outlive this object after detach()

  void stop(std::chrono::milliseconds drain);

  std::shared_ptr<State> state_;
  std::thread thread_;
  std::once_flag stopped_;
};

}  // namespace ringsync::torch_backend
