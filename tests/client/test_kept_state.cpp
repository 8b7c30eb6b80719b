// rs_keep_state / rs_fetch_state against a real ringsyncd: a trainer's committed
// state outlives the trainer's connection (as it outlives a crashed process), is
// found by the next trainer of the same job and local rank, and the daemon's
// limit refuses more with a clear error.
#include <doctest/doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "real_daemon.h"
#include "ringsync/ringsync.h"
#include "ringsync/ringsync.hpp"

namespace test_client_kept_state {

using ringsync::testing::RealDaemon;

namespace {

rs_context_t* connect(const RealDaemon& daemon, int local_rank = 0, int local_size = 1) {
  const rs_config_t c = daemon.config(local_rank, local_size);
  rs_context_t* ctx = nullptr;
  REQUIRE_MESSAGE(rs_connect(&c, &ctx) == RS_SUCCESS, rs_last_error());
  return ctx;
}

void* kept_copy(rs_context_t* ctx, const std::string& text) {
  void* buffer = nullptr;
  REQUIRE(rs_alloc(ctx, text.size(), &buffer) == RS_SUCCESS);
  std::memcpy(buffer, text.data(), text.size());
  REQUIRE_MESSAGE(rs_keep_state(ctx, "state", buffer, text.size()) == RS_SUCCESS, rs_last_error());
  return buffer;
}

std::string fetched(rs_context_t* ctx, const char* name = "state") {
  void* ptr = nullptr;
  size_t bytes = 99;
  REQUIRE_MESSAGE(rs_fetch_state(ctx, name, &ptr, &bytes) == RS_SUCCESS, rs_last_error());
  if (ptr == nullptr) {
    CHECK(bytes == 0);
    return "";
  }
  std::string text(static_cast<const char*>(ptr), bytes);
  CHECK(rs_free(ctx, ptr) == RS_SUCCESS);
  return text;
}

}  // namespace

TEST_CASE("kept state: the next trainer of the same job and local rank fetches the last one kept") {
  RealDaemon daemon({}, "kept");
  {
    rs_context_t* first = connect(daemon);
    CHECK(fetched(first).empty());  // nothing kept yet
    kept_copy(first, "step 1");
    void* second = kept_copy(first, "step 2, longer");
    CHECK(fetched(first) == "step 2, longer");
    // The trainer goes without freeing anything (as a crashed one would).
    (void)second;
    rs_disconnect(first);
  }
  rs_context_t* restarted = connect(daemon);
  CHECK(fetched(restarted) == "step 2, longer");
  CHECK(fetched(restarted, "another name").empty());
  rs_disconnect(restarted);
  // Another local rank of the job keeps its own.
  rs_context_t* rank0 = connect(daemon, 0, 2);
  rs_context_t* rank1 = connect(daemon, 1, 2);
  CHECK(fetched(rank1).empty());
  kept_copy(rank1, "rank 1's");
  CHECK(fetched(rank0) == "step 2, longer");
  CHECK(fetched(rank1) == "rank 1's");
  rs_disconnect(rank0);
  rs_disconnect(rank1);
  CHECK(daemon.running());
}

TEST_CASE("kept state: bad arguments and the daemon's limit are refused with the reason") {
  RealDaemon daemon({"--max-kept-state-bytes", "64KiB"}, "kept-limit");
  rs_context_t* ctx = connect(daemon);
  std::vector<char> plain(100, 'x');
  CHECK(rs_keep_state(ctx, "state", plain.data(), plain.size()) == RS_INVALID_ARGUMENT);
  CHECK(std::string(rs_last_error()).find("rs_alloc") != std::string::npos);
  void* buffer = nullptr;
  REQUIRE(rs_alloc(ctx, 1 << 20, &buffer) == RS_SUCCESS);
  CHECK(rs_keep_state(ctx, "state", static_cast<char*>(buffer) + 8, 10) == RS_INVALID_ARGUMENT);  // not its start
  CHECK(rs_keep_state(ctx, "", buffer, 10) == RS_INVALID_ARGUMENT);
  CHECK(rs_keep_state(ctx, "state", buffer, 0) == RS_INVALID_ARGUMENT);
  CHECK(rs_keep_state(ctx, "state", buffer, (1 << 20) + 1) == RS_INVALID_ARGUMENT);  // past its end
  // 1 MiB is past the 64 KiB the daemon keeps.
  CHECK(rs_keep_state(ctx, "state", buffer, 1 << 20) == RS_OUT_OF_MEMORY);
  CHECK(std::string(rs_last_error()).find("--max-kept-state-bytes") != std::string::npos);
  CHECK(fetched(ctx).empty());
  // The connection goes on serving.
  void* small = kept_copy(ctx, "fits");
  CHECK(fetched(ctx) == "fits");
  (void)small;
  rs_disconnect(ctx);
  CHECK(daemon.running());
}

TEST_CASE("kept state through the C++ wrapper: keep_state copies, fetch_state returns it") {
  RealDaemon daemon({}, "kept-cpp");
  const rs_config_t c = daemon.config();
  ringsync::Config config;
  config.socket_path = c.socket_path;
  config.job_id = "kept-cpp";
  const std::string text = "weights after step 12";
  {
    ringsync::Context ctx(config);
    CHECK(ctx.fetch_state("model").empty());
    ctx.keep_state("model", std::as_bytes(std::span(text.data(), text.size())));
  }
  ringsync::Context again(config);
  const auto kept = again.fetch_state("model");
  CHECK(std::string(reinterpret_cast<const char*>(kept.data()), kept.size()) == text);
  CHECK_THROWS_AS(again.keep_state("", std::as_bytes(std::span(text.data(), text.size()))), ringsync::Error);
  CHECK(again.nodes_waiting() == 0);  // a job of this node alone: never anyone waiting
}

}  // namespace test_client_kept_state
