// Helpers for the UCX transport tests: a job of n nodes in this process, each
// with its own UCX worker, driven from one thread, on loopback only.
#pragma once

#include <doctest/doctest.h>
#include <poll.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "service/transport/ucx_transport.h"

namespace ringsync::test {

using service::transport::UcxContext;
using service::transport::UcxOptions;
using service::transport::UcxTransport;

// Loopback only, with the given transports (UCX_TLS syntax).
inline UcxOptions loopback(const std::string& transports) {
  UcxOptions options;
  options.transports = transports;
  options.net_devices = "lo";
  return options;
}

inline std::unique_ptr<UcxContext> make_context(const UcxOptions& options) {
  auto context = UcxContext::create(options);
  REQUIRE_MESSAGE(context.ok(), context.status().to_string());
  return std::move(context).value();
}

// n nodes that know each other's addresses.
inline std::vector<std::unique_ptr<UcxTransport>> make_job(int n, const UcxOptions& options) {
  std::vector<std::unique_ptr<UcxContext>> contexts;
  std::vector<std::vector<std::byte>> addresses;
  for (int r = 0; r < n; ++r) {
    contexts.push_back(make_context(options));
    addresses.push_back(contexts.back()->address());
  }
  std::vector<std::unique_ptr<UcxTransport>> job;
  for (int r = 0; r < n; ++r) {
    auto transport = UcxTransport::create(std::move(contexts[r]), r, addresses);
    REQUIRE_MESSAGE(transport.ok(), transport.status().to_string());
    job.push_back(std::move(transport).value());
  }
  return job;
}

inline std::vector<UcxTransport*> nodes(const std::vector<std::unique_ptr<UcxTransport>>& job) {
  std::vector<UcxTransport*> out;
  for (const auto& t : job) out.push_back(t.get());
  return out;
}

// Drives every node until `done()` holds, sleeping on the nodes' event
// descriptors when none has work. Bounded by `limit` so that a broken build
// fails instead of hanging; the tests never come near it. Returns whether
// `done()` held.
template <typename Done>
bool drive(const std::vector<UcxTransport*>& job, Done done,
           std::chrono::seconds limit = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    bool progressed = false;
    for (UcxTransport* t : job) progressed = t->progress() || progressed;
    if (done()) return true;
    if (progressed) continue;
    std::vector<pollfd> fds;
    bool armed = true;
    for (UcxTransport* t : job) {
      if (!t->arm()) {
        armed = false;
        break;
      }
      fds.push_back(pollfd{t->event_fd(), POLLIN, 0});
    }
    if (armed) ::poll(fds.data(), fds.size(), 100);
  }
  return done();
}

// A recognizable byte pattern per message.
inline std::vector<std::byte> pattern(std::size_t bytes, unsigned seed) {
  std::vector<std::byte> data(bytes);
  for (std::size_t i = 0; i < bytes; ++i) data[i] = static_cast<std::byte>((i * 131 + seed * 7 + 1) & 0xff);
  return data;
}

// Records one operation's completion.
struct Outcome {
  bool done = false;
  Status status;
  UcxTransport::Callback callback() {
    return [this](const Status& s) {
      CHECK_FALSE(done);  // exactly once
      done = true;
      status = s;
    };
  }
};

}  // namespace ringsync::test
