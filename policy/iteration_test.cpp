// iteration_test.cpp: iteration detection on clean and noisy marker-less streams.
#include "policy/iteration.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace gswap::policy {
namespace {

// An iteration shaped like a transformer step: embedding, L identical blocks forward, L blocks
// backward, optimizer. The identical blocks create a strong sub-period that must not win.
std::vector<std::uint64_t> transformer_iteration(int layers) {
  std::vector<std::uint64_t> it = {1000, 1001};
  for (int l = 0; l < layers; ++l)
    for (std::uint64_t k : {10, 11, 12, 13, 14}) it.push_back(k);
  for (int l = 0; l < layers; ++l)
    for (std::uint64_t k : {20, 21, 22, 23, 24, 25}) it.push_back(k);
  for (std::uint64_t k : {900, 901, 902}) it.push_back(k);
  return it;
}

std::vector<std::uint64_t> repeat_with_noise(const std::vector<std::uint64_t>& it, int times,
                                             double noise, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<std::uint64_t> s;
  for (int r = 0; r < times; ++r) {
    for (std::uint64_t x : it) {
      double d = u(rng);
      if (d < noise / 2) continue;                        // a dropped launch
      s.push_back(d < noise ? rng() | (1ull << 63) : x);  // or a stray one replacing it
    }
  }
  return s;
}

TEST(IterationTest, FindsCleanPeriod) {
  auto it = transformer_iteration(4);
  auto s = repeat_with_noise(it, 3, 0.0, 1);
  auto r = detect_iteration_period(s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->period, it.size());
  EXPECT_EQ(r->phase, 2 * it.size());
  EXPECT_DOUBLE_EQ(r->match, 1.0);
}

// A candidate one short of the period drifts onto the true one with a shift; the exact candidate
// must still be the one reported, with its perfect score.
TEST(IterationTest, ExactShortRepeatReportsPerfectMatch) {
  std::vector<std::uint64_t> s;
  for (int it = 0; it < 256; ++it)
    for (std::uint64_t k = 0; k < 8; ++k) s.push_back(100 + k);
  PeriodOptions opt;
  opt.max_period = s.size() / 2;
  auto r = detect_iteration_period(s, opt);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->period, 8u);
  EXPECT_DOUBLE_EQ(r->match, 1.0);
}

TEST(IterationTest, RepeatedLayersDoNotWin) {
  auto it = transformer_iteration(24);
  auto s = repeat_with_noise(it, 3, 0.0, 2);
  auto r = detect_iteration_period(s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->period, it.size());
}

TEST(IterationTest, NoisyStreamWithReplacementsOnly) {
  // Replacement noise keeps alignment, so the exact period must still be found.
  auto it = transformer_iteration(12);
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> s;
  for (int r = 0; r < 4; ++r)
    for (std::uint64_t x : it) s.push_back(rng() % 100 < 3 ? (rng() | (1ull << 63)) : x);
  PeriodOptions o;
  o.min_match = 0.8;
  auto r = detect_iteration_period(s, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->period, it.size());
  EXPECT_LT(r->match, 1.0);
}

TEST(IterationTest, NoisyStreamWithDropsAndInsertions) {
  // 2% of launches dropped or replaced, and stray launches inserted: alignment shifts by one
  // now and then, and the period must still be found.
  auto it = transformer_iteration(12);
  std::mt19937_64 rng(5);
  std::vector<std::uint64_t> s;
  for (int r = 0; r < 4; ++r) {
    for (std::uint64_t x : it) {
      const auto d = rng() % 100;
      if (d == 0) continue;                           // dropped
      if (d == 1) s.push_back(rng() | (1ull << 63));  // a stray launch before it
      s.push_back(d == 2 ? (rng() | (1ull << 63)) : x);
    }
  }
  PeriodOptions o;
  o.min_match = 0.8;
  auto r = detect_iteration_period(s, o);
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR(static_cast<double>(r->period), static_cast<double>(it.size()), 3.0);
  EXPECT_GT(r->match, 0.9);
}

