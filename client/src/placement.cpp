#include "client/src/placement.h"

#include <cstring>

namespace ringsync::client {
namespace {

Location shared_at(const wire::BufferRef& ref, void* ptr, std::size_t advance) {
  Location l;
  l.where = Location::Where::kShared;
  l.shared = wire::BufferRef{ref.buffer_id, ref.offset + advance};
  l.ptr = static_cast<std::byte*>(ptr) + advance;
  return l;
}

Location bounce_at(std::uint64_t offset) {
  Location l;
  l.where = Location::Where::kBounce;
  l.bounce_offset = offset;
  return l;
}

// Reduce-scatter, alltoall and scatter, whose input is not (or not only) the result's
// own slot: a bounced input goes to the start of the bounce buffer and a
// bounced output after it, except a reduce-scatter's, which stays in its slot of
// the bounced input (in place).
// A scatter's non-root passes no input (bytes.send == 0).
Result<Placement> place_apart(const CollectiveCall& call, const CallBytes& bytes, int rank,
                              const FindShared& find) {
  Placement p;
  auto recv_ref = find(call.recv, bytes.recv);
  if (!recv_ref.ok()) return recv_ref.status();
  std::optional<wire::BufferRef> send_ref;
  if (bytes.send > 0) {
    auto found = find(call.send, bytes.send);
    if (!found.ok()) return found.status();
    send_ref = *found;
  }
  std::size_t bounced = 0;
  if (send_ref) {
    p.send = shared_at(*send_ref, const_cast<void*>(call.send), 0);
  } else if (bytes.send > 0) {
    p.send = bounce_at(0);
    p.copy_in = CopyIn{static_cast<const std::byte*>(call.send), p.send, bytes.send};
    bounced = bytes.send;
  }
  if (*recv_ref) {
    p.recv = shared_at(**recv_ref, call.recv, 0);
  } else {
    std::size_t at = bounced;
    if (wire::traits(call.kind).in_place == wire::InPlace::kRecvIsOwnSlot && bytes.send > 0 && !send_ref)
      at = static_cast<std::size_t>(rank) * bytes.recv;
    else
      bounced += bytes.recv;
    p.recv = bounce_at(at);
    p.copy_out = CopyOut{at, static_cast<std::byte*>(call.recv), bytes.recv};
  }
  p.bounce_bytes = bounced;
  return p;
}

// A non-root's reduce or gather: an input, and no output.
Result<Placement> place_input_only(const CollectiveCall& call, const CallBytes& bytes, const FindShared& find) {
  Placement p;
  auto send_ref = find(call.send, bytes.send);
  if (!send_ref.ok()) return send_ref.status();
  if (*send_ref) {
    p.send = shared_at(**send_ref, const_cast<void*>(call.send), 0);
    return p;
  }
  p.send = bounce_at(0);
  p.copy_in = CopyIn{static_cast<const std::byte*>(call.send), p.send, bytes.send};
  p.bounce_bytes = bytes.send;
  return p;
}

}  // namespace

Result<Placement> place(const CollectiveCall& call, const CallBytes& bytes, int rank,
                        const FindShared& find) {
  Placement p;
  if (bytes.recv == 0 && bytes.send == 0) return p;  // barrier or zero elements: no buffers at all
  // Inputs with a block per rank: the send and receive buffers are placed apart.
  if (wire::traits(call.kind).send_per_rank) return place_apart(call, bytes, rank, find);
  if (bytes.recv == 0) return place_input_only(call, bytes, find);

  const bool has_send = reads_send(call, rank);
  auto recv_ref = find(call.recv, bytes.recv);
  if (!recv_ref.ok()) return recv_ref.status();
  std::optional<wire::BufferRef> send_ref;
  if (has_send) {
    auto found = find(call.send, bytes.send);
    if (!found.ok()) return found.status();
    send_ref = *found;
  }
  // Where this rank's own contribution sits inside the result: its slot for
  // allgather, the whole buffer otherwise. Data copied in goes there, so that the
  // collective runs in place.
  const std::size_t slot = wire::traits(call.kind).in_place == wire::InPlace::kSendIsOwnSlot
                               ? static_cast<std::size_t>(rank) * bytes.send
                               : 0;
  const auto* send_bytes = static_cast<const std::byte*>(call.send);

  if (*recv_ref) {
    p.recv = shared_at(**recv_ref, call.recv, 0);
    if (!has_send) return p;
    if (send_ref) {
      p.send = shared_at(*send_ref, const_cast<void*>(call.send), 0);
    } else {
      p.send = shared_at(**recv_ref, call.recv, slot);
      p.copy_in = CopyIn{send_bytes, p.send, bytes.send};
    }
    return p;
  }

  p.bounce_bytes = bytes.recv;
  p.recv = bounce_at(0);
  // A root broadcasting in place already holds the result.
  const bool result_in_place =
      wire::traits(call.kind).senders == wire::Senders::kRoot && has_send && call.send == call.recv;
  if (!result_in_place) p.copy_out = CopyOut{0, static_cast<std::byte*>(call.recv), bytes.recv};
  if (!has_send) return p;
  if (send_ref) {
    p.send = shared_at(*send_ref, const_cast<void*>(call.send), 0);
  } else {
    p.send = bounce_at(slot);
    p.copy_in = CopyIn{send_bytes, p.send, bytes.send};
  }
  return p;
}

wire::BufferRef buffer_ref(const Location& where, std::uint32_t bounce_id) {
  switch (where.where) {
    case Location::Where::kNone: return {};
    case Location::Where::kShared: return where.shared;
    case Location::Where::kBounce: return {bounce_id, where.bounce_offset};
  }
  return {};
}

void apply_copy_in(const Placement& placement, std::byte* bounce) {
  if (!placement.copy_in) return;
  const CopyIn& c = *placement.copy_in;
  std::byte* to = c.to.where == Location::Where::kShared ? c.to.ptr : bounce + c.to.bounce_offset;
  if (to != c.from) std::memmove(to, c.from, c.bytes);
}

void apply_copy_out(const Placement& placement, const std::byte* bounce) {
  if (!placement.copy_out) return;
  const CopyOut& c = *placement.copy_out;
  std::memcpy(c.to, bounce + c.bounce_offset, c.bytes);
}

}  // namespace ringsync::client
