// The release version (from CMake's project version), shared by the daemon,
// the CLI and the client library.
#pragma once

#ifndef RINGSYNC_VERSION
#error "RINGSYNC_VERSION is defined by the build (CMakeLists.txt)"
#endif

namespace ringsync {
inline constexpr const char* kVersion = RINGSYNC_VERSION;
}  // namespace ringsync
