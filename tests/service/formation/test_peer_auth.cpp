// The proofs of the job's key that daemons exchange instead of the key.
#include <doctest/doctest.h>

#include <vector>

#include "service/formation/peer_auth.h"

namespace test_service_formation_peer_auth {

using namespace ringsync::service::formation;

namespace {

struct Connection {
  std::vector<std::uint8_t> address{1, 2, 3};
  std::vector<std::uint8_t> worker_nonce = auth_nonce();
  std::vector<std::uint8_t> coordinator_nonce = auth_nonce();
  AuthTranscript transcript() const {
    return AuthTranscript{"job", 3, 1, address, worker_nonce, coordinator_nonce};
  }
};

}  // namespace

TEST_CASE("auth: nonces are fresh 32-byte values") {
  const auto a = auth_nonce();
  const auto b = auth_nonce();
  CHECK(a.size() == kAuthNonceBytes);
  CHECK(b.size() == kAuthNonceBytes);
  CHECK(a != b);
}

TEST_CASE("auth: a proof is HMAC-SHA256 that only the same key, role and transcript reproduce") {
  Connection c;
  const auto proof = auth_proof("key", AuthRole::kWorker, c.transcript());
  CHECK(proof.size() == 32);
  CHECK(same_proof(proof, auth_proof("key", AuthRole::kWorker, c.transcript())));
  CHECK_FALSE(same_proof(proof, auth_proof("kex", AuthRole::kWorker, c.transcript())));
  // Node 0's proof cannot be reflected back as a worker's.
  CHECK_FALSE(same_proof(proof, auth_proof("key", AuthRole::kCoordinator, c.transcript())));
  // Every field of the connection counts.
  auto t = c.transcript();
  t.job_id = "job2";
  CHECK_FALSE(same_proof(proof, auth_proof("key", AuthRole::kWorker, t)));
  t = c.transcript();
  t.num_nodes = 4;
  CHECK_FALSE(same_proof(proof, auth_proof("key", AuthRole::kWorker, t)));
  t = c.transcript();
  t.node_rank = 2;
  CHECK_FALSE(same_proof(proof, auth_proof("key", AuthRole::kWorker, t)));
  const std::vector<std::uint8_t> other_address{1, 2, 4};
  t = c.transcript();
  t.worker_address = other_address;
  CHECK_FALSE(same_proof(proof, auth_proof("key", AuthRole::kWorker, t)));
  // A replayed proof: the same hello on a new connection meets a new nonce.
  Connection replay = c;
  replay.coordinator_nonce = auth_nonce();
  CHECK_FALSE(same_proof(proof, auth_proof("key", AuthRole::kWorker, replay.transcript())));
}

TEST_CASE("auth: proofs compare whole, and an empty proof never matches") {
  const std::vector<std::uint8_t> a{1, 2, 3};
  CHECK(same_proof(a, std::vector<std::uint8_t>{1, 2, 3}));
  CHECK_FALSE(same_proof(a, std::vector<std::uint8_t>{1, 2}));
  CHECK_FALSE(same_proof(a, std::vector<std::uint8_t>{1, 2, 4}));
  CHECK_FALSE(same_proof({}, {}));
}

}  // namespace test_service_formation_peer_auth
