#include "cuda/device_chunk_copier.h"

#include <string>

namespace ringsync::cuda {

Result<std::unique_ptr<DeviceChunkCopier>> DeviceChunkCopier::create(int device) {
  auto stream = Stream::create(device);
  if (!stream.ok()) return stream.status();
  auto notify = Stream::create(device);
  if (!notify.ok()) return notify.status();
  return std::unique_ptr<DeviceChunkCopier>(
      new DeviceChunkCopier(device, std::move(stream).value(), std::move(notify).value()));
}

DeviceChunkCopier::~DeviceChunkCopier() {
  // Host callbacks still queued point at this object.
  (void)stream_.synchronize();
  (void)notify_.synchronize();
}

Result<Event> DeviceChunkCopier::take_event() {
  if (spare_events_.empty()) return Event::create(device_);
  Event event = std::move(spare_events_.back());
  spare_events_.pop_back();
  return event;
}

Status DeviceChunkCopier::submit(std::uint64_t ticket, Direction direction, void* dst,
                                 const void* src, std::size_t bytes) {
  auto event = take_event();
  if (!event.ok()) return event.status();
  Status queued = direction == Direction::kToHost ? copy_to_host(dst, src, bytes, stream_)
                                                  : copy_to_device(dst, src, bytes, stream_);
  if (queued.ok()) queued = event->record(stream_);
  if (queued.ok() && wakeup_) queued = notify_.wait(*event);
  if (queued.ok() && wakeup_) queued = launch_host_callback(notify_, &on_copied, this);
  if (!queued.ok()) {
    // The copy may be queued even though a later step failed: the caller reuses
    // these buffers once told of the failure, so nothing may still be writing them.
    (void)stream_.synchronize();
    (void)notify_.synchronize();
    return queued;
  }
  in_flight_.push_back({ticket, std::move(event).value()});
  return Status::Ok();
}

void DeviceChunkCopier::on_copied(void* self) {
  auto* copier = static_cast<DeviceChunkCopier*>(self);
  copier->wakeup_();
}

void DeviceChunkCopier::poll(std::vector<Done>& done) {
  while (!in_flight_.empty()) {
    auto finished = in_flight_.front().event.query();
    if (finished.ok() && !*finished) return;  // the rest are behind it on the stream
    done.push_back({in_flight_.front().ticket, finished.status()});
    if (finished.ok()) spare_events_.push_back(std::move(in_flight_.front().event));
    in_flight_.pop_front();
  }
}

}  // namespace ringsync::cuda
