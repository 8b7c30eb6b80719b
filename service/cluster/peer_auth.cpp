#include "service/cluster/peer_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace ringsync::service::cluster {

namespace {

// Appends a 4-byte little-endian length, then the bytes: no two transcripts
// encode alike.
void field(std::vector<std::uint8_t>& out, std::span<const std::uint8_t> bytes) {
  const auto n = static_cast<std::uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::uint8_t>(n >> (8 * i)));
  out.insert(out.end(), bytes.begin(), bytes.end());
}

void field(std::vector<std::uint8_t>& out, std::string_view text) {
  field(out, std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
}

void field(std::vector<std::uint8_t>& out, std::uint32_t value) {
  std::uint8_t le[4];
  for (int i = 0; i < 4; ++i) le[i] = static_cast<std::uint8_t>(value >> (8 * i));
  field(out, std::span<const std::uint8_t>(le, 4));
}

}  // namespace

std::vector<std::uint8_t> auth_nonce() {
  std::vector<std::uint8_t> nonce(kAuthNonceBytes);
  if (RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) != 1) return {};
  return nonce;
}

std::vector<std::uint8_t> auth_proof(std::string_view key, AuthRole role, const AuthTranscript& t) {
  std::vector<std::uint8_t> message;
  field(message, role == AuthRole::kCoordinator ? std::string_view("ringsync-coordinator")
                                                : std::string_view("ringsync-worker"));
  field(message, t.job_id);
  field(message, t.num_nodes);
  field(message, t.node_rank);
  field(message, t.worker_address);
  field(message, t.worker_nonce);
  field(message, t.coordinator_nonce);
  std::vector<std::uint8_t> digest(EVP_MAX_MD_SIZE);
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(), message.size(), digest.data(),
            &length))
    return {};
  digest.resize(length);
  return digest;
}

bool same_proof(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  return !a.empty() && a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ringsync::service::cluster
