// A per-node timeline of collective phases in Chrome's Trace Event Format, for
// chrome://tracing and ui.perfetto.dev (the idea of Horovod's timeline):
//
//   [
//   {"name":"process_name","ph":"M","pid":1,"args":{"name":"ringsyncd node 1"}},
//   {"name":"thread_name","ph":"M","pid":1,"tid":1,"args":{"name":"grad/w"}},
//   {"name":"REDUCE_SCATTER","ph":"X","pid":1,"tid":1,"ts":1000.000,"dur":250.500},
//   ...
//   ]
//
// One process (pid = node rank) per file, one lane (tid) per tensor name, named
// the first time the tensor is seen. Times are microseconds since open().
//
// Recording formats the event into an in-memory buffer under a mutex; a writer
// thread owns the file and writes the buffer out in batches: when it passes
// flush_bytes, every flush_interval, on flush() and on close(). The file is a
// valid JSON array after close(); before that it lacks only the closing "]",
// which the trace format allows, so a crashed daemon's timeline still loads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"

namespace ringsync::service::observe {

struct TimelineOptions {
  // Tensor names that get a lane of their own; events of later new names share
  // one "(other tensors)" lane and carry the name in args.tensor. Bounds the
  // lane table when a job invents names without end.
  std::size_t max_lanes = 4096;
  // The writer is woken once this much is buffered...
  std::size_t flush_bytes = 64 * 1024;
  // ...and at least this often while anything is.
  std::chrono::milliseconds flush_interval{1000};
  // Events recorded while this much is still unwritten (a stalled disk) are
  // dropped and counted, so a slow file cannot grow the daemon's memory.
  std::size_t max_buffered_bytes = 16 * 1024 * 1024;
};

class Timeline {
 public:
  using Clock = std::chrono::steady_clock;
  using Args = std::vector<std::pair<std::string, std::string>>;

  // Creates (truncates) `path` and writes the array's opening and the process
  // metadata. Fails, naming the path and the reason, when the file cannot be
  // created.
  static Result<std::unique_ptr<Timeline>> open(const std::string& path, std::uint32_t node_rank,
                                                TimelineOptions options = {});

  // A complete event ("ph":"X") named `phase` on `tensor`'s lane. An end
  // before start is recorded with zero duration. Args values are strings.
  void phase(std::string_view tensor, std::string_view phase, Clock::time_point start,
             Clock::time_point end, const Args& args = {});
  // A thread-scoped instant event ("ph":"i") named `what` on `tensor`'s lane.
  void instant(std::string_view tensor, std::string_view what, Clock::time_point at);

  // Returns once everything recorded before the call is written to the file
  // (not fsync'ed). The status of the file so far.
  Status flush();
  // Writes what is buffered and the closing "]", closes the file and stops the
  // writer. Later events are ignored. Safe to call twice; the first call's
  // status is returned again.
  Status close();
  ~Timeline();  // close(); an error is logged

  // Time zero of the file's timestamps.
  Clock::time_point origin() const { return origin_; }
  const std::string& path() const { return path_; }
  std::uint64_t dropped_events() const;

  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

 private:
  struct NameHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };

  Timeline(std::string path, int fd, std::uint32_t node_rank, TimelineOptions options);

  // Under mu_: room for one more event? Counts it as dropped if not.
  bool admit_locked();
  // Under mu_: the lane of `tensor`, emitting its metadata when new.
  std::uint32_t lane_locked(std::string_view tensor);
  void append_lane_metadata_locked(std::uint32_t tid, std::string_view name);
  // Under mu_: starts the event's JSON object up to and including "tid".
  void begin_event_locked(std::string_view name, std::string_view ph, std::uint32_t tid);
  void append_time(std::string_view key, Clock::time_point at);
  void notify_if_full_locked();

  void writer_loop();
  Status write_out(std::string_view bytes);

  const std::string path_;
  const int fd_;
  const std::uint32_t node_rank_;
  const TimelineOptions options_;
  const Clock::time_point origin_;

  mutable std::mutex mu_;
  std::condition_variable wake_writer_;
  std::condition_variable written_;
  std::string pending_;              // recorded, not yet taken by the writer
  std::uint64_t taken_bytes_ = 0;    // total the writer has taken from pending_
  std::uint64_t written_bytes_ = 0;  // total the writer has finished with
  bool flush_requested_ = false;
  bool stopping_ = false;     // close(): drain and exit
  bool writer_done_ = false;
  bool closed_ = false;       // events are ignored
  std::uint64_t dropped_ = 0;
  Status write_status_;       // the first write error
  std::unordered_map<std::string, std::uint32_t, NameHash, std::equal_to<>> lanes_;
  std::uint32_t other_lane_ = 0;  // 0 until the first overflow

  std::once_flag close_once_;
  Status close_status_;
  std::thread writer_;  // last: starts once everything above exists
};

}  // namespace ringsync::service::observe
