// Reading a secret from a file that only its owner may access (a job token,
// a TLS private key): the file must be a regular file that group and others
// can neither read nor write (chmod 600), checked on the open descriptor.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace ringsync {

// The whole content of `path`. `what` names the file in errors ("job token
// file 'PATH'"). Refused: a file that group or others can access, not a
// regular file, or over `max_bytes` (`too_large` says why that is wrong).
Result<std::string> read_private_file(const std::string& path, const std::string& what, std::size_t max_bytes,
                                      const std::string& too_large);

}  // namespace ringsync
