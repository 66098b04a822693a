// host_memory_test: the pinned pool over the fake device. cuMemFreeHost waits until the device is
// idle and holds up every thread's driver calls meanwhile, so the pool must not free pinned memory
// while the application runs, except for buffers idle for kIdleTrimNs.
#include "interpose/host_memory.h"

#include <gtest/gtest.h>

#include <vector>

#include "interpose/device_fake.h"

namespace gswap::interpose {
namespace {

constexpr std::uint64_t kMiB = 1ull << 20;

struct Pool {
  FakeDevice dev;
  HostMemory host{dev};
  explicit Pool(std::uint64_t cap) { host.configure(cap, 1 * kMiB); }
  HostBuffer get(std::uint64_t bytes, std::uint64_t now = 0) {
    HostBuffer b;
    EXPECT_TRUE(host.acquire(bytes, now, &b));
    return b;
  }
};

TEST(HostMemory, ReleasedBuffersStayPooledUpToTheCap) {
  Pool p(64 * kMiB);
  std::vector<HostBuffer> held;
  for (int i = 0; i < 8; ++i) held.push_back(p.get(8 * kMiB));
  for (auto& b : held) {
    EXPECT_TRUE(b.pinned);
    p.host.release(&b, 0);
  }
  // The whole cap is pooled (more than the quarter that used to be kept), and nothing was freed.
  EXPECT_EQ(p.host.pooled_bytes(), 64 * kMiB);
  EXPECT_EQ(p.dev.count("host_free"), 0);
  // And it is reused: no new pinned allocation for the same sizes.
  for (auto& b : held) b = p.get(8 * kMiB);
  EXPECT_EQ(p.dev.count("host_alloc"), 8);
  EXPECT_EQ(p.host.pooled_bytes(), 0u);
}

TEST(HostMemory, AtTheCapALargerPooledBufferServesRatherThanAFree) {
  Pool p(32 * kMiB);
  HostBuffer big = p.get(32 * kMiB);
  p.host.release(&big, 0);
  // 4 MiB would waste too much of the 32 MiB buffer under the cap, but no room is left: the pooled
  // buffer serves, nothing is freed.
  HostBuffer small = p.get(4 * kMiB);
  EXPECT_TRUE(small.pinned);
  EXPECT_EQ(small.bytes, 32 * kMiB);
  EXPECT_EQ(p.dev.count("host_free"), 0);
  EXPECT_EQ(p.dev.count("host_alloc"), 1);
  // With the pool empty and the cap reached, a request gets pageable memory, still no free.
  HostBuffer more = p.get(4 * kMiB);
  EXPECT_FALSE(more.pinned);
  EXPECT_EQ(p.dev.count("host_free"), 0);
  p.host.release(&small, 0);
  p.host.release(&more, 0);
}

TEST(HostMemory, UnderTheCapAWastefulMatchIsNotTaken) {
  Pool p(64 * kMiB);
  HostBuffer big = p.get(32 * kMiB);
  p.host.release(&big, 0);
  HostBuffer small = p.get(4 * kMiB);  // room under the cap: a new buffer of the right size
  EXPECT_EQ(small.bytes, 4 * kMiB);
  EXPECT_EQ(p.host.pooled_bytes(), 32 * kMiB);
  p.host.release(&small, 0);
}

TEST(HostMemory, OnlyBuffersIdleForLongAreFreed) {
  Pool p(64 * kMiB);
  HostBuffer a = p.get(8 * kMiB), b = p.get(8 * kMiB);
  p.host.release(&a, 0);
  p.host.release(&b, HostMemory::kIdleTrimNs);
  p.host.trim_idle(HostMemory::kIdleTrimNs + 1);
  EXPECT_EQ(p.dev.count("host_free"), 1);
  EXPECT_EQ(p.host.pooled_bytes(), 8 * kMiB);
  EXPECT_EQ(p.host.pinned_bytes(), 8 * kMiB);
}

}  // namespace
}  // namespace gswap::interpose
