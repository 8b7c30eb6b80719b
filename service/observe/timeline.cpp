#include "service/observe/timeline.h"

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <system_error>

#include "common/log.h"
#include "common/utf8.h"

namespace ringsync::service::observe {
namespace {

constexpr std::string_view kOtherLaneName = "(other tensors)";

// `text` as a JSON string literal. Valid UTF-8 passes through; bytes that are
// not (tensor names come from trainers) become U+FFFD so the file stays
// parseable by strict readers.
void append_json_string(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (std::size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 0xF];
        } else {
          const std::size_t len = text::utf8_sequence_length(text, i);
          if (len == 0) {
            out += "\\ufffd";
          } else {
            out.append(text.substr(i, len));
            i += len;
            continue;
          }
        }
    }
    ++i;
  }
  out += '"';
}

template <typename Int>
void append_int(std::string& out, Int value) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof(buf), value);
  out.append(buf, r.ptr);
}

// Microseconds with nanosecond digits, "1234.567", from a signed count of ns.
void append_micros(std::string& out, std::int64_t ns) {
  if (ns < 0) {
    out += '-';
    ns = -ns;
  }
  append_int(out, ns / 1000);
  const auto frac = static_cast<int>(ns % 1000);
  out += '.';
  out += static_cast<char>('0' + frac / 100);
  out += static_cast<char>('0' + frac / 10 % 10);
  out += static_cast<char>('0' + frac % 10);
}

std::int64_t nanos(Timeline::Clock::duration d) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
}

}  // namespace

Result<std::unique_ptr<Timeline>> Timeline::open(const std::string& path, std::uint32_t node_rank,
                                                 TimelineOptions options) {
  if (path.empty()) return Status::InvalidArgument("timeline path is empty; give --timeline a file path");
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Status::InvalidArgument("cannot create timeline file '" + path + "': " + std::strerror(errno) +
                                   " (check that its directory exists and is writable, or change --timeline)");
  }
  if (options.max_lanes == 0) options.max_lanes = 1;
  try {
    return std::unique_ptr<Timeline>(new Timeline(path, fd, node_rank, options));
  } catch (const std::system_error& e) {  // the writer thread could not start
    ::close(fd);
    return Status::Internal("cannot start the timeline writer for '" + path + "': " + e.what());
  }
}

Timeline::Timeline(std::string path, int fd, std::uint32_t node_rank, TimelineOptions options)
    : path_(std::move(path)),
      fd_(fd),
      node_rank_(node_rank),
      options_(options),
      origin_(Clock::now()) {
  // The process metadata opens the array, so every later event starts with
  // ",\n" and the file never holds a trailing comma.
  const std::string process = "ringsyncd node " + std::to_string(node_rank_);
  pending_ += "[\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":";
  append_int(pending_, node_rank_);
  pending_ += ",\"args\":{\"name\":";
  append_json_string(pending_, process);
  pending_ += "}},\n{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":";
  append_int(pending_, node_rank_);
  pending_ += ",\"args\":{\"sort_index\":";
  append_int(pending_, node_rank_);
  pending_ += "}}";
  // Each node's times start at its own open(); the wall clock at that moment
  // lets a reader line up the files of several nodes.
  begin_event_locked("timeline open", "i", 0);
  pending_ += ",\"s\":\"p\",\"ts\":0.000,\"args\":{\"unix_time_us\":";
  append_int(pending_, std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count());
  pending_ += "}}";
  writer_ = std::thread([this] { writer_loop(); });
}

Timeline::~Timeline() {
  const Status status = close();
  if (!status.ok()) RS_LOG(warn, "timeline") << status.message();
}

void Timeline::phase(std::string_view tensor, std::string_view phase, Clock::time_point start,
                     Clock::time_point end, const Args& args) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!admit_locked()) return;
  const std::uint32_t tid = lane_locked(tensor);
  begin_event_locked(phase, "X", tid);
  append_time(",\"ts\":", start);
  pending_ += ",\"dur\":";
  append_micros(pending_, end > start ? nanos(end - start) : 0);
  const bool shared_lane = tid == other_lane_;
  if (shared_lane || !args.empty()) {
    pending_ += ",\"args\":{";
    const char* sep = "";
    if (shared_lane) {
      pending_ += "\"tensor\":";
      append_json_string(pending_, tensor);
      sep = ",";
    }
    for (const auto& [key, value] : args) {
      pending_ += sep;
      append_json_string(pending_, key);
      pending_ += ':';
      append_json_string(pending_, value);
      sep = ",";
    }
    pending_ += '}';
  }
  pending_ += '}';
  notify_if_full_locked();
}

void Timeline::instant(std::string_view tensor, std::string_view what, Clock::time_point at) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!admit_locked()) return;
  const std::uint32_t tid = lane_locked(tensor);
  begin_event_locked(what, "i", tid);
  pending_ += ",\"s\":\"t\"";
  append_time(",\"ts\":", at);
  if (tid == other_lane_) {
    pending_ += ",\"args\":{\"tensor\":";
    append_json_string(pending_, tensor);
    pending_ += '}';
  }
  pending_ += '}';
  notify_if_full_locked();
}

