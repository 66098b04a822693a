// fdpass_test.cpp: send_with_fd/recv_with_fd over a socketpair: the descriptor arrives and refers
// to the same file, a message without one yields -1, and extra descriptors a peer attaches are
// closed rather than leaked.
#include "proto/fdpass.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>

namespace gswap::proto {
namespace {

struct Pair {
  int fd[2];
  Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fd), 0); }
  ~Pair() {
    close(fd[0]);
    close(fd[1]);
  }
};

bool same_file(int a, int b) {
  struct stat sa {
  }, sb{};
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino;
}

TEST(FdPass, DescriptorArrivesWithTheMessage) {
  Pair p;
  int file = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(file, 0);
  const char msg[] = "hello";
  ASSERT_EQ(send_with_fd(p.fd[0], msg, sizeof msg, file, 0), static_cast<ssize_t>(sizeof msg));
  char buf[16] = {};
  int got = -1;
  ASSERT_EQ(recv_with_fd(p.fd[1], buf, sizeof buf, &got, 0), static_cast<ssize_t>(sizeof msg));
  EXPECT_STREQ(buf, "hello");
  ASSERT_GE(got, 0);
  EXPECT_NE(got, file);
  EXPECT_TRUE(same_file(got, file));
  EXPECT_EQ(fcntl(got, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  close(got);
  close(file);
}

TEST(FdPass, NoDescriptorGivesMinusOne) {
  Pair p;
  ASSERT_EQ(send(p.fd[0], "x", 1, 0), 1);
  char buf[4];
  int got = 123;
  EXPECT_EQ(recv_with_fd(p.fd[1], buf, sizeof buf, &got, 0), 1);
  EXPECT_EQ(got, -1);
  close(p.fd[0]);
  p.fd[0] = -1;
  got = 123;
  EXPECT_EQ(recv_with_fd(p.fd[1], buf, sizeof buf, &got, 0), 0);  // peer closed
  EXPECT_EQ(got, -1);
}

TEST(FdPass, ExtraDescriptorsAreClosed) {
  Pair p;
  int files[3];
  for (int& f : files) ASSERT_GE(f = open("/dev/null", O_RDONLY | O_CLOEXEC), 0);
  // Hand-built message carrying three descriptors.
  char byte = 'x';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof files)] = {};
  msghdr m{};
  m.msg_iov = &iov;
  m.msg_iovlen = 1;
  m.msg_control = control;
  m.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&m);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof files);
  std::memcpy(CMSG_DATA(c), files, sizeof files);
  ASSERT_EQ(sendmsg(p.fd[0], &m, 0), 1);
  for (int f : files) close(f);
  // The descriptors the receive gets are the lowest free numbers: the first is kept, and the
  // other two must be free again afterwards.
  int probe[2];
  char buf[4];
  int got = -1;
  ASSERT_EQ(recv_with_fd(p.fd[1], buf, sizeof buf, &got, 0), 1);
  ASSERT_GE(got, 0);
  for (int& f : probe) ASSERT_GE(f = open("/dev/null", O_RDONLY | O_CLOEXEC), 0);
  // With the extras leaked, both probes would land above three open descriptors past `got`.
  EXPECT_LT(probe[0], got + 3);
  EXPECT_LT(probe[1], got + 3);
  for (int f : probe) close(f);
  close(got);
}

}  // namespace
}  // namespace gswap::proto
