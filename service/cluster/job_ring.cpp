#include "service/cluster/job_ring.h"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "common/log.h"
#include "service/rendezvous/elastic_rendezvous.h"
#include "service/rendezvous/etcd_store.h"
#include "service/rendezvous/store_rendezvous.h"

namespace ringsync::service::cluster {

namespace asio = boost::asio;

JobRing::JobRing(asio::io_context& io, JobSpec job, const ClusterConfig& settings, formation::ControlListener* listener,
                 threads::WorkPool& pool, observe::DaemonMetrics& metrics, observe::Timeline* timeline,
                 Answers& answers, Hooks hooks, std::unique_ptr<formation::DataPlane> data_plane)
    : job_(std::move(job)),
      settings_(settings),
      answers_(answers),
      hooks_(std::move(hooks)),
      io_(io),
      executor_(io, job_, settings, pool, metrics, timeline, answers,
                execution::Executor::Hooks{[this](const Status& why) { membership_->suspect(why); }, [this] { check_drained(); }}),
      negotiator_(io, job_, settings, metrics, timeline, answers,
                  negotiation::Negotiator::Hooks{[this](std::shared_ptr<PlannedOperation> op) { executor_.submit(std::move(op)); },
                                    [this](const Status& why) { membership_->lose(why); },
                                    [this] { return executor_.idle(); }}) {
  if (!data_plane) data_plane = formation::UcxDataPlane::for_daemon(settings);
  formation::Membership::Hooks membership_hooks;
  membership_hooks.formed = [this](std::uint64_t epoch) { on_formed(epoch); };
  membership_hooks.lost = [this](const Status& why, bool quiet, std::int32_t lost_node) {
    // An elastic job's next roster need not wait for the lost node's lease.
    if (!quiet && lost_node >= 0 && lost_node != static_cast<std::int32_t>(job_.node_rank) && rendezvous_)
      rendezvous_->report_lost(static_cast<std::uint32_t>(lost_node));
    on_lost(why, quiet);
  };
  membership_hooks.attempt_failed = [this](const Status& why) {
    // What waited for this ring waits no longer: it gets the reason.
    negotiator_.lost(Status::PeerLost("the ring of job '" + job_.id + "' is not formed: " + why.message()),
                     observe::ErrorKind::kPeerLost);
  };
  membership_hooks.message = [this](std::uint32_t from, peer_wire::Message m) { on_message(from, std::move(m)); };
  if (job_.rendezvous.empty()) {
    rendezvous_ = std::make_shared<rendezvous::StaticRendezvous>(job_.nodes, job_.node_rank);
  } else {
    // open() failing (a malformed URL) is reported by start().
    auto store = rendezvous::EtcdStore::open(job_.rendezvous, settings.rendezvous_timeout);
    const auto lease = std::chrono::duration_cast<std::chrono::seconds>(settings.rendezvous_lease);
    if (!store.ok())
      store_error_ = store.status();
    else if (job_.max_nodes > 0)
      rendezvous_ = std::make_shared<rendezvous::ElasticRendezvous>(
          io, std::move(store).value(),
          rendezvous::ElasticJob{job_.id, job_.token, job_.min_nodes, job_.max_nodes, job_.num_nodes, job_.slots,
                                 job_.self_address, settings.elastic_timeout},
          lease);
    else
      rendezvous_ = std::make_shared<rendezvous::StoreRendezvous>(
          io, std::move(store).value(),
          rendezvous::RendezvousJob{job_.id, job_.token, job_.num_nodes, job_.slots, job_.self_address}, lease);
  }
  membership_ = std::make_shared<formation::Membership>(io, job_, settings, listener, std::move(data_plane), metrics,
                                             std::move(membership_hooks), rendezvous_);
  membership_->set_reform(job_.preconfigured);
}

JobRing::~JobRing() {
  stop(Status::Closed("ringsyncd is shutting down"),
       Status::Closed(node_name(job_, job_.node_rank) + " of job '" + job_.id + "' shut down"));
}

Status JobRing::start() {
  if (!job_.rendezvous.empty()) {
    if (!rendezvous_) return store_error_;
    registered_ = false;
    std::optional<std::uint32_t> wanted;
    if (job_.node_rank_known) wanted = job_.node_rank;
    asio::co_spawn(
        io_,
        [this, alive = std::weak_ptr<int>(alive_), wanted, rendezvous = rendezvous_]() -> asio::awaitable<void> {
          auto rank = co_await rendezvous->join(wanted);
          if (alive.expired() || stopping_) {
            rendezvous->leave();
            co_return;
          }
          Status outcome = rank.ok() ? Status::Ok() : rank.status();
          if (rank.ok()) {
            job_.node_rank = *rank;
            job_.node_rank_known = true;
            if (auto nodes = rendezvous->num_nodes()) job_.num_nodes = *nodes;  // this run's, for an elastic job
            RS_LOG(info, "rendezvous") << "job '" << job_.id << "': this node registered in " << job_.rendezvous
                                       << " as node " << *rank << " of " << job_.num_nodes;
            outcome = membership_->start();
          }
          registered_ = outcome.ok();
          if (hooks_.registered) hooks_.registered(outcome);
        },
        asio::detached);
    return Status::Ok();
  }
  RINGSYNC_RETURN_IF_ERROR(membership_->start());
  RS_LOG(info, "ring") << "node " << job_.node_rank << " of " << job_.num_nodes << " in job '" << job_.id << "'; "
                       << (job_.node_rank == 0 ? "coordinating at " : "joining ") << node_name(job_, 0);
  return Status::Ok();
}

void JobRing::stop(const Status& why, const Status& goodbye) {
  if (stopping_) return;
  stopping_ = true;
  if (rendezvous_) rendezvous_->leave();
  membership_->stop(goodbye);
  executor_.lost(why);
  negotiator_.lost(why, observe::ErrorKind::kShutdown);
}

bool JobRing::done() const { return executor_.idle() && membership_->settled(); }

void JobRing::local_ready(local::PendingCollective collective) {
  if (stopping_) {
    answers_.fail(collective, Status::Closed("ringsyncd is shutting down"), observe::ErrorKind::kShutdown);
    return;
  }
  negotiator_.local_ready(std::move(collective));
}

void JobRing::rank_left(std::uint32_t global_rank, const Status& why, bool clean) {
  if (stopping_) return;
  if (!membership_->formed()) {
    // Nobody else holds anything of this run yet; what waits here fails.
    negotiator_.lost(why, observe::ErrorKind::kClientLost);
    return;
  }
  if (drained_) {
    // A rank of the next run, while the last one is being closed: the next
    // ring hears of it.
    if (!unsent_notice_) unsent_notice_ = Notice{global_rank, why, clean};
    return;
  }
  if (broken_ || notice_sent_) return;  // the run is broken already: the first reason stands
  peer_wire::RankLeft notice{membership_->epoch(), job_.node_rank, global_rank, why.message(), clean};
  if (job_.node_rank == 0) {
    break_everywhere(notice);
  } else {
    // Applied when node 0's relay comes back, after the plans it made before.
    notice_sent_ = true;
    membership_->send(0, notice);
  }
}

void JobRing::break_everywhere(const peer_wire::RankLeft& notice) {
  if (broken_) return;
  for (std::uint32_t r = 1; r < job_.num_nodes; ++r) membership_->send(r, notice);
  apply_break(Status::PeerLost(notice.reason), notice.clean);
}

void JobRing::apply_break(const Status& why, bool clean) {
  if (broken_) return;
  broken_ = why;
  notice_sent_ = false;
  drained_nodes_.assign(job_.num_nodes, false);
  if (clean) {
    RS_LOG(info, "ring") << why.message() << "; the run of job '" << job_.id << "' is over on every node";
  } else {
    RS_LOG(warn, "ring") << why.message() << "; the job's collectives fail on every node until its ranks have left";
  }
  negotiator_.break_run(why);
  if (hooks_.ring_lost) hooks_.ring_lost(why);
  check_drained();
}

void JobRing::set_local_ranks(std::size_t connected) {
  local_ranks_ = connected;
  check_drained();
}

void JobRing::check_drained() {
  if (!broken_ || drained_ || local_ranks_ > 0 || !executor_.idle() || !membership_->formed()) return;
  drained_ = true;
  drained_at_ = Clock::now();
  negotiator_.hold();  // the next run's tensors wait for the next ring
  RS_LOG(debug, "ring") << "every rank of job '" << job_.id << "' has left node " << job_.node_rank;
  if (job_.node_rank == 0) {
    drained_nodes_[0] = true;
    maybe_finish();
  } else {
    membership_->send(0, peer_wire::NodeDrained{membership_->epoch(), job_.node_rank});
  }
}

void JobRing::maybe_finish() {
  for (bool drained : drained_nodes_)
    if (!drained) return;
  membership_->finish(Status::Closed("the run of job '" + job_.id + "' ended: its ranks have left every node"));
}

void JobRing::on_formed(std::uint64_t epoch) {
  executor_.formed(epoch, membership_->engine(), membership_->peer_lanes());
  negotiator_.formed(epoch, membership_.get());
  if (auto notice = std::exchange(unsent_notice_, std::nullopt)) rank_left(notice->global_rank, notice->why, notice->clean);
}

void JobRing::on_lost(const Status& why, bool quiet) {
  broken_.reset();
  notice_sent_ = false;
  drained_ = false;
  drained_nodes_.clear();
  executor_.lost(why);
  negotiator_.lost(why, lost_kind(why), /*keep_held=*/quiet);
  if (quiet) {
    if (hooks_.finished) hooks_.finished();
  } else if (hooks_.ring_lost) {
    hooks_.ring_lost(why);
  }
}

void JobRing::on_message(std::uint32_t from, peer_wire::Message message) {
  if (auto* notice = std::get_if<peer_wire::RankLeft>(&message)) {
    if (job_.node_rank == 0) {
      if (notice->origin != from) {
        RS_LOG(warn, "ring") << node_name(job_, from) << " sent a rank-left notice for node " << notice->origin
                             << "; ignored";
        return;
      }
      break_everywhere(*notice);
    } else if (from == 0) {
      apply_break(Status::PeerLost(notice->reason), notice->clean);
    }
    return;
  }
  if (std::holds_alternative<peer_wire::NodeDrained>(message)) {
    if (job_.node_rank != 0 || !broken_ || from >= drained_nodes_.size()) return;
    drained_nodes_[from] = true;
    if (drained_) maybe_finish();
    return;
  }
  if (negotiator_.on_message(from, message)) return;
  RS_LOG(warn, "ring") << node_name(job_, from) << " sent an unexpected message; ignored";
}

std::size_t JobRing::sweep(Clock::time_point now, Clock::duration stall_after, Clock::duration timeout) {
  membership_->sample_links(now);
  // A ring operation past one of its deadlines is stuck (a data path that
  // stalled while heartbeats still flow, a local phase that never ends): the
  // ring starts over, and every node's ranks get why (executor.h, overdue()).
  if (auto stuck = executor_.overdue(now, timeout, settings_.progress_timeout)) {
    RS_LOG(error, "collective") << stuck->message();
    membership_->lose(*stuck);
  }
  // A tensor ready here that the other nodes never readied in time: the job
  // cannot go on consistently (a late plan would run it for ranks already told
  // it failed, with buffers they may have reused), so the ring starts over and
  // every node's ranks get the reason.
  if (auto expired = negotiator_.expired(now, timeout)) {
    RS_LOG(warn, "collective") << expired->message();
    if (membership_->formed()) {
      membership_->lose(*expired);
    } else {
      negotiator_.lost(*expired, observe::ErrorKind::kTimeout);
    }
  }
  // A job its trainers described: a node whose ranks have all left waits for
  // node 0 to close the ring at most a join timeout, then leaves by itself.
  if (!job_.preconfigured && drained_ && now - drained_at_ > settings_.join_timeout)
    membership_->lose(Status::Closed(node_name(job_, job_.node_rank) + " of job '" + job_.id +
                                     "' is done with it (every rank here left) and closed the ring"));
  return negotiator_.report_stalls(now, stall_after) + executor_.report_stalls(now, stall_after);
}

}  // namespace ringsync::service::cluster