bool Timeline::admit_locked() {
  if (closed_) return false;
  if (pending_.size() < options_.max_buffered_bytes) return true;
  ++dropped_;
  return false;
}

std::uint32_t Timeline::lane_locked(std::string_view tensor) {
  if (const auto it = lanes_.find(tensor); it != lanes_.end()) return it->second;
  if (lanes_.size() < options_.max_lanes) {
    const auto tid = static_cast<std::uint32_t>(lanes_.size() + 1);  // tid 0 is the process's own
    lanes_.emplace(std::string(tensor), tid);
    append_lane_metadata_locked(tid, tensor);
    return tid;
  }
  if (other_lane_ == 0) {
    other_lane_ = static_cast<std::uint32_t>(options_.max_lanes + 1);
    append_lane_metadata_locked(other_lane_, kOtherLaneName);
  }
  return other_lane_;
}

void Timeline::append_lane_metadata_locked(std::uint32_t tid, std::string_view name) {
  begin_event_locked("thread_name", "M", tid);
  pending_ += ",\"args\":{\"name\":";
  append_json_string(pending_, name);
  pending_ += "}}";
  // Lanes in the order tensors were first seen, not sorted by name.
  begin_event_locked("thread_sort_index", "M", tid);
  pending_ += ",\"args\":{\"sort_index\":";
  append_int(pending_, tid);
  pending_ += "}}";
}

void Timeline::begin_event_locked(std::string_view name, std::string_view ph, std::uint32_t tid) {
  pending_ += ",\n{\"name\":";
  append_json_string(pending_, name);
  pending_ += ",\"ph\":\"";
  pending_ += ph;
  pending_ += "\",\"pid\":";
  append_int(pending_, node_rank_);
  pending_ += ",\"tid\":";
  append_int(pending_, tid);
}

void Timeline::append_time(std::string_view key, Clock::time_point at) {
  pending_ += key;
  append_micros(pending_, nanos(at - origin_));
}

void Timeline::notify_if_full_locked() {
  if (pending_.size() >= options_.flush_bytes && !flush_requested_) {
    flush_requested_ = true;
    wake_writer_.notify_one();
  }
}

Status Timeline::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  const std::uint64_t target = taken_bytes_ + pending_.size();
  flush_requested_ = true;
  wake_writer_.notify_one();
  written_.wait(lock, [&] { return written_bytes_ >= target || writer_done_; });
  return write_status_;
}

Status Timeline::close() {
  std::call_once(close_once_, [this] {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      if (dropped_ > 0) {
        // Say in the trace itself that it has gaps.
        begin_event_locked("timeline dropped " + std::to_string(dropped_) + " events", "i", 0);
        pending_ += ",\"s\":\"p\"";
        append_time(",\"ts\":", Clock::now());
        pending_ += '}';
        RS_LOG(warn, "timeline") << "dropped " << dropped_ << " events because '" << path_
                                 << "' was written too slowly";
      }
      pending_ += "\n]\n";
      stopping_ = true;
      wake_writer_.notify_one();
    }
    writer_.join();
    close_status_ = write_status_;  // the writer is gone: no lock needed
    if (::close(fd_) != 0 && close_status_.ok()) {
      close_status_ = Status::Internal("cannot close timeline file '" + path_ + "': " + std::strerror(errno));
    }
  });
  return close_status_;
}

std::uint64_t Timeline::dropped_events() const {
  std::lock_guard<std::mutex> lock(mu_);
  return dropped_;
}

void Timeline::writer_loop() {
  ::pthread_setname_np(::pthread_self(), "rs-timeline");
  std::string batch;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_writer_.wait_for(lock, options_.flush_interval, [&] { return flush_requested_ || stopping_; });
    const bool last = stopping_;
    flush_requested_ = false;
    batch.clear();
    batch.swap(pending_);  // the recorders keep the old batch's capacity
    taken_bytes_ += batch.size();
    const bool failed = !write_status_.ok();
    lock.unlock();
    // After a write error the rest is discarded: a partial file already
    // lacks events, and retrying would stall on a full disk every batch.
    Status status = failed ? Status::Ok() : write_out(batch);
    lock.lock();
    if (!status.ok()) {
      RS_LOG(warn, "timeline") << status.message() << "; no further events are written";
      write_status_ = std::move(status);
    }
    written_bytes_ += batch.size();
    if (last && pending_.empty()) break;
    written_.notify_all();
  }
  writer_done_ = true;
  written_.notify_all();
}

Status Timeline::write_out(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::Internal("cannot write timeline file '" + path_ + "': " + std::strerror(errno));
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return Status::Ok();
}

}  // namespace ringsync::service::observe
