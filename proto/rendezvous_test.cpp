// rendezvous_test.cpp: the runtime directory and socket naming rule both sides use.
#include "proto/rendezvous.h"

#include <gtest/gtest.h>

#include <string>

namespace gswap::proto {
namespace {

TEST(Rendezvous, RuntimeDirPrecedence) {
  char buf[256];
  ASSERT_TRUE(runtime_dir("/tmp/x", "/run/user/5", buf, sizeof buf));
  EXPECT_STREQ(buf, "/tmp/x");
  ASSERT_TRUE(runtime_dir("", "/run/user/5", buf, sizeof buf));
  EXPECT_STREQ(buf, "/run/user/5/gswap");
  ASSERT_TRUE(runtime_dir(nullptr, nullptr, buf, sizeof buf));
  EXPECT_STREQ(buf, "/run/gswap");
  ASSERT_TRUE(runtime_dir(nullptr, "", buf, sizeof buf));
  EXPECT_STREQ(buf, "/run/gswap");
}

TEST(Rendezvous, SocketAndLockNames) {
  char buf[256];
  ASSERT_TRUE(socket_path("/run/gswap", "GPU-1", buf, sizeof buf));
  EXPECT_STREQ(buf, "/run/gswap/GPU-1.sock");
  ASSERT_TRUE(lock_path("/run/gswap", "GPU-1", buf, sizeof buf));
  EXPECT_STREQ(buf, "/run/gswap/GPU-1.lock");
}

TEST(Rendezvous, TooLongIsRefusedNotTruncated) {
  char buf[256];
  std::string dir(120, 'd');
  EXPECT_FALSE(socket_path(dir.c_str(), "GPU-1", buf, sizeof buf));  // sun_path is 108 bytes
  EXPECT_TRUE(lock_path(dir.c_str(), "GPU-1", buf, sizeof buf));
  char small[8];
  EXPECT_FALSE(runtime_dir("/a/long/dir", nullptr, small, sizeof small));
}

}  // namespace
}  // namespace gswap::proto
