// analysis_test.cpp: lifetimes, the live-bytes curve, working sets and the ideal timeline; and
// the segment tree the planner keeps its memory curve in.
#include "policy/analysis.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "policy/segment_tree.h"
#include "policy/test_traces.h"

namespace gswap::policy {
namespace {

using testing::add_region;
using testing::empty_trace;
using testing::kMiB;

TEST(AnalysisTest, SmallRegionsBesideTheWorkingSetMakeABudgetImpossible) {
  Trace t = empty_trace(3, 10.0, 1e9);
  add_region(t, 4 * kMiB, 0, -1, {1});
  add_region(t, 1 * kMiB, 0, -1, {0, 2});  // under 2 MiB: never evicted
  Analysis a = analyze(t);
  EXPECT_EQ(a.max_working_set, 4 * kMiB);
  EXPECT_EQ(a.max_min_resident, 5 * kMiB);
  const std::string why = impossible_budget_reason(a, 4 * kMiB + kMiB / 2);
  EXPECT_NE(why.find("launch 1"), std::string::npos) << why;
  EXPECT_NE(why.find("under 2 MiB"), std::string::npos) << why;
  EXPECT_TRUE(impossible_budget_reason(a, 5 * kMiB).empty());
}

// An iteration cut where an activation of the one before is still to be read: the trace has it
// twice, carried over (allocated before the first launch, freed in the iteration) and allocated
// again for the next iteration (freed after the last launch). They pair by size and lifetime when
// one iteration's length or more apart; nothing else pairs.
TEST(AnalysisTest, ARegionCarriedOverPairsWithItsNextInstance) {
  Trace t = empty_trace(10, 10.0, 1e9);
  for (Launch& l : t.launches) l.seq += 100;               // seqs 100..109
  RegionId x = add_region(t, 4 * kMiB, 95, 102, {0, 2});   // alloc 95, free 103
  RegionId y = add_region(t, 4 * kMiB, 105, 112, {5, 7});  // the same, 10 seqs later
  add_region(t, 4 * kMiB, 106, 111, {6});                  // another lifetime
  RegionId w = add_region(t, 2 * kMiB, 96, 103, {1});      // no region of its size follows
  RegionId u = add_region(t, 2 * kMiB, 98, 100, {0});      // alloc 98, free 101
  add_region(t, 2 * kMiB, 104, 106, {4, 6});               // 6 seqs later: under an iteration
  add_region(t, 4 * kMiB, 0, -1, {0, 9});                  // persistent
  Analysis a = analyze(t);
  auto at = [&](RegionId id) { return a.index.at(id); };
  EXPECT_EQ(a.next_instance[at(x)], at(y));
  EXPECT_EQ(a.next_instance[at(w)], kNoRegion);
  EXPECT_EQ(a.next_instance[at(u)], kNoRegion);
  for (std::size_t r = 0; r < t.regions.size(); ++r) {
    if (r != at(x)) {
      EXPECT_EQ(a.next_instance[r], kNoRegion) << "region " << t.regions[r].id;
    }
  }
}

TEST(AnalysisTest, LifetimesAndLiveBytes) {
  Trace t = empty_trace(6, 10.0, 1e9);
  add_region(t, 4 * kMiB, 0, -1, {0, 5});  // persistent
  add_region(t, 2 * kMiB, 2, 3, {2, 3});   // allocated before 2, freed after 3
  add_region(t, 1 * kMiB, 1, 4, {});       // never touched: still occupies memory
  Analysis a = analyze(t);
  EXPECT_TRUE(a.live_at_start[0] && a.live_at_end[0]);
  EXPECT_EQ(a.first_live[1], 2u);
  EXPECT_EQ(a.last_live[1], 3u);
  EXPECT_FALSE(a.live_at_end[1]);
  EXPECT_EQ(a.live_bytes, (std::vector<std::uint64_t>{4 * kMiB, 5 * kMiB, 7 * kMiB, 7 * kMiB,
                                                      5 * kMiB, 4 * kMiB}));
  EXPECT_EQ(a.peak_bytes, 7 * kMiB);
  EXPECT_EQ(a.peak_launch, 2u);
  EXPECT_EQ(a.working_set[2], 2 * kMiB);
  EXPECT_EQ(a.max_working_set, 4 * kMiB);
  // The 1 MiB region is never evicted: at launch 2 it stays beside the 2 MiB touched there.
  EXPECT_EQ(a.min_resident, (std::vector<std::uint64_t>{4 * kMiB, 1 * kMiB, 3 * kMiB, 3 * kMiB,
                                                        1 * kMiB, 4 * kMiB}));
  EXPECT_FALSE(a.evictable(2));  // no accesses
  EXPECT_EQ(a.max_min_resident, 4 * kMiB);
  EXPECT_TRUE(impossible_budget_reason(a, 4 * kMiB).empty());
  EXPECT_NE(impossible_budget_reason(a, 3 * kMiB).find("launch 0"), std::string::npos);
}

// A region allocated before its first use, or never used, takes memory that no plan entry can
// free (an entry evicts after an access): the budget is possible, but no plan fits it.
// A region freed before the first launch (at its seq or earlier) is never live, as one allocated
// after the last is not: it took no memory in the iteration.
TEST(AnalysisTest, ARegionFreedBeforeTheFirstLaunchIsNeverLive) {
  Trace t = empty_trace(2, 10.0, 1e9);
  for (Launch& l : t.launches) l.seq += 5;  // seqs 5 and 6
  add_region(t, 1 * kMiB, 0, -1, {0, 1});
  Region gone;  // allocated at 0, freed before the launch at seq 5
  gone.id = 2;
  gone.bytes = 64 * kMiB;
  gone.alloc_seq = 0;
  gone.free_seq = 5;
  t.regions.push_back(gone);
  Region before = gone;  // freed before seq 3
  before.id = 3;
  before.free_seq = 3;
  t.regions.push_back(before);
  Region late = gone;  // allocated after the last launch
  late.id = 4;
  late.alloc_seq = 7;
  late.free_seq.reset();
  t.regions.push_back(late);
  const Analysis a = analyze(t);
  for (std::size_t r = 1; r < 4; ++r) EXPECT_GT(a.first_live[r], a.last_live[r]) << r;
  EXPECT_EQ(a.peak_bytes, 1 * kMiB);
  EXPECT_EQ(a.live_bytes[0], 1 * kMiB);
  EXPECT_FALSE(a.live_at_start[1]);
}

TEST(AnalysisTest, RegionsNotUsedYetLeaveTooLittleRoomForAPlan) {
  Trace t = empty_trace(5, 10.0, 1e9);
  add_region(t, 4 * kMiB, 0, -1, {0, 4});  // carried over: a wrap entry can evict it
  add_region(t, 4 * kMiB, 1, -1, {3});     // allocated before launch 1, first used at 3
  add_region(t, 3 * kMiB, 1, 2, {1, 2});
  add_region(t, 2 * kMiB, 2, 2, {});  // allocated and freed around launch 2, never used
  Analysis a = analyze(t);
  EXPECT_EQ(a.unplannable, (std::vector<std::uint64_t>{0, 4 * kMiB, 6 * kMiB, 0, 0}));
  EXPECT_EQ(a.max_min_planned, 9 * kMiB);
  EXPECT_EQ(a.max_min_planned_launch, 2u);
  EXPECT_TRUE(impossible_budget_reason(a, 8 * kMiB).empty());
  const std::string why = unplannable_budget_reason(a, 8 * kMiB);
  EXPECT_NE(why.find("launch 2"), std::string::npos) << why;
  EXPECT_NE(why.find("not used yet"), std::string::npos) << why;
  EXPECT_TRUE(unplannable_budget_reason(a, 9 * kMiB).empty());
}

TEST(AnalysisTest, IdealTimelineRunsStreamsConcurrentlyInIssueOrder) {
  Trace t = empty_trace(4, 10.0, 1e9);
  t.launches[1].stream = 1;  // overlaps launch 0
  t.launches[2].stream = 1;  // waits for launch 1 on its stream
  t.launches[3].dur_us = 5;  // stream 0: waits for launch 0, and starts no earlier than 2
  Analysis a = analyze(t);
  EXPECT_EQ(a.start_us, (std::vector<double>{0, 0, 10, 10}));
  EXPECT_DOUBLE_EQ(a.ideal_step_us, 20.0);
  EXPECT_EQ(a.first_start_at_or_after(5.0), 2u);
}

// The galloping searches from a launch answer as binary searches over the whole iteration do,
// clamped to the launch given: on start times with ties (launches on other streams starting
// together) and gaps, for every launch and times before, between, on and after them.
TEST(AnalysisTest, SearchesFromALaunchAgreeWithWholeIterationSearches) {
  std::mt19937 rng(7);
  for (int round = 0; round < 40; ++round) {
    Analysis a;
    a.n = 1 + rng() % 70;
    double t = 0;
    for (std::size_t i = 0; i < a.n; ++i) {
      t += rng() % 3 == 0 ? 0 : static_cast<double>(rng() % 5);
      a.start_us.push_back(t);
    }
    for (std::size_t from = 0; from < a.n + 2; ++from)
      for (double q = -1; q <= t + 1; q += 0.5) {
        const auto lb = static_cast<std::size_t>(
            std::lower_bound(a.start_us.begin(), a.start_us.end(), q) - a.start_us.begin());
        EXPECT_EQ(a.first_start_at_or_after(q, from), std::max(lb, from));
        if (from >= a.n) continue;
        const auto ub = static_cast<std::size_t>(
            std::upper_bound(a.start_us.begin(), a.start_us.end(), q) - a.start_us.begin());
        EXPECT_EQ(a.last_start_at_or_before(q, from), std::min(ub == 0 ? 0 : ub - 1, from));
      }
  }
}

TEST(SegmentTreeTest, RangeAddMaxAndLastAbove) {
  MaxSegmentTree st(std::vector<std::int64_t>{1, 5, 2, 8, 3});
  EXPECT_EQ(st.max_all(), 8);
  st.add(2, 4, 10);  // 1 5 12 18 13
  EXPECT_EQ(st.max(0, 1), 5);
  EXPECT_EQ(st.max(2, 2), 12);
  EXPECT_EQ(st.find_last_above(0, 4, 12), 4u);
  EXPECT_EQ(st.find_last_above(0, 2, 11), 2u);
  EXPECT_EQ(st.find_last_above(0, 1, 5), MaxSegmentTree::npos);
  st.add(3, 3, -20);  // 1 5 12 -2 13
  EXPECT_EQ(st.find_last_above(0, 3, 4), 2u);
}

// Every operation against a plain array, over random ranges (some past the end, some empty) and
// sizes that are and are not powers of two.
TEST(SegmentTreeTest, AgreesWithAPlainArray) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 400; ++round) {
    const std::size_t n = 1 + rng() % (round < 200 ? 9 : 150);
    std::vector<std::int64_t> v(n);
    for (auto& x : v) x = static_cast<std::int64_t>(rng() % 2000) - 1000;
    MaxSegmentTree st(v);
    for (int op = 0; op < 200; ++op) {
      const std::size_t l = rng() % (n + 2), r = rng() % (n + 2);
      const std::size_t end = std::min(r + 1, n);
      if (rng() % 2) {
        const std::int64_t d = static_cast<std::int64_t>(rng() % 200) - 100;
        st.add(l, r, d);
        for (std::size_t i = l; i < end; ++i) v[i] += d;
        continue;
      }
      const std::int64_t x = static_cast<std::int64_t>(rng() % 2000) - 1000;
      std::size_t first = MaxSegmentTree::npos, last = MaxSegmentTree::npos;
      for (std::size_t i = l; i < end; ++i) {
        ASSERT_EQ(st.max(l, i), *std::max_element(v.begin() + l, v.begin() + i + 1));
        if (v[i] > x) last = i, first = std::min(first, i);
      }
      if (l < end) {
        ASSERT_EQ(st.max(l, r), *std::max_element(v.begin() + l, v.begin() + end));
      } else {
        ASSERT_LT(st.max(l, r), -(std::int64_t{1} << 60));  // nothing in range
      }
      ASSERT_EQ(st.find_first_above(l, r, x), first);
      ASSERT_EQ(st.find_last_above(l, r, x), last);
      ASSERT_EQ(st.max_all(), *std::max_element(v.begin(), v.end()));
    }
  }
}

