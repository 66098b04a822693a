// baselines_test.cpp: DELTA's release threshold, victim order (ties included) and
// swap-or-recompute rule, and the vDNN-style schedule, on hand-built traces; DELTA on a trace of
// 20,000 regions and 100,000 launches.
#include "policy/baselines.h"

#include <gtest/gtest.h>

#include "policy/simulator.h"
#include "policy/test_traces.h"

namespace gswap::policy {
namespace {

using testing::add_region;
using testing::empty_trace;
using testing::kMiB;

// 8 launches of 10 us. A (8 MiB, used at 0 and 7) lives from the start; B (4 MiB) over 1..6;
// C (4 MiB) over 3..4. The peak is 16 MiB; the budget is 15 MiB, so DELTA releases above
// 11.25 MiB.
struct DeltaFixture {
  Trace t = empty_trace(8, 10.0, 8.0 * kMiB / 100e-6);  // 8 MiB take 100 us
  RegionId a, b, c;
  explicit DeltaFixture(double a_recompute_us) {
    a = add_region(t, 8 * kMiB, 0, -1, {0, 7});
    b = add_region(t, 4 * kMiB, 1, 6, {1, 6});
    c = add_region(t, 4 * kMiB, 3, 4, {3, 4});
    if (a_recompute_us > 0) t.regions[a - 1].recompute = Recompute{a_recompute_us, {}};
  }
};

TEST(BaselinesTest, DeltaReleasesTheLargestStalestRegionAtThreeQuarters) {
  DeltaFixture f(1.0);  // recomputing A (1 us) is cheaper than copying it (100 us)
  Analysis an = analyze(f.t);
  Plan p = plan_delta(an, 15 * kMiB);
  // After launch 1, 12 MiB are in use. A scores 8 MiB x 10 us of staleness, B (just used)
  // almost nothing: A goes, and 4 MiB is under the threshold, so B stays.
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].region, f.a);
  EXPECT_EQ(p.entries[0].kind, EvictKind::kRecompute);
  EXPECT_EQ(p.entries[0].evict_at, 2u);
  EXPECT_EQ(p.entries[0].back_access, 7u);
  SimResult s = simulate(an, p, 15 * kMiB);
  ASSERT_TRUE(s.feasible);
  EXPECT_LE(s.peak_resident_bytes, 15 * kMiB);
  EXPECT_DOUBLE_EQ(s.recompute_us, 1.0);
}

// X and Y were last used together, so they score the same: the release order of equal scores is
// the later region first, as a sort of (score, index) from the largest gives.
TEST(BaselinesTest, DeltaBreaksTiesTowardsTheLaterRegion) {
  Trace t = empty_trace(4, 10.0, 8.0 * kMiB / 100e-6);
  RegionId x = add_region(t, 4 * kMiB, 0, -1, {0, 3});
  RegionId y = add_region(t, 4 * kMiB, 0, -1, {0, 3});
  add_region(t, 4 * kMiB, 1, 2, {1, 2});
  Analysis an = analyze(t);
  Plan p = plan_delta(an, 11 * kMiB);
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].region, y);
  EXPECT_NE(p.entries[0].region, x);
  EXPECT_EQ(p.entries[0].evict_at, 1u);
  EXPECT_EQ(p.entries[0].trigger, 3u);  // prefetched once Z is freed
}

// 20,000 regions and 100,000 launches: DELTA chooses its victims and prefetches without looking
// at every region at every launch (that took minutes here), and its plan holds.
TEST(BaselinesTest, DeltaOnManyRegionsAndLaunches) {
  constexpr std::size_t kRegions = 20000, kLaunches = 100000;
  Trace t = empty_trace(kLaunches, 1.0, 1e10);
  t.device.min_evictable_bytes = 0;
  for (std::size_t r = 0; r < kRegions; ++r) add_region(t, 4096, 0, -1, {});
  for (std::size_t i = 0; i < kLaunches; ++i)
    t.launches[i].regions = {i % kRegions + 1, (i * 7 + 3) % kRegions + 1};
  Analysis an = analyze(t);
  const std::uint64_t budget = an.peak_bytes / 2;
  Plan p = plan_delta(an, budget);
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_GT(p.entries.size(), kRegions);
  SimResult s = simulate(an, p, budget);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_LE(s.peak_resident_bytes, budget);
}

