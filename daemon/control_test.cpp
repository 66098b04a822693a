// control_test.cpp: gswapd's side of a control exchange (ControlExchange) never blocks, on a
// socket pair standing for gswapctl: a peer that says nothing, half a request, a request too
// large, a response the peer does not read.
#include "daemon/control.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

namespace gswap::daemon {
namespace {

struct Pair {
  int daemon = -1, peer = -1;
  Pair() {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) == 0)
      daemon = fds[0], peer = fds[1];
  }
  ~Pair() {
    if (daemon >= 0) close(daemon);
    if (peer >= 0) close(peer);
  }
};

void send_header(int fd, std::uint64_t len) {
  ASSERT_EQ(send(fd, &len, sizeof len, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof len));
}

TEST(ControlExchange, ASilentPeerDoesNotBlock) {
  Pair p;
  ASSERT_GE(p.daemon, 0);
  ControlExchange x(p.daemon);
  std::string error;
  x.read(&error);  // nothing there: returns at once
  EXPECT_EQ(x.state(), ControlExchange::State::kReading);
  EXPECT_FALSE(x.request_ready());
  send_header(p.peer, 10);  // half a request
  x.read(&error);
  EXPECT_EQ(x.state(), ControlExchange::State::kReading);
  EXPECT_FALSE(x.request_ready());
  ASSERT_EQ(send(p.peer, "{\"a\":", 5, MSG_NOSIGNAL), 5);
  ASSERT_EQ(send(p.peer, "true}", 5, MSG_NOSIGNAL), 5);
  x.read(&error);
  ASSERT_TRUE(x.request_ready()) << error;
  EXPECT_EQ(x.request(), "{\"a\":true}");
}

TEST(ControlExchange, ABadOrOversizedFrameFails) {
  {
    Pair p;
    ControlExchange x(p.daemon);
    send_header(p.peer, kMaxRequestBytes + 1);
    std::string error;
    x.read(&error);
    EXPECT_EQ(x.state(), ControlExchange::State::kFailed);
    EXPECT_NE(error.find("exceeds"), std::string::npos) << error;
  }
  {
    Pair p;
    ControlExchange x(p.daemon);
    ASSERT_EQ(send(p.peer, "abc", 3, MSG_NOSIGNAL), 3);  // not an 8-byte header
    std::string error;
    x.read(&error);
    EXPECT_EQ(x.state(), ControlExchange::State::kFailed);
    EXPECT_EQ(error, "bad frame header");
  }
  {
    // One packet longer than a chunk: the socket would cut it short without a word.
    Pair p;
    ControlExchange x(p.daemon);
    const std::string body = "{\"a\":\"" + std::string(kChunk + 100, 'x') + "\"}";
    send_header(p.peer, body.size());
    ASSERT_EQ(send(p.peer, body.data(), body.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(body.size()));
    std::string error;
    x.read(&error);
    EXPECT_EQ(x.state(), ControlExchange::State::kFailed);
    EXPECT_NE(error.find("a packet of 32876 bytes"), std::string::npos) << error;
    // The same from the other side, for the reader of a response.
    Pair q;
    send_header(q.peer, body.size());
    ASSERT_EQ(send(q.peer, body.data(), body.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(body.size()));
    std::string response;
    EXPECT_FALSE(recv_frame(q.daemon, &response, 1 << 20, &error));
    EXPECT_NE(error.find("a packet of 32876 bytes"), std::string::npos) << error;
  }
  {
    Pair p;
    ControlExchange x(p.daemon);
    close(p.peer);
    p.peer = -1;
    std::string error;
    x.read(&error);
    EXPECT_EQ(x.state(), ControlExchange::State::kFailed);
    EXPECT_EQ(error, "connection closed");
  }
}

TEST(ControlExchange, AResponseTheSocketCannotTakeWaitsAndThenArrivesWhole) {
  Pair p;
  ControlExchange x(p.daemon);
  send_header(p.peer, 2);
  ASSERT_EQ(send(p.peer, "{}", 2, MSG_NOSIGNAL), 2);
  std::string error;
  x.read(&error);
  ASSERT_TRUE(x.request_ready());
  // Far more than a socket buffer: the peer reads nothing yet, and respond() returns anyway.
  std::string body(8u << 20, 'x');
  for (std::size_t i = 0; i < body.size(); i += 4099) body[i] = static_cast<char>('a' + i % 26);
  x.respond(body, &error);
  ASSERT_EQ(x.state(), ControlExchange::State::kWriting) << error;
  // The peer reads; the daemon writes whenever asked, never blocking.
  std::string got;
  std::uint64_t len = 0;
  bool have_len = false;
  char buf[kChunk];
  while (!have_len || got.size() < len) {
    x.write(&error);
    ASSERT_NE(x.state(), ControlExchange::State::kFailed) << error;
    ssize_t n = recv(p.peer, buf, sizeof buf, MSG_DONTWAIT);
    if (n <= 0) continue;
    if (!have_len) {
      ASSERT_EQ(n, static_cast<ssize_t>(sizeof len));
      std::memcpy(&len, buf, sizeof len);
      have_len = true;
    } else {
      got.append(buf, static_cast<std::size_t>(n));
    }
  }
  x.write(&error);
  EXPECT_EQ(x.state(), ControlExchange::State::kDone);
  EXPECT_EQ(len, body.size());
  EXPECT_TRUE(got == body);
}

}  // namespace
}  // namespace gswap::daemon
