// OperationWatch and WatchedTransport (watched.h): what an operation moved and
// what it waits for, over the in-process transport.
#include <doctest/doctest.h>

#include <vector>

#include "service/transport/in_process.h"
#include "service/transport/watched.h"

namespace test_service_transport_watched {

using namespace ringsync;
using namespace ringsync::service::transport;

TEST_CASE("watch: bytes of completed messages, and the oldest receive outstanding is what it waits for") {
  InProcessFabric fabric(3);
  auto watch = std::make_shared<OperationWatch>();
  WatchedTransport node0(fabric.endpoint(0), watch);
  std::vector<std::uint8_t> a(100), b(200), out(64, 7);
  int done = 0;
  const auto count = [&](const Status&) { ++done; };
  node0.send(1, make_tag(5, 2, 0), out.data(), out.size(), count);  // completes at node 0's next progress()
  node0.recv(2, make_tag(5, 3, 1), b.data(), b.size(), count);
  node0.recv(1, make_tag(5, 1, 4), a.data(), a.size(), count);
  auto s = watch->snapshot();
  CHECK(s.outstanding == 3);
  REQUIRE(s.waiting.has_value());
  // Receives first, in the order posted.
  CHECK(s.waiting->receive);
  CHECK(s.waiting->peer == 2);
  CHECK(s.waiting->step == 3);
  CHECK(s.waiting->chunk == 1);
  CHECK(s.waiting->bytes == 200);

  std::vector<std::uint8_t> from2(200, 9);
  fabric.endpoint(2).send(0, make_tag(5, 3, 1), from2.data(), from2.size(), [](const Status&) {});
  fabric.endpoint(2).progress();
  while (node0.progress()) {
  }
  s = watch->snapshot();
  CHECK(s.bytes_moved == 64 + 200);
  CHECK(s.messages_done == 2);
  CHECK(done == 2);
  REQUIRE(s.waiting.has_value());
  CHECK(s.waiting->peer == 1);
  CHECK(s.waiting->receive);
  CHECK(s.waiting->step == 1);

  // A killed peer fails what waits on it: counted as failures, not bytes.
  fabric.kill(1);
  while (node0.progress()) {
  }
  s = watch->snapshot();
  CHECK(s.messages_failed == 1);
  CHECK(s.bytes_moved == 64 + 200);
  CHECK(s.outstanding == 0);
  CHECK_FALSE(s.waiting.has_value());
}

TEST_CASE("watch: with no receive outstanding it waits for the oldest send; with nothing, for nothing") {
  auto watch = std::make_shared<OperationWatch>();
  const auto t0 = OperationWatch::Clock::now();
  const auto first = watch->posted(1, false, make_tag(1, 0, 0), 10, t0);
  watch->posted(2, false, make_tag(1, 1, 0), 20, t0);
  auto s = watch->snapshot();
  REQUIRE(s.waiting.has_value());
  CHECK_FALSE(s.waiting->receive);
  CHECK(s.waiting->peer == 1);
  watch->completed(first, true, t0 + std::chrono::seconds(1));
  s = watch->snapshot();
  CHECK(s.last_progress == t0 + std::chrono::seconds(1));
  CHECK(s.waiting->peer == 2);
  watch->completed(999, true, t0);  // unknown: ignored
  CHECK(watch->snapshot().messages_done == 1);
}

}  // namespace test_service_transport_watched
