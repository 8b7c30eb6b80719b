// Reading a job's key from a file (the daemon's --job-token-file, a
// trainer's RINGSYNC_JOB_TOKEN_FILE): the key stays out of the command line
// (/proc/*/cmdline) and of the environment. The file must be a regular file
// that only its owner may read or write (chmod 600).
#pragma once

#include <string>

#include "common/status.h"

namespace ringsync {

// The file's content without one trailing newline. Refused: a file that group
// or others can access, not a regular file, empty, or over 4 KiB.
Result<std::string> read_job_token_file(const std::string& path);

}  // namespace ringsync
