// File descriptors over Unix stream sockets (SCM_RIGHTS).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <vector>

namespace ringsync {

// sendmsg() of `len` bytes with `fd` attached to the first byte.
// Returns bytes sent, or -errno (-EAGAIN on a full non-blocking socket).
ssize_t send_with_fd(int sock, const void* data, std::size_t len, int fd);

// recvmsg() of up to `len` bytes; descriptors that arrive are appended to `fds`
// (close-on-exec). `flags` adds to recvmsg's (MSG_DONTWAIT). Returns bytes
// read (0 at end of stream), or -errno.
ssize_t recv_with_fds(int sock, void* data, std::size_t len, std::vector<int>& fds, int flags = 0);

}  // namespace ringsync
