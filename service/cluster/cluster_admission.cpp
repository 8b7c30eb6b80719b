// Node 0's control port while the ring is formed: late hellos and strangers.
#include <utility>  // Asio 1.18 needs std::exchange declared first

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "common/log.h"
#include "service/cluster/cluster_node.h"

namespace ringsync::service::cluster {

namespace asio = boost::asio;
using asio::ip::tcp;

asio::awaitable<void> ClusterNode::accept_while_formed(std::uint64_t epoch) {
  while (formed_ && epoch_ == epoch && acceptor_) {
    boost::system::error_code ec;
    tcp::socket socket = co_await acceptor_->async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || !formed_ || epoch_ != epoch) {
      // Cancelled by lose(): the next bootstrap accepts. A connection taken
      // just as the ring was lost goes away; its sender retries.
      co_return;
    }
    const std::string peer = socket.remote_endpoint(ec).address().to_string();
    auto link = std::make_shared<PeerLink>(std::move(socket), "peer at " + peer);
    std::weak_ptr<PeerLink> weak = link;
    link->start(
        [this, weak, epoch](peer_wire::Message m) {
          auto self = weak.lock();
          if (!self) return;
          auto* hello = std::get_if<peer_wire::PeerHello>(&m);
          if (!hello) {
            RS_LOG(warn, "ring") << self->peer_name() << " sent something other than a hello; closed";
            metrics_.error("peer_protocol");
            self->close(Status::ProtocolError("expected a hello"));
            return;
          }
          if (formed_ && epoch_ == epoch) on_late_hello(self, *hello);
          else self->close(Status::Closed("the ring is re-forming"));
        },
        [](const Status&) {});
    // A stranger that says nothing is not kept forever.
    auto timer = std::make_shared<asio::steady_timer>(io_, config_.join_timeout);
    timer->async_wait([weak, timer](boost::system::error_code wait_ec) {
      if (wait_ec) return;
      if (auto self = weak.lock()) self->close(Status::Timeout("no hello"));
    });
  }
}

void ClusterNode::on_late_hello(const std::shared_ptr<PeerLink>& link, const peer_wire::PeerHello& hello) {
  std::string why = hello_refusal(bootstrap_config(), hello);
  // A killed daemon's connection closes at once (the ring is then already
  // re-forming), so a hello for a node whose link is alive comes from a second
  // daemon claiming the same rank: refuse it rather than break the ring.
  if (why.empty() && hello.node_rank < worker_links_.size() && worker_links_[hello.node_rank] &&
      !worker_links_[hello.node_rank]->closed())
    why = node_name(hello.node_rank) + " is already in the ring (two daemons with one node rank?)";
  if (!why.empty()) {
    RS_LOG(warn, "ring") << "refused " << link->peer_name() << ": " << why;
    metrics_.error("peer_refused");
    link->send(peer_wire::PeerHelloReply{false, why, 0, {}, 0});
    link->goodbye(Status::InvalidArgument(why));
    return;
  }
  // A node of this ring whose link is gone says hello again: form the ring
  // anew; the node retries its join and finds the next bootstrap.
  link->close(Status::Closed("the ring is re-forming"));
  lose(Status::PeerLost(node_name(hello.node_rank) + " of job '" + config_.job_id +
                        "' restarted (it asked to join again)"));
}

}  // namespace ringsync::service::cluster
