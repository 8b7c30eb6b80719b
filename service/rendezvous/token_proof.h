// How a job's token is checked through a rendezvous store without being
// stored: the first node writes a random salt and HMAC-SHA256(token, job,
// salt); every later node computes the same from its own token and compares
// in constant time. Someone who can read the store learns neither the token
// nor a value to replay for another job.
#pragma once

#include <string>

namespace ringsync::service::rendezvous {

// 16 random bytes as hex (OpenSSL's RAND_bytes).
std::string random_salt();
// Hex HMAC-SHA256 with the token as key over "ringsync job <job> <salt>".
std::string token_proof(const std::string& token, const std::string& job, const std::string& salt);
// Constant-time comparison of two proofs.
bool same_proof(const std::string& a, const std::string& b);

}  // namespace ringsync::service::rendezvous
