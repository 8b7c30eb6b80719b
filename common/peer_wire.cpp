#include "common/peer_wire.h"

#include <flatbuffers/flatbuffers.h>

#include <cstring>

#include "ringsync/wire/peer_generated.h"

namespace ringsync::peer_wire {
namespace fb = ringsync::wire::peer;

namespace {

using Offset = flatbuffers::Offset<void>;

std::string str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

std::vector<std::uint8_t> bytes(const flatbuffers::Vector<std::uint8_t>* v) {
  return v ? std::vector<std::uint8_t>(v->begin(), v->end()) : std::vector<std::uint8_t>();
}

// A [ulong] field's elements, copied without reading through a misaligned
// pointer: the verifier checks a vector's length prefix for 4-byte alignment
// only, so a crafted frame can place 8-byte elements off their alignment
// (found by fuzz/peer_frame.cpp). FlatBuffers are little-endian, as is every
// host ringsync runs on.
std::vector<std::uint64_t> u64s(const flatbuffers::Vector<std::uint64_t>& v) {
  std::vector<std::uint64_t> out(v.size());
  if (!out.empty()) std::memcpy(out.data(), v.Data(), out.size() * sizeof(std::uint64_t));
  return out;
}

Status check_collective(std::uint8_t kind, std::uint8_t dtype, std::uint8_t op,
                        const std::string& what) {
  if (!wire::is_collective_kind(kind))
    return Status::ProtocolError(what + ": unknown collective kind " + std::to_string(kind));
  if (!is_valid(static_cast<DType>(dtype)))
    return Status::ProtocolError(what + ": unknown dtype " + std::to_string(dtype));
  if (!is_valid(static_cast<ReduceOp>(op)))
    return Status::ProtocolError(what + ": unknown reduce op " + std::to_string(op));
  return Status::Ok();
}

struct Encoder {
  flatbuffers::FlatBufferBuilder& b;

