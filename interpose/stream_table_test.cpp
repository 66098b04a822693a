// stream_table_test.cpp: stream -> bit assignment used for stream-ordered eviction and frees.
#include "interpose/stream_table.h"

#include <gtest/gtest.h>

#include <set>

namespace gswap::interpose {
namespace {

TEST(StreamTable, StableDistinctBits) {
  StreamTable t;
  std::uint64_t a = t.bit(0x1000, false), b = t.bit(0x2000, false), legacy = t.bit(0, false);
  EXPECT_NE(a, b);
  EXPECT_NE(a, legacy);
  EXPECT_EQ(a, t.bit(0x1000, false));
  std::uintptr_t s = 0;
  unsigned slot = static_cast<unsigned>(__builtin_ctzll(a));
  ASSERT_TRUE(t.stream_of(slot, &s));
  EXPECT_EQ(s, 0x1000u);
  ASSERT_TRUE(t.stream_of(static_cast<unsigned>(__builtin_ctzll(legacy)), &s));
  EXPECT_EQ(s, 0u);
}

TEST(StreamTable, PerThreadStreamsGetTheSpecialBit) {
  StreamTable t;
  EXPECT_EQ(t.bit(0, true), StreamTable::kPerThreadBit);
  EXPECT_EQ(t.bit(0x2, false), StreamTable::kPerThreadBit);  // CU_STREAM_PER_THREAD
  EXPECT_NE(t.bit(0x3000, true), StreamTable::kPerThreadBit);
}

TEST(StreamTable, FullTableFallsBackToUnknownAndReleaseFreesSlots) {
  StreamTable t;
  std::set<std::uint64_t> bits;
  for (unsigned i = 0; i < StreamTable::kSlots; ++i) bits.insert(t.bit(0x10000 + 0x100 * i, false));
  EXPECT_EQ(bits.size(), StreamTable::kSlots);
  EXPECT_EQ(t.bit(0x999999, false), StreamTable::kUnknownBit);
  t.release(0x10000);
  std::uint64_t b = t.bit(0x999999, false);
  EXPECT_NE(b, StreamTable::kUnknownBit);
}

}  // namespace
}  // namespace gswap::interpose
