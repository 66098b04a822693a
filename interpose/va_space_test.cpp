// va_space_test.cpp: address allocation inside the reservation.
#include "interpose/va_space.h"

#include <gtest/gtest.h>

namespace gswap::interpose {
namespace {

constexpr std::uint64_t kBase = 0x100000000ull;
constexpr std::uint64_t kG = 1ull << 21;

TEST(VaSpace, FirstFitAndExhaustion) {
  VaSpace v;
  v.init(kBase, 8 * kG);
  EXPECT_EQ(v.alloc(2 * kG), kBase);
  EXPECT_EQ(v.alloc(4 * kG), kBase + 2 * kG);
  EXPECT_EQ(v.alloc(4 * kG), 0u);  // only 2 granules left
  EXPECT_EQ(v.alloc(2 * kG), kBase + 6 * kG);
  EXPECT_EQ(v.free_bytes(), 0u);
}

TEST(VaSpace, FreedRangesCoalesceBothWays) {
  VaSpace v;
  v.init(kBase, 6 * kG);
  std::uint64_t a = v.alloc(2 * kG), b = v.alloc(2 * kG), c = v.alloc(2 * kG);
  v.release(a, 2 * kG);
  v.release(c, 2 * kG);
  EXPECT_EQ(v.fragments(), 2u);
  EXPECT_EQ(v.alloc(4 * kG), 0u);  // fragmented
  v.release(b, 2 * kG);            // joins both neighbours
  EXPECT_EQ(v.fragments(), 1u);
  EXPECT_EQ(v.alloc(6 * kG), kBase);
}

TEST(VaSpace, ReuseAfterFree) {
  VaSpace v;
  v.init(kBase, 4 * kG);
  std::uint64_t a = v.alloc(kG);
  v.alloc(kG);
  v.release(a, kG);
  EXPECT_EQ(v.alloc(kG), a);
}

}  // namespace
}  // namespace gswap::interpose