TEST(BaselinesTest, DeltaOffloadsWhenRecomputingCostsMoreThanCopying) {
  DeltaFixture f(500.0);
  Analysis an = analyze(f.t);
  Plan p = plan_delta(an, 15 * kMiB);
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].region, f.a);
  EXPECT_EQ(p.entries[0].kind, EvictKind::kSwap);
  // Prefetched once B and C are gone and A fits under the threshold again: after launch 6.
  EXPECT_EQ(p.entries[0].trigger, 7u);
}

TEST(BaselinesTest, VdnnSwapsActivationsAcrossTheTurnAndPrefetchesOneStepAhead) {
  // Activations X1, X2 written in the forward pass and read back in the backward pass; the peak
  // (the turn) is at launch 4.
  Trace t = empty_trace(9, 10.0, 1e10);
  RegionId w = add_region(t, 4 * kMiB, 0, -1, {0, 8});
  RegionId x1 = add_region(t, 4 * kMiB, 1, 7, {1, 7});
  RegionId x2 = add_region(t, 4 * kMiB, 2, 6, {2, 6});
  add_region(t, 4 * kMiB, 4, 4, {4});
  Analysis a = analyze(t);
  Plan p = plan_vdnn(a, 12 * kMiB);
  ASSERT_EQ(p.entries.size(), 2u);
  for (const PlanEntry& e : p.entries) {
    EXPECT_NE(e.region, w);  // weights are not vDNN's business
    EXPECT_EQ(e.trigger, e.back_access - 1);
  }
  EXPECT_EQ(p.entries[0].region, x1);
  EXPECT_EQ(p.entries[0].evict_after, 1u);
  EXPECT_EQ(p.entries[1].region, x2);
  EXPECT_EQ(p.entries[1].back_access, 6u);
}

TEST(BaselinesTest, BeladyEvictsTheFurthestNextUseAndRestoresAsEarlyAsMemoryAllows) {
  // At launch 4 (16 MiB live, budget 12) one of W (next used at 8), X1 (at 7) and X2 (at 6)
  // must go: W, used furthest ahead. Off from launch 1, the curve is 4 4 8 8 12 8 8 4 4 MiB, so
  // its restore can start right after launch 4, the last launch with no 4 MiB to spare.
  Trace t = empty_trace(9, 10.0, 1e10);
  RegionId w = add_region(t, 4 * kMiB, 0, -1, {0, 8});
  add_region(t, 4 * kMiB, 1, 7, {1, 7});
  add_region(t, 4 * kMiB, 2, 6, {2, 6});
  add_region(t, 4 * kMiB, 4, 4, {4});
  Analysis a = analyze(t);
  Plan p = plan_belady(a, 12 * kMiB);
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].region, w);
  EXPECT_EQ(p.entries[0].kind, EvictKind::kSwap);
  EXPECT_EQ(p.entries[0].evict_after, 0u);
  EXPECT_EQ(p.entries[0].trigger, 5u);
  EXPECT_EQ(p.entries[0].back_access, 8u);
  EXPECT_TRUE(p.fits);
  SimResult s = simulate(a, p, 12 * kMiB);
  ASSERT_TRUE(s.feasible);
  EXPECT_EQ(s.demand_evictions, 0u);
  EXPECT_LE(s.peak_resident_bytes, 12 * kMiB);
}

TEST(BaselinesTest, LruIsTheEmptyPlan) {
  DeltaFixture f(0);
  Analysis a = analyze(f.t);
  EXPECT_TRUE(plan_lru(a, 15 * kMiB).entries.empty());
  EXPECT_FALSE(plan_lru(a, 4 * kMiB).feasible);  // launch 0 touches 8 MiB
}

}  // namespace
}  // namespace gswap::policy
