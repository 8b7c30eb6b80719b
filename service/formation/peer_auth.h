// How two daemons prove to each other that they hold the job's key without
// sending it: a challenge-response on every control connection.
//
//   worker -> node 0   PeerHello  {job, node rank, ..., Nw}
//   node 0 -> worker   AuthChallenge {Nc, proof(coordinator)}
//   worker -> node 0   AuthProof  {proof(worker)}
//
// Nw and Nc are 32 fresh random bytes per connection; a proof is
// HMAC-SHA256 with the key over a role label and the transcript (job, node
// count, the worker's node rank and UCX address, both nonces), so a proof seen
// on one connection is worth nothing on another (Nc is new each time), and
// node 0's proof cannot be reflected as a worker's (the labels differ). Proofs
// are compared in constant time.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace ringsync::service::formation {

inline constexpr std::size_t kAuthNonceBytes = 32;

enum class AuthRole { kCoordinator, kWorker };

// What both sides of one connection agree on; each proof covers all of it.
struct AuthTranscript {
  std::string_view job_id;
  std::uint32_t num_nodes = 0;
  std::uint32_t node_rank = 0;  // the worker's
  std::span<const std::uint8_t> worker_address;  // the worker's UCX address, as in its hello
  std::span<const std::uint8_t> worker_nonce;
  std::span<const std::uint8_t> coordinator_nonce;
};

// kAuthNonceBytes from OpenSSL's RAND_bytes; empty when it fails.
std::vector<std::uint8_t> auth_nonce();

// HMAC-SHA256(key, role label | transcript), every field length-prefixed.
std::vector<std::uint8_t> auth_proof(std::string_view key, AuthRole role, const AuthTranscript& transcript);

// Same length and bytes, in time that does not depend on where they differ.
bool same_proof(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b);

// The tag key of a keyed job's ring (transport/ucx_tag.h): the first 8
// bytes of HMAC-SHA256(key, "ringsync-data-tags" | job | epoch | every node's
// data-plane address), so each node computes it from its roster and it is
// new for every ring formed; nothing carries it. 0 when the job has no key.
Result<std::uint64_t> data_plane_tag_key(std::string_view key, std::string_view job_id, std::uint64_t epoch,
                                         const std::vector<std::vector<std::uint8_t>>& addresses);

}  // namespace ringsync::service::formation
