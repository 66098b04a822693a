// stream_table_test.cpp: stream -> bit assignment used for stream-ordered eviction and frees.
#include "interpose/stream_table.h"

#include <gtest/gtest.h>

#include <set>

namespace gswap::interpose {
namespace {

TEST(StreamTable, StableSlotsAndBuckets) {
  StreamTable t;
  unsigned na = 0, nb = 0, nl = 0;
  std::uint64_t a = t.bit(0x1000, false, &na), b = t.bit(0x2000, false, &nb);
  std::uint64_t legacy = t.bit(0, false, &nl);
  EXPECT_NE(na, nb);
  EXPECT_NE(na, nl);
  EXPECT_EQ(a, StreamTable::bucket_bit(na));
  EXPECT_EQ(b, StreamTable::bucket_bit(nb));
  EXPECT_EQ(legacy, StreamTable::bucket_bit(nl));
  unsigned again = 0;
  EXPECT_EQ(a, t.bit(0x1000, false, &again));
  EXPECT_EQ(again, na);
  std::uintptr_t s = 0;
  ASSERT_TRUE(t.stream_of(na, &s));
  EXPECT_EQ(s, 0x1000u);
  ASSERT_TRUE(t.stream_of(nl, &s));
  EXPECT_EQ(s, 0u);
}

TEST(StreamTable, PerThreadStreamsGetTheSpecialBit) {
  StreamTable t;
  unsigned n = 0;
  EXPECT_EQ(t.bit(0, true, &n), StreamTable::kPerThreadBit);
  EXPECT_EQ(n, StreamTable::kPerThreadStream);
  EXPECT_EQ(t.bit(0x2, false), StreamTable::kPerThreadBit);  // CU_STREAM_PER_THREAD
  EXPECT_NE(t.bit(0x3000, true), StreamTable::kPerThreadBit);
}

// No ceiling at 62 streams: hundreds get their own slots; a region's word names their buckets.
TEST(StreamTable, HundredsOfStreamsEachHaveASlot) {
  StreamTable t;
  std::set<unsigned> slots;
  std::set<std::uint64_t> bits;
  for (unsigned i = 0; i < 1000; ++i) {
    unsigned n = 0;
    std::uint64_t bit = t.bit(0x10000 + 0x100 * i, false, &n);
    EXPECT_NE(bit, StreamTable::kUnknownBit);
    EXPECT_EQ(bit, StreamTable::bucket_bit(n));
    slots.insert(n);
    bits.insert(bit);
  }
  EXPECT_EQ(slots.size(), 1000u);
  EXPECT_EQ(bits.size(), StreamTable::kBuckets);
  // Every stream of a bucket can be found from it, as the swapper does.
  std::uint64_t bucket = t.bit(0x10000, false);
  unsigned b = static_cast<unsigned>(__builtin_ctzll(bucket));
  unsigned found = 0;
  for (unsigned slot = b; slot < StreamTable::kSlots; slot += StreamTable::kBuckets) {
    std::uintptr_t s = 0;
    if (t.stream_of(slot, &s)) ++found;
  }
  EXPECT_GE(found, 1000u / StreamTable::kBuckets);
}

TEST(StreamTable, FullTableFallsBackToUnknownAndReleaseFreesSlots) {
  StreamTable t;
  for (unsigned i = 0; i < StreamTable::kSlots; ++i)
    ASSERT_NE(t.bit(0x10000 + 0x100 * i, false), StreamTable::kUnknownBit) << i;
  unsigned n = 0;
  EXPECT_EQ(t.bit(0x999999999, false, &n), StreamTable::kUnknownBit);
  EXPECT_EQ(n, StreamTable::kUnknownStream);
  t.release(0x10000);
  EXPECT_NE(t.bit(0x999999999, false), StreamTable::kUnknownBit);
  // A released stream's slot is reused; other streams are still found past the tombstone.
  EXPECT_NE(t.bit(0x10100, false), StreamTable::kUnknownBit);
}

}  // namespace
}  // namespace gswap::interpose