// sources_allocated_together, found once per region, answers as the definition does: every
// source another region of the trace, all allocated together at some launch j, from <= j <= b.
TEST(AnalysisTest, SourcesAllocatedTogetherFollowsItsDefinition) {
  std::mt19937_64 rng(11);
  int recomputable = 0, together = 0;
  for (int k = 0; k < 200; ++k) {
    Trace t = testing::random_trace(rng);
    // More sources than the generator gives, some unknown or the region itself.
    std::uniform_int_distribution<std::size_t> pick(0, t.regions.size() - 1);
    for (std::size_t r = 0; r < t.regions.size(); ++r) {
      if (!t.regions[r].recompute || rng() % 3) continue;
      for (int e = 0; e < 6; ++e)
        t.regions[r].recompute->sources.push_back(t.regions[pick(rng)].id);
      if (rng() % 8 == 0) t.regions[r].recompute->sources.push_back(t.regions[r].id);
      if (rng() % 8 == 0) t.regions[r].recompute->sources.push_back(1'000'000);
    }
    const Analysis a = analyze(t);
    for (std::size_t r = 0; r < t.regions.size(); ++r) {
      if (!t.regions[r].recompute) {
        EXPECT_FALSE(a.sources_allocated_together(r, 0, a.n));
        continue;
      }
      ++recomputable;
      for (std::size_t from = 0; from < a.n; from += 3)
        for (std::size_t b = from; b < a.n; b += 2) {
          bool want = false;
          for (std::size_t j = from; j <= b && !want; ++j) {
            bool all = true;
            for (RegionId src : t.regions[r].recompute->sources) {
              const auto it = a.index.find(src);
              all = all && it != a.index.end() && it->second != r &&
                    a.first_live[it->second] <= j && j <= a.last_live[it->second];
            }
            want = all;
          }
          EXPECT_EQ(a.sources_allocated_together(r, from, b), want)
              << "trace " << k << " region " << r << " from " << from << " to " << b;
          together += want;
        }
    }
  }
  EXPECT_GT(recomputable, 100);
  EXPECT_GT(together, 100);
}

