// cupti_join_test.cpp: pairing CUPTI's external correlation and activity records (cupti_join.h).
#include "interpose/cupti_join.h"

#include <gtest/gtest.h>

#include <memory>

namespace gswap::interpose::cupti {
namespace {

TEST(CuptiJoin, PairsInEitherOrder) {
  auto j = std::make_unique<Join>();
  Timing t;
  // The external record first (the usual order: written when the call is made).
  EXPECT_FALSE(j->external(7, 1001, &t));
  ASSERT_TRUE(j->activity(7, 50, 80, &t));
  EXPECT_EQ(t.seq, 1001u);
  EXPECT_EQ(t.start_ns, 50u);
  EXPECT_EQ(t.end_ns, 80u);
  // The activity record first (another buffer delivered before the one with the external one).
  EXPECT_FALSE(j->activity(8, 90, 95, &t));
  ASSERT_TRUE(j->external(8, 1002, &t));
  EXPECT_EQ(t.seq, 1002u);
  EXPECT_EQ(t.start_ns, 90u);
  EXPECT_EQ(t.end_ns, 95u);
  EXPECT_EQ(j->lost(), 0u);
}

TEST(CuptiJoin, PairsOnlyRecordsOfTheSameCall) {
  auto j = std::make_unique<Join>();
  Timing t;
  // Calls made with nothing pushed (gswap's own copies, launches not measured) have activity
  // records only; they never pair with a measured call's external record.
  EXPECT_FALSE(j->activity(10, 1, 2, &t));
  EXPECT_FALSE(j->external(11, 2001, &t));
  EXPECT_FALSE(j->activity(12, 3, 4, &t));
  ASSERT_TRUE(j->activity(11, 5, 6, &t));
  EXPECT_EQ(t.seq, 2001u);
  EXPECT_EQ(t.start_ns, 5u);
  // A slot reused by a call kSlots later: the old half is not paired with the new call.
  EXPECT_FALSE(j->external(20, 3001, &t));
  EXPECT_FALSE(j->activity(20 + Join::kSlots, 7, 8, &t));
  EXPECT_FALSE(j->activity(20, 9, 10, &t));  // its external record was overwritten: no pair
  EXPECT_EQ(j->lost(), 1u);
  // Once paired, a second activity record of the same call finds nothing to pair with.
  EXPECT_FALSE(j->external(30, 4001, &t));
  EXPECT_TRUE(j->activity(30, 11, 12, &t));
  EXPECT_FALSE(j->activity(30, 13, 14, &t));
}

TEST(CuptiJoin, ManyCallsInFlightAtOnce) {
  auto j = std::make_unique<Join>();
  Timing t;
  // Half the calls' activity records arrive before their external records, half after, with
  // thousands of calls between a record and its partner.
  constexpr std::uint32_t kCalls = 20000;
  std::uint64_t paired = 0;
  for (std::uint32_t c = 0; c < kCalls; ++c) {
    if (c % 2) {
      if (j->activity(c, c * 10, c * 10 + 3, &t)) ++paired;
    } else if (j->external(c, 100000 + c, &t)) {
      ++paired;
    }
  }
  for (std::uint32_t c = 0; c < kCalls; ++c) {
    bool got = c % 2 ? j->external(c, 100000 + c, &t) : j->activity(c, c * 10, c * 10 + 3, &t);
    ASSERT_TRUE(got) << c;
    EXPECT_EQ(t.seq, 100000u + c);
    EXPECT_EQ(t.start_ns, c * 10u);
    ++paired;
  }
  EXPECT_EQ(paired, kCalls);
  EXPECT_EQ(j->lost(), 0u);
}

}  // namespace
}  // namespace gswap::interpose::cupti
