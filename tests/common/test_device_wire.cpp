// The wire messages of GPU buffers (protocol version 2): round trips, and
// registrations whose handle or UUID has the wrong size refused when decoded.
#include <doctest/doctest.h>

#include <flatbuffers/flatbuffers.h>

#include <random>

#include "common/wire.h"
#include "ringsync/wire/client_generated.h"

namespace test_common_device_wire {

using namespace ringsync;
using namespace ringsync::wire;
namespace fb = ringsync::wire::client;

namespace {

Message round_trip(const Message& m) {
  const auto frame = encode(m);
  auto decoded = decode(std::span<const std::uint8_t>(frame).subspan(kFrameHeaderBytes));
  REQUIRE(decoded.ok());
  return *decoded;
}

std::vector<std::uint8_t> finished(flatbuffers::FlatBufferBuilder& b) {
  return std::vector<std::uint8_t>(b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize());
}

// A RegisterDevice frame with handle and UUID of the given sizes (-1: absent).
std::vector<std::uint8_t> registration(int handle_bytes, int uuid_bytes) {
  flatbuffers::FlatBufferBuilder b;
  flatbuffers::Offset<flatbuffers::Vector<std::uint8_t>> handle, uuid;
  if (handle_bytes >= 0) handle = b.CreateVector(std::vector<std::uint8_t>(handle_bytes, 7));
  if (uuid_bytes >= 0) uuid = b.CreateVector(std::vector<std::uint8_t>(uuid_bytes, 9));
  auto r = fb::CreateRegisterDevice(b, 1, 2, handle, 0, uuid, 4096);
  b.Finish(fb::CreateFrame(b, fb::Body::RegisterDevice, r.Union()));
  return finished(b);
}

}  // namespace

TEST_CASE("device registration messages survive encode and decode") {
  RegisterDevice r;
  r.request_id = 77;
  r.allocation_id = 0xfffffffe;
  for (std::size_t i = 0; i < r.ipc_handle.size(); ++i) r.ipc_handle[i] = std::byte(i * 3);
  r.device = 7;
  for (std::size_t i = 0; i < r.device_uuid.size(); ++i) r.device_uuid[i] = std::byte(200 + i);
  r.bytes = (1ull << 36) + 3;
  auto back = std::get<RegisterDevice>(round_trip(r));
  CHECK(back.request_id == 77);
  CHECK(back.allocation_id == 0xfffffffe);
  CHECK(back.ipc_handle == r.ipc_handle);
  CHECK(back.device == 7);
  CHECK(back.device_uuid == r.device_uuid);
  CHECK(back.bytes == r.bytes);

  RegisterDevice no_uuid;
  no_uuid.allocation_id = 1;
  auto plain = std::get<RegisterDevice>(round_trip(no_uuid));
  CHECK(plain.device_uuid == DeviceUuid{});

  auto reply = std::get<RegisterDeviceReply>(
      round_trip(RegisterDeviceReply{5, Status::InvalidArgument("no CUDA device"), 9}));
  CHECK(reply.request_id == 5);
  CHECK(reply.status.code() == StatusCode::kInvalidArgument);
  CHECK(reply.status.message() == "no CUDA device");
  CHECK(reply.allocation_id == 9);
  CHECK(std::get<RegisterDeviceReply>(round_trip(RegisterDeviceReply{6, Status::Ok(), 3}))
            .status.ok());
  CHECK(std::get<UnregisterDevice>(round_trip(UnregisterDevice{42})).allocation_id == 42);
}

TEST_CASE("a collective says which memory its references name") {
  Collective c;
  c.name = "grad";
  CHECK(std::get<Collective>(round_trip(c)).memory == Memory::kHost);
  c.memory = Memory::kDevice;
  c.send = {3, 128};
  c.recv = {4, 0};
  auto back = std::get<Collective>(round_trip(c));
  CHECK(back.memory == Memory::kDevice);
  CHECK(back.send.buffer_id == 3);
  CHECK(back.send.offset == 128);
  CHECK(std::string(memory_name(Memory::kDevice)) == "device");

  flatbuffers::FlatBufferBuilder b;
  auto name = b.CreateString("x");
  auto future = fb::CreateCollective(b, 1, fb::CollectiveKind::Allreduce, name, fb::DType::F32,
                                     fb::ReduceOp::Sum, 0, 0, nullptr, nullptr, false,
                                     static_cast<fb::Memory>(9));
  b.Finish(fb::CreateFrame(b, fb::Body::Collective, future.Union()));
  CHECK(decode(finished(b)).status().message() == "unknown memory kind 9");
}

TEST_CASE("registrations with a malformed handle or UUID are refused") {
  CHECK(decode(registration(64, 16)).ok());
  CHECK(decode(registration(64, -1)).ok());
  auto missing = decode(registration(-1, 16));
  CHECK(missing.status().code() == StatusCode::kProtocolError);
  CHECK(missing.status().message().find("IPC handle of 0 bytes") != std::string::npos);
  CHECK(decode(registration(63, 16)).status().message().find("IPC handle of 63 bytes") !=
        std::string::npos);
  CHECK(decode(registration(65, 16)).status().message().find("a cudaIpcMemHandle_t has 64") !=
        std::string::npos);
  CHECK(decode(registration(64, 15)).status().message().find("device UUID of 15 bytes") !=
        std::string::npos);
  CHECK_FALSE(decode(registration(5000, -1)).ok());
}

TEST_CASE("mutated registration frames decode safely or not at all") {
  RegisterDevice r;
  r.allocation_id = 3;
  r.bytes = 1 << 20;
  const auto frame = encode(r);
  std::mt19937 rng(99);
  for (int round = 0; round < 3000; ++round) {
    std::vector<std::uint8_t> body(frame.begin() + kFrameHeaderBytes, frame.end());
    for (int flips = 1 + static_cast<int>(rng() % 4); flips > 0; --flips)
      body[rng() % body.size()] = static_cast<std::uint8_t>(rng());
    auto m = decode(body);
    if (!m.ok()) {
      CHECK(m.status().code() == StatusCode::kProtocolError);
      continue;
    }
    if (auto* back = std::get_if<RegisterDevice>(&*m)) CHECK(back->ipc_handle.size() == 64);
  }
}

}  // namespace test_common_device_wire
