#include "service/rendezvous/token_proof.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstdio>

namespace ringsync::service::rendezvous {

namespace {

std::string hex(const unsigned char* data, std::size_t n) {
  std::string out;
  char two[3];
  for (std::size_t i = 0; i < n; ++i) {
    std::snprintf(two, sizeof(two), "%02x", data[i]);
    out += two;
  }
  return out;
}

}  // namespace

std::string random_salt() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return "";
  return hex(bytes, sizeof(bytes));
}

std::string token_proof(const std::string& token, const std::string& job, const std::string& salt) {
  const std::string message = "ringsync job " + job + " " + salt;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  return hex(digest, length);
}

bool same_proof(const std::string& a, const std::string& b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace ringsync::service::rendezvous
