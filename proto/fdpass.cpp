// fdpass.cpp: SCM_RIGHTS send and receive (see fdpass.h).
#include "proto/fdpass.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace gswap::proto {

// Room for a few descriptors, so extra ones a peer attaches arrive (and are closed) instead of
// being silently dropped with MSG_CTRUNC.
constexpr std::size_t kMaxFds = 8;

ssize_t send_with_fd(int sock, const void* buf, std::size_t len, int fd, int flags) {
  iovec iov{const_cast<void*>(buf), len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  return sendmsg(sock, &m, flags);
}

ssize_t recv_with_fd(int sock, void* buf, std::size_t len, int* fd, int flags) {
  *fd = -1;
  iovec iov{buf, len};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  ssize_t n = recvmsg(sock, &m, flags | MSG_CMSG_CLOEXEC);
  if (n < 0) return n;
  for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS || c->cmsg_len < CMSG_LEN(0))
      continue;
    std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int got;
      std::memcpy(&got, CMSG_DATA(c) + i * sizeof(int), sizeof got);
      if (*fd < 0)
        *fd = got;
      else
        close(got);
    }
  }
  return n;
}

}  // namespace gswap::proto
