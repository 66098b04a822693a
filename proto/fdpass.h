// fdpass.h: one message with one file descriptor attached (SCM_RIGHTS), both directions.
//
// The hello exchange passes the shared-memory memfd from gswapd to the library this way; the
// daemon's send, the library's receive and the server test's receive all use these two calls so
// the control-message parsing is written once. Linked into the preload library: no allocation, no
// exceptions, errno left as the system call set it.
#pragma once

#include <sys/types.h>

#include <cstddef>

namespace gswap::proto {

// Sends `len` bytes from `buf` as one message with `fd` attached. Returns what sendmsg returns.
ssize_t send_with_fd(int sock, const void* buf, std::size_t len, int fd, int flags);

// Receives one message of at most `len` bytes into `buf` (MSG_CMSG_CLOEXEC added to `flags`).
// *fd gets the first descriptor passed with it, or -1 when none came; any further descriptors the
// peer attached are closed, so a misbehaving peer cannot leak descriptors into this process.
// Returns what recvmsg returns; on error *fd is -1.
ssize_t recv_with_fd(int sock, void* buf, std::size_t len, int* fd, int flags);

}  // namespace gswap::proto