// A region dropped after launch 1 and read again at 6, recomputed from S (allocated over 2..4):
// not at 6, where S is gone, but as a source of another region's recomputation while S is there,
// and kept until 6.
TEST(AnalysisTest, ASourceMayComeBackRecomputedBeforeItsRead) {
  Trace t = empty_trace(8, 10.0, 1e9);
  const RegionId s = add_region(t, 4 * kMiB, 2, 4, {2});
  const RegionId r = add_region(t, 4 * kMiB, 0, 7, {1, 6});
  t.regions[r - 1].recompute = Recompute{5.0, {s}};
  Analysis a = analyze(t);
  const std::size_t ri = a.index.at(r);
  EXPECT_FALSE(a.recomputable_at(ri, 6));
  EXPECT_FALSE(a.recomputable_within(ri, 2, 6));  // no region is recomputed from r
  const RegionId d = add_region(t, 4 * kMiB, 3, 5, {3, 5});
  t.regions[d - 1].recompute = Recompute{5.0, {r}};
  Analysis b = analyze(t);
  EXPECT_TRUE(b.is_source[ri]);
  EXPECT_TRUE(b.recomputable_within(ri, 2, 6));   // with S at 2..4
  EXPECT_FALSE(b.recomputable_within(ri, 5, 6));  // off only after S is gone
  EXPECT_FALSE(b.recomputable_within(ri, 1, 1));  // back before S exists
}

}  // namespace
}  // namespace gswap::policy
