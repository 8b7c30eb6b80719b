// ringsync-ucx-peer DIR TRANSPORTS
//
// Node 1 of a two-node UCX job whose node 0 is a test. The nodes swap worker
// addresses through files in DIR (DIR/peer.address is this node's, written
// once complete; DIR/survivor.address is the test's). Node 1 then sends node 0
// one byte under tag (0, 0, 1) and streams 1 MiB messages under tags (1, 0, i),
// i = 0, 1, ..., at most four in flight, until node 0 is lost or two minutes
// passed. It never receives. The test kills or stops it mid-stream.
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "service/transport/ucx_transport.h"

namespace fs = std::filesystem;
using namespace ringsync;
using namespace ringsync::service::transport;

namespace {

constexpr std::size_t kMessageBytes = 1 << 20;
constexpr int kInFlight = 4;
constexpr auto kLifetime = std::chrono::minutes(2);

int fail(const std::string& why) {
  std::fprintf(stderr, "ringsync-ucx-peer: %s\n", why.c_str());
  return 1;
}

bool write_address(const fs::path& path, const std::vector<std::byte>& address) {
  const fs::path partial = path.string() + ".partial";
  {
    std::ofstream out(partial, std::ios::binary);
    out.write(reinterpret_cast<const char*>(address.data()), static_cast<std::streamsize>(address.size()));
    if (!out) return false;
  }
  std::error_code ec;
  fs::rename(partial, path, ec);
  return !ec;
}

std::vector<std::byte> wait_for_address(const fs::path& path, std::chrono::steady_clock::time_point deadline) {
  while (!fs::exists(path) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::ifstream in(path, std::ios::binary);
  std::vector<char> raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> address(raw.size());
  std::memcpy(address.data(), raw.data(), raw.size());
  return address;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return fail("usage: ringsync-ucx-peer DIR TRANSPORTS");
  const fs::path dir = argv[1];
  const auto deadline = std::chrono::steady_clock::now() + kLifetime;

  UcxOptions options;
  options.transports = argv[2];
  options.net_devices = "lo";
  auto context = UcxContext::create(options);
  if (!context.ok()) return fail(context.status().to_string());
  const std::vector<std::byte> own = (*context)->address();
  if (!write_address(dir / "peer.address", own)) return fail("cannot write " + (dir / "peer.address").string());
  std::vector<std::byte> survivor = wait_for_address(dir / "survivor.address", deadline);
  if (survivor.empty()) return fail("node 0 never wrote its address");

  auto created = UcxTransport::create(std::move(context).value(), 1, {survivor, own});
  if (!created.ok()) return fail(created.status().to_string());
  UcxTransport& transport = **created;

  bool lost = false;
  int in_flight = 0;
  auto on_sent = [&](const Status& s) {
    --in_flight;
    if (!s.ok()) lost = true;
  };
  const std::byte hello{1};
  ++in_flight;
  transport.send(0, make_tag(0, 0, 1), &hello, 1, on_sent);
  std::vector<std::byte> chunk(kMessageBytes, std::byte{7});
  std::uint16_t next = 0;
  while (!lost && std::chrono::steady_clock::now() < deadline) {
    while (in_flight < kInFlight) {
      ++in_flight;
      transport.send(0, make_tag(1, 0, next++), chunk.data(), chunk.size(), on_sent);
    }
    if (transport.progress() || !transport.arm()) continue;
    pollfd fd{transport.event_fd(), POLLIN, 0};
    ::poll(&fd, 1, 100);
  }
  return 0;
}
