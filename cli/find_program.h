// Finds the program a user named, as a shell would, so that "command not found"
// is reported before anything starts.
#pragma once

#include <string>

#include "common/status.h"

namespace ringsync::cli {

// A name with a '/' is taken as a path; any other name is searched in $PATH.
// Returns the path to execute, or why there is none.
Result<std::string> find_program(const std::string& name);

}  // namespace ringsync::cli