TEST(IterationTest, LongStreamUsesCandidateSearch) {
  // 3 x 20,000 symbols: too long for the exhaustive scan, so the recurrence candidates are used.
  std::mt19937_64 rng(11);
  std::vector<std::uint64_t> it(20000);
  for (auto& x : it) x = rng() % 50;  // a small alphabet, as kernel identities are
  std::vector<std::uint64_t> s;
  for (int r = 0; r < 3; ++r)
    for (std::uint64_t x : it) s.push_back(rng() % 100 == 0 ? 999 : x);
  auto r = detect_iteration_period(s);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->period, 20000u);
}

TEST(IterationTest, RandomStreamHasNoPeriod) {
  std::mt19937_64 rng(3);
  std::vector<std::uint64_t> s(3000);
  for (auto& x : s) x = rng() % 1000;
  EXPECT_FALSE(detect_iteration_period(s).has_value());
}

TEST(IterationTest, TooShortForTwoRepeats) {
  auto it = transformer_iteration(2);
  std::vector<std::uint64_t> s(it.begin(), it.end());
  s.insert(s.end(), it.begin(), it.begin() + 5);
  EXPECT_FALSE(detect_iteration_period(s).has_value());
}

// A trace of three marked iterations is planned and simulated as its last one: its launches, and
// the regions live in it (the weights from before, its own activations), not the others'.
TEST(IterationTest, TheLastMarkedIterationIsTheOnePlanned) {
  Trace t;
  t.device = {1ull << 30, 1e9, 1e9};
  for (Seq s = 0; s < 9; ++s) t.launches.push_back({s, 10.0 * s, 10.0, 0, {}, "k"});
  t.regions.push_back({1, 4 << 20, 0, std::nullopt, std::nullopt});  // weights
  t.regions.push_back({2, 2 << 20, 0, Seq{2}, std::nullopt});        // iteration 1's
  t.regions.push_back({3, 2 << 20, 6, Seq{8}, std::nullopt});        // iteration 3's
  t.iterations = {{0, 2}, {3, 5}, {6, 8}};
  const Trace last = last_marked_iteration(t);
  ASSERT_EQ(last.launches.size(), 3u);
  EXPECT_EQ(last.launches.front().seq, 6u);
  ASSERT_EQ(last.regions.size(), 2u);
  EXPECT_EQ(last.regions[0].id, 1u);
  EXPECT_EQ(last.regions[1].id, 3u);
  ASSERT_EQ(last.iterations.size(), 1u);
  EXPECT_EQ(last.iterations[0].first_seq, 6u);
  t.iterations.push_back({100, 200});  // a last mark with no launch: the one before it
  EXPECT_EQ(last_marked_iteration(t).launches.front().seq, 6u);
  t.iterations = {{100, 200}, {300, 400}};  // no mark with a launch: the trace as it is
  EXPECT_EQ(last_marked_iteration(t).launches.size(), 9u);
  t.iterations.resize(1);  // one mark selecting nothing: the trace as it is
  EXPECT_EQ(last_marked_iteration(t).launches.size(), 9u);
  t.iterations = {{3, 5}};  // one mark: its launches, as with several
  ASSERT_EQ(last_marked_iteration(t).launches.size(), 3u);
  EXPECT_EQ(last_marked_iteration(t).launches.front().seq, 3u);
}

// Many marks that select nothing, after the one that does, cost a binary search each, not a
// scan of the launches (200,000 of each took 47 s).
TEST(IterationTest, MarksSelectingNothingAreCheap) {
  Trace t;
  t.device = {1ull << 30, 1e9, 1e9};
  constexpr Seq kLaunches = 200'000;
  for (Seq s = 0; s < kLaunches; ++s) t.launches.push_back({s, 1.0 * s, 1.0, 0, {}, "k"});
  t.iterations.push_back({10, 19});
  for (Seq k = 0; k < kLaunches; ++k) t.iterations.push_back({Seq{1} << 40, Seq{1} << 40});
  const Trace last = last_marked_iteration(t);
  ASSERT_EQ(last.launches.size(), 10u);
  EXPECT_EQ(last.launches.front().seq, 10u);
}

}  // namespace
}  // namespace gswap::policy
