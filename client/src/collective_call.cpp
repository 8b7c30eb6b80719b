#include "client/src/collective_call.h"

#include <cstring>
#include <limits>

namespace ringsync::client {
namespace {

constexpr std::size_t kMaxSize = std::numeric_limits<std::size_t>::max();

std::string kind_name(const CollectiveCall& call) { return wire::collective_kind_name(call.kind); }

}  // namespace

bool reads_send(const CollectiveCall& call, int rank) {
  return wire::reads_send(call.kind, static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(call.root));
}

wire::Collective to_message(const CollectiveCall& call, std::uint64_t request_id) {
  wire::Collective message;
  message.request_id = request_id;
  message.kind = call.kind;
  message.name = call.name;
  const wire::KindTraits& kind = wire::traits(call.kind);
  message.dtype = static_cast<DType>(wire::moves_data(call.kind) ? call.dtype : 0);
  message.op = static_cast<ReduceOp>(kind.reduces ? call.op : 0);
  message.count = call.count;
  message.root = static_cast<std::uint32_t>(kind.rooted ? call.root : 0);
  return message;
}

Result<CallBytes> validate(const CollectiveCall& call, int rank, int size) {
  const std::string what = kind_name(call);
  if (!call.name)
    return Status::InvalidArgument(what +
                                   ": the tensor name is NULL; pass the name every local "
                                   "rank uses for this collective");
  const std::size_t name_bytes = std::strlen(call.name);
  if (name_bytes == 0)
    return Status::InvalidArgument(what +
                                   ": the tensor name is empty; pass the name every local "
                                   "rank uses for this collective");
  if (name_bytes > kMaxNameBytes)
    return Status::InvalidArgument(what + ": the tensor name is " + std::to_string(name_bytes) +
                                   " bytes long; the limit is " + std::to_string(kMaxNameBytes));
  const wire::KindTraits& kind = wire::traits(call.kind);
  if (!wire::moves_data(call.kind)) return CallBytes{};

  if (call.dtype < 0 || call.dtype >= kNumDTypes)
    return Status::InvalidArgument(what + " '" + call.name + "': unknown dtype " +
                                   std::to_string(call.dtype) + "; use one of RS_F32..RS_U8");
  if (kind.reduces && (call.op < 0 || call.op >= kNumReduceOps))
    return Status::InvalidArgument(what + " '" + call.name + "': unknown reduce op " +
                                   std::to_string(call.op) + "; use one of RS_SUM..RS_PROD");
  if (kind.rooted && (call.root < 0 || call.root >= size))
    return Status::InvalidArgument(
        what + " '" + call.name + "': root " + std::to_string(call.root) +
        " is not a local rank; ranks are 0.." + std::to_string(size - 1));

  const std::size_t element = dtype_size(static_cast<DType>(call.dtype));
  CallBytes bytes;
  if (call.count > kMaxSize / element)
    return Status::InvalidArgument(what + " '" + call.name + "': " + std::to_string(call.count) +
                                   " elements of " + std::to_string(element) +
                                   " bytes overflow the address space");
  const bool per_rank = kind.send_per_rank || kind.recv_per_rank;
  if (per_rank && call.count * element > kMaxSize / static_cast<std::size_t>(size))
    return Status::InvalidArgument(what + " '" + call.name + "': " + std::to_string(call.count) +
                                   " elements for each of " + std::to_string(size) +
                                   " ranks overflow the address space");
  const wire::Extent extent = wire::extent(call.kind, call.count, static_cast<std::uint64_t>(size));
  if (extent.payload() == 0) return bytes;
  // A buffer this rank's part does not use counts nothing (a non-root's
  // broadcast or scatter input, a non-root's reduce or gather output).
  const bool reads = reads_send(call, rank);
  const bool writes = wire::writes_recv(call.kind, static_cast<std::uint64_t>(rank), static_cast<std::uint64_t>(call.root));
  bytes.send = reads ? extent.send * element : 0;
  bytes.recv = writes ? extent.recv * element : 0;

  if (reads && !call.send)
    return Status::InvalidArgument(what + " '" + call.name + "': sendbuf is NULL but count is " +
                                   std::to_string(call.count));
  if (writes && !call.recv)
    return Status::InvalidArgument(what + " '" + call.name + "': recvbuf is NULL but count is " +
                                   std::to_string(call.count));
  if (kind.in_place == wire::InPlace::kNever) {
    const auto* send = static_cast<const std::byte*>(call.send);
    const auto* recv = static_cast<const std::byte*>(call.recv);
    if (send < recv + bytes.recv && recv < send + bytes.send)
      return Status::InvalidArgument(what + " '" + call.name + "': sendbuf and recvbuf overlap; " + what +
                                     " cannot run in place, pass a separate receive buffer");
  }
  return bytes;
}

}  // namespace ringsync::client