  std::pair<fb::PeerBody, Offset> operator()(const PeerHello& m) {
    auto job = b.CreateString(m.job_id);
    auto address = b.CreateVector(m.ucx_address);
    auto nonce = m.nonce.empty() ? 0 : b.CreateVector(m.nonce);
    return {fb::PeerBody::PeerHello,
            fb::CreatePeerHello(b, m.protocol_version, job, m.node_rank, m.num_nodes, m.slots, address, m.epoch,
                                m.ring_chunk_bytes, m.response_cache, m.inline_bytes, m.halving_doubling_bytes,
                                nonce, m.verify_results, m.direct_bytes, m.halving_doubling_folds)
                .Union()};
  }
  std::pair<fb::PeerBody, Offset> operator()(const AuthChallenge& m) {
    auto nonce = b.CreateVector(m.nonce);
    auto proof = b.CreateVector(m.proof);
    return {fb::PeerBody::AuthChallenge, fb::CreateAuthChallenge(b, nonce, proof).Union()};
  }
  std::pair<fb::PeerBody, Offset> operator()(const AuthProof& m) {
    return {fb::PeerBody::AuthProof, fb::CreateAuthProof(b, b.CreateVector(m.proof)).Union()};
  }
  std::pair<fb::PeerBody, Offset> operator()(const PeerHelloReply& m) {
    auto message = b.CreateString(m.message);
    auto address = b.CreateVector(m.ucx_address);
    return {fb::PeerBody::PeerHelloReply,
            fb::CreatePeerHelloReply(b, m.accepted, message, m.node_rank, address, m.epoch)
                .Union()};
  }
  std::pair<fb::PeerBody, Offset> operator()(const Heartbeat& m) {
    return {fb::PeerBody::Heartbeat, fb::CreateHeartbeat(b, m.epoch, m.sequence).Union()};
  }
  flatbuffers::Offset<fb::ReadyTensor> tensor(const ReadyTensor& t) {
    return fb::CreateReadyTensor(b, b.CreateString(t.name), static_cast<std::uint8_t>(t.kind),
                                 static_cast<std::uint8_t>(t.dtype), static_cast<std::uint8_t>(t.op), t.count,
                                 t.root);
  }
  std::pair<fb::PeerBody, Offset> operator()(const ReadyList& m) {
    std::vector<flatbuffers::Offset<fb::ReadyTensor>> tensors;
    for (const auto& t : m.tensors) tensors.push_back(tensor(t));
    auto tensor_vector = b.CreateVector(tensors);
    auto cached = b.CreateVector(m.cached);
    std::vector<flatbuffers::Offset<fb::InlineData>> data;
    for (const auto& d : m.data)
      data.push_back(fb::CreateInlineData(b, b.CreateString(d.name), b.CreateVector(d.data)));
    auto data_vector = m.data.empty() ? 0 : b.CreateVector(data);
    return {fb::PeerBody::ReadyList,
            fb::CreateReadyList(b, m.epoch, m.node_rank, tensor_vector, cached, m.plans_seen, data_vector)
                .Union()};
  }
  std::pair<fb::PeerBody, Offset> operator()(const Plan& m) {
    std::vector<flatbuffers::Offset<fb::Operation>> ops;
    for (const auto& o : m.operations) {
      auto names = b.CreateVectorOfStrings(o.names);
      auto counts = b.CreateVector(o.counts);
      auto result = o.result.empty() ? 0 : b.CreateVector(o.result);
      ops.push_back(fb::CreateOperation(b, o.sequence, static_cast<std::uint8_t>(o.kind),
                                        static_cast<std::uint8_t>(o.dtype),
                                        static_cast<std::uint8_t>(o.op), o.root, names, counts, result));
    }
    std::vector<flatbuffers::Offset<fb::TensorError>> errors;
    for (const auto& e : m.errors)
      errors.push_back(
          fb::CreateTensorError(b, b.CreateString(e.name), b.CreateString(e.message)));
    auto op_vector = b.CreateVector(ops);
    auto error_vector = b.CreateVector(errors);
    return {fb::PeerBody::Plan,
            fb::CreatePlan(b, m.epoch, m.cycle, op_vector, error_vector).Union()};
  }
  std::pair<fb::PeerBody, Offset> operator()(const Roster& m) {
    std::vector<flatbuffers::Offset<fb::RosterEntry>> entries;
    for (const auto& e : m.entries)
      entries.push_back(fb::CreateRosterEntry(b, e.node_rank, b.CreateVector(e.ucx_address)));
    auto entry_vector = b.CreateVector(entries);
    return {fb::PeerBody::Roster, fb::CreateRoster(b, m.epoch, entry_vector).Union()};
  }
  std::pair<fb::PeerBody, Offset> operator()(const Contributions& m) {
    std::vector<flatbuffers::Offset<fb::DirectTensor>> tensors;
    for (const auto& t : m.tensors)
      tensors.push_back(fb::CreateDirectTensor(b, tensor(t.tensor), t.data.empty() ? 0 : b.CreateVector(t.data)));
    return {fb::PeerBody::Contributions,
            fb::CreateContributions(b, m.epoch, m.origin, b.CreateVector(tensors)).Union()};
  }
  std::pair<fb::PeerBody, Offset> operator()(const Goodbye& m) {
    auto reason = b.CreateString(m.reason);
    return {fb::PeerBody::Goodbye, fb::CreateGoodbye(b, m.epoch, reason, m.finished, m.lost_node, m.timed_out).Union()};
  }
  std::pair<fb::PeerBody, Offset> operator()(const RankLeft& m) {
    auto reason = b.CreateString(m.reason);
    return {fb::PeerBody::RankLeft, fb::CreateRankLeft(b, m.epoch, m.origin, m.global_rank, reason, m.clean).Union()};
  }
  std::pair<fb::PeerBody, Offset> operator()(const NodeDrained& m) {
    return {fb::PeerBody::NodeDrained, fb::CreateNodeDrained(b, m.epoch, m.node_rank).Union()};
  }
};

Result<ReadyTensor> decode_tensor(const fb::ReadyTensor* t) {
  if (!t || !t->name() || t->name()->size() == 0) return Status::ProtocolError("ready tensor without a name");
  RINGSYNC_RETURN_IF_ERROR(check_collective(t->kind(), t->dtype(), t->op(), "tensor '" + t->name()->str() + "'"));
  return ReadyTensor{t->name()->str(), static_cast<wire::CollectiveKind>(t->kind()),
                     static_cast<DType>(t->dtype()), static_cast<ReduceOp>(t->op()), t->count(), t->root()};
}

Result<Message> decode_ready_list(const fb::ReadyList& m) {
  ReadyList out;
  out.epoch = m.epoch();
  out.node_rank = m.node_rank();
  out.plans_seen = m.plans_seen();
  if (m.tensors()) {
    for (const auto* t : *m.tensors()) {
      auto tensor = decode_tensor(t);
      if (!tensor.ok()) return tensor.status();
      out.tensors.push_back(std::move(tensor).value());
    }
  }
  if (m.cached()) out.cached = u64s(*m.cached());
  if (m.data()) {
    for (const auto* d : *m.data()) {
      if (!d || !d->name() || d->name()->size() == 0)
        return Status::ProtocolError("inline data without a tensor name");
      InlineData item{d->name()->str(), {}};
      if (d->data()) item.data.assign(d->data()->begin(), d->data()->end());
      out.data.push_back(std::move(item));
    }
  }
  return Message(std::move(out));
}

Result<Message> decode_plan(const fb::Plan& m) {
  Plan out;
  out.epoch = m.epoch();
  out.cycle = m.cycle();
  if (m.operations()) {
    for (const auto* o : *m.operations()) {
      if (!o) return Status::ProtocolError("empty operation in a plan");
      const std::string what = "operation " + std::to_string(o->sequence());
      RINGSYNC_RETURN_IF_ERROR(check_collective(o->kind(), o->dtype(), o->op(), what));
      const std::size_t names = o->names() ? o->names()->size() : 0;
      const std::size_t counts = o->counts() ? o->counts()->size() : 0;
      if (names == 0 || names != counts)
        return Status::ProtocolError(what + " has " + std::to_string(names) + " names and " +
                                     std::to_string(counts) + " counts");
      Operation op;
      op.sequence = o->sequence();
      op.kind = static_cast<wire::CollectiveKind>(o->kind());
      op.dtype = static_cast<DType>(o->dtype());
      op.op = static_cast<ReduceOp>(o->op());
      op.root = o->root();
      for (const auto* n : *o->names()) {
        if (!n || n->size() == 0) return Status::ProtocolError(what + " names an empty tensor");
        op.names.push_back(n->str());
      }
      op.counts = u64s(*o->counts());
      if (o->result()) {
        if (op.kind != wire::CollectiveKind::kAllreduce)
          return Status::ProtocolError(what + " carries a result but is not an allreduce");
        op.result.assign(o->result()->begin(), o->result()->end());
      }
      out.operations.push_back(std::move(op));
    }
  }
  if (m.errors())
    for (const auto* e : *m.errors())
      if (e) out.errors.push_back(TensorError{str(e->name()), str(e->message())});
  return Message(std::move(out));
}

}  // namespace

std::vector<std::uint8_t> encode(const Message& message) {
  flatbuffers::FlatBufferBuilder b(512);
  auto [type, body] = std::visit(Encoder{b}, message);
  b.Finish(fb::CreatePeerFrame(b, type, body));
  return wire::frame_of(b.GetBufferPointer(), b.GetSize());
}

Result<Message> decode(std::span<const std::uint8_t> body) {
  std::vector<std::uint64_t> storage;
  body = wire::aligned(body, storage);
  flatbuffers::Verifier verifier(body.data(), body.size(), /*max_depth=*/16,
                                 /*max_tables=*/1 << 20);
  if (!fb::VerifyPeerFrameBuffer(verifier))
    return Status::ProtocolError("peer frame failed FlatBuffers verification (" +
                                 std::to_string(body.size()) + " bytes)");
  const fb::PeerFrame* frame = fb::GetPeerFrame(body.data());
  if (frame->body_type() != fb::PeerBody::NONE && frame->body() == nullptr)
    return Status::ProtocolError("peer frame names a message type but carries no message");
  switch (frame->body_type()) {
    case fb::PeerBody::PeerHello: {
      const auto* m = frame->body_as_PeerHello();
      if (!m->job_id() || m->job_id()->size() == 0)
        return Status::ProtocolError("peer hello without a job id");
      return Message(PeerHello{m->protocol_version(), m->job_id()->str(), m->node_rank(),
                               m->num_nodes(), m->slots(), bytes(m->nonce()),
                               bytes(m->ucx_address()), m->epoch(), m->ring_chunk_bytes(),
                               m->response_cache(), m->inline_bytes(), m->halving_doubling_bytes(),
                               m->verify_results(), m->direct_bytes(), m->halving_doubling_folds()});
    }
    case fb::PeerBody::PeerHelloReply: {
      const auto* m = frame->body_as_PeerHelloReply();
      return Message(PeerHelloReply{m->accepted(), str(m->message()), m->node_rank(),
                                    bytes(m->ucx_address()), m->epoch()});
    }
    case fb::PeerBody::AuthChallenge: {
      const auto* m = frame->body_as_AuthChallenge();
      return Message(AuthChallenge{bytes(m->nonce()), bytes(m->proof())});
    }
    case fb::PeerBody::AuthProof:
      return Message(AuthProof{bytes(frame->body_as_AuthProof()->proof())});
    case fb::PeerBody::Heartbeat: {
      const auto* m = frame->body_as_Heartbeat();
      return Message(Heartbeat{m->epoch(), m->sequence()});
    }
    case fb::PeerBody::ReadyList:
      return decode_ready_list(*frame->body_as_ReadyList());
    case fb::PeerBody::Plan:
      return decode_plan(*frame->body_as_Plan());
    case fb::PeerBody::Goodbye: {
      const auto* m = frame->body_as_Goodbye();
      return Message(Goodbye{m->epoch(), str(m->reason()), m->finished(), m->lost_node(), m->timed_out()});
    }
    case fb::PeerBody::RankLeft: {
      const auto* m = frame->body_as_RankLeft();
      if (!m->reason() || m->reason()->size() == 0) return Status::ProtocolError("rank-left notice without a reason");
      return Message(RankLeft{m->epoch(), m->origin(), m->global_rank(), m->reason()->str(), m->clean()});
    }
    case fb::PeerBody::NodeDrained: {
      const auto* m = frame->body_as_NodeDrained();
      return Message(NodeDrained{m->epoch(), m->node_rank()});
    }
    case fb::PeerBody::Roster: {
      const auto* m = frame->body_as_Roster();
      Roster out;
      out.epoch = m->epoch();
      if (m->entries())
        for (const auto* e : *m->entries()) {
          if (!e) return Status::ProtocolError("empty roster entry");
          out.entries.push_back(RosterEntry{e->node_rank(), bytes(e->ucx_address())});
        }
      return Message(std::move(out));
    }
    case fb::PeerBody::Contributions: {
      const auto* m = frame->body_as_Contributions();
      Contributions out{m->epoch(), m->origin(), {}};
      if (m->tensors())
        for (const auto* t : *m->tensors()) {
          if (!t) return Status::ProtocolError("empty contribution");
          auto tensor = decode_tensor(t->tensor());
          if (!tensor.ok()) return tensor.status();
          out.tensors.push_back(DirectTensor{std::move(tensor).value(), bytes(t->data())});
        }
      return Message(std::move(out));
    }
    case fb::PeerBody::NONE:
      break;
  }
  return Status::ProtocolError("peer frame with no or unknown message type " +
                               std::to_string(static_cast<int>(frame->body_type())));
}

}  // namespace ringsync::peer_wire
