// An endpoint of an InProcessFabric handed to code that wants to own its
// Transport (RingEngine, a job ring's data plane): the fabric keeps it.
#pragma once

#include "service/transport/transport.h"

namespace ringsync::service::transport {

class Borrowed : public Transport {
 public:
  explicit Borrowed(Transport& t) : t_(t) {}
  int rank() const override { return t_.rank(); }
  int size() const override { return t_.size(); }
  void send(int peer, std::uint64_t tag, const void* data, std::size_t bytes, Callback done) override {
    t_.send(peer, tag, data, bytes, std::move(done));
  }
  void recv(int peer, std::uint64_t tag, void* data, std::size_t bytes, Callback done) override {
    t_.recv(peer, tag, data, bytes, std::move(done));
  }
  bool progress() override { return t_.progress(); }
  int event_fd() const override { return t_.event_fd(); }
  bool arm() override { return t_.arm(); }
  void cancel_all(const Status& why) override { t_.cancel_all(why); }

 private:
  Transport& t_;
};

}  // namespace ringsync::service::transport
