#include "service/formation/peer_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace ringsync::service::formation {

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

std::vector<std::uint8_t> hmac_sha256(std::string_view key, const std::vector<std::uint8_t>& message) {
  std::vector<std::uint8_t> digest(EVP_MAX_MD_SIZE);
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), message.data(), message.size(), digest.data(),
            &length))
    return {};
  digest.resize(length);
  return digest;
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
  return hmac_sha256(key, message);
}

bool same_proof(std::span<const std::uint8_t> a, std::span<const std::uint8_t> b) {
  return !a.empty() && a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

Result<std::uint64_t> data_plane_tag_key(std::string_view key, std::string_view job_id, std::uint64_t epoch,
                                         const std::vector<std::vector<std::uint8_t>>& addresses) {
  if (key.empty()) return std::uint64_t{0};
  std::vector<std::uint8_t> message;
  field(message, std::string_view("ringsync-data-tags"));
  field(message, job_id);
  field(message, static_cast<std::uint32_t>(epoch));
  field(message, static_cast<std::uint32_t>(epoch >> 32));
  for (const auto& address : addresses) field(message, address);
  const std::vector<std::uint8_t> digest = hmac_sha256(key, message);
  if (digest.size() < 8) return Status::Internal("cannot compute the data-plane tag key (HMAC-SHA256 failed)");
  std::uint64_t tag_key = 0;
  for (int i = 0; i < 8; ++i) tag_key |= static_cast<std::uint64_t>(digest[static_cast<std::size_t>(i)]) << (8 * i);
  return tag_key;
}

}  // namespace ringsync::service::formation
