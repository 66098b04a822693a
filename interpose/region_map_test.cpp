// region_map_test.cpp: the launch-path address lookup.
#include "interpose/region_map.h"

#include <gtest/gtest.h>

namespace gswap::interpose {
namespace {

constexpr std::uint64_t kBase = 0x7f0000000000ull;
constexpr unsigned kShift = 21;  // 2 MiB granules
constexpr std::uint64_t kGran = 1ull << kShift;

TEST(RegionMap, FindsInteriorPointersAndRejectsOutside) {
  RegionMap m;
  ASSERT_TRUE(m.init(kBase, 64 * kGran, kShift));
  Region a, b;
  m.set(kBase + 2 * kGran, 3 * kGran, &a);
  m.set(kBase + 5 * kGran, kGran, &b);
  EXPECT_EQ(m.find(kBase + 2 * kGran), &a);
  EXPECT_EQ(m.find(kBase + 2 * kGran + 12345), &a);
  EXPECT_EQ(m.find(kBase + 5 * kGran - 1), &a);
  EXPECT_EQ(m.find(kBase + 5 * kGran), &b);
  EXPECT_EQ(m.find(kBase + 6 * kGran), nullptr);
  EXPECT_EQ(m.find(kBase - 1), nullptr);
  EXPECT_EQ(m.find(kBase + 64 * kGran), nullptr);
  EXPECT_EQ(m.find(0), nullptr);
  EXPECT_EQ(m.find(~0ull), nullptr);
  m.clear(kBase + 2 * kGran, 3 * kGran);
  EXPECT_EQ(m.find(kBase + 3 * kGran), nullptr);
  EXPECT_EQ(m.find(kBase + 5 * kGran), &b);
}

TEST(RegionMap, UninitialisedMapFindsNothing) {
  RegionMap m;
  EXPECT_EQ(m.find(kBase), nullptr);
  EXPECT_EQ(m.find(0), nullptr);
}

TEST(RegionMap, PartialLastGranuleIsCovered) {
  RegionMap m;
  ASSERT_TRUE(m.init(kBase, 8 * kGran, kShift));
  Region a;
  m.set(kBase, kGran + 1, &a);  // rounds up to two granules
  EXPECT_EQ(m.find(kBase + kGran + 100), &a);
  EXPECT_EQ(m.find(kBase + 2 * kGran), nullptr);
}

}  // namespace
}  // namespace gswap::interpose
