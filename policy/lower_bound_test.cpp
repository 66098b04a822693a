// lower_bound_test.cpp: the lower bound computed by hand on a small trace (the random-trace
// property test that no simulated plan beats it is in simulator_test.cpp).
#include "policy/lower_bound.h"

#include <gtest/gtest.h>

#include <random>

#include "policy/baselines.h"
#include "policy/capuchin.h"
#include "policy/corpus.h"
#include "policy/planners.h"
#include "policy/reference_traces.h"
#include "policy/search.h"
#include "policy/simulator.h"
#include "policy/test_traces.h"

namespace gswap::policy {
namespace {

using testing::add_region;
using testing::empty_trace;
using testing::kMiB;

// 10 launches of 10 us; X (4 MiB) written at 1, read at 8; Y (8 MiB) lives over 3..6. A slow
// link: 4 MiB take 50 us each way. Budget 8 MiB, so X must be off the device during 3..6.
Trace fixture(bool recomputable) {
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 50e-6);
  RegionId x = add_region(t, 4 * kMiB, 0, -1, {1, 8});
  add_region(t, 8 * kMiB, 3, 6, {3, 4, 5, 6});
  if (recomputable) t.regions[x - 1].recompute = Recompute{5.0, {}};
  return t;
}

// Issue order holds stream 1 back: its launch starts only after the launch issued before it (on
// stream 0) has started, at 100 us, so the step is 200 us although neither stream computes for
// more than 110 us.
TEST(LowerBoundTest, ComputeBoundFollowsIssueOrderAcrossStreams) {
  Trace t = empty_trace(3, 100.0, 1e9);
  t.launches[1].dur_us = 10.0;
  t.launches[2].stream = 1;
  Analysis a = analyze(t);
  ASSERT_DOUBLE_EQ(a.ideal_step_us, 200.0);
  LowerBound lb = lower_bound(a, 1 * kMiB);
  EXPECT_DOUBLE_EQ(lb.compute_us, 200.0);
  EXPECT_DOUBLE_EQ(lb.bound_us, 200.0);
}

TEST(LowerBoundTest, SwapTrafficAroundThePeak) {
  Trace t = fixture(false);
  Analysis a = analyze(t);
  LowerBound lb = lower_bound(a, 8 * kMiB);
  EXPECT_DOUBLE_EQ(lb.compute_us, 100.0);
  // At launch 3: X's copy-out can only start once launch 1 has ended (20 us) and must end
  // before launch 3 starts: 70 us. Then 10 us of launch 3, then max(60 us of compute, 50 us of
  // copy-in followed by the 20 us of launches 8 and 9 that come after X's next access): 150 us.
  EXPECT_DOUBLE_EQ(lb.traffic_us, 150.0);
  EXPECT_DOUBLE_EQ(lb.bound_us, 150.0);
  EXPECT_EQ(lb.tightest_launch, 3u);
  SimResult s = simulate(a, plan_capuchin(a, 8 * kMiB), 8 * kMiB);
  ASSERT_TRUE(s.feasible);
  EXPECT_GE(s.step_time_us, lb.bound_us);
}

// A chain: region R_k (4 MiB) is written at launch 3k and read at 3k+2, and launch 3k+1 touches
// only a 4 MiB temporary, so at a 4 MiB budget every R_k must leave for launch 3k+1 and come back:
// four copy-outs and four copy-ins of 50 us each on a link that is the bottleneck (launches of
// 1 us). Each launch alone sees one region's excess; counted over the iteration, 200 us of
// copies each way.
TEST(LowerBoundTest, TrafficIsCountedOverTheWholeIteration) {
  constexpr std::size_t kRegions = 4;
  Trace t = empty_trace(3 * kRegions, 1.0, 4.0 * kMiB / 50e-6);
  for (std::size_t k = 0; k < kRegions; ++k) {
    add_region(t, 4 * kMiB, 3 * k, static_cast<long>(3 * k + 2), {3 * k, 3 * k + 2});
    add_region(t, 4 * kMiB, 3 * k + 1, static_cast<long>(3 * k + 1), {3 * k + 1});
  }
  Analysis a = analyze(t);
  LowerBound lb = lower_bound(a, 4 * kMiB);
  EXPECT_NEAR(lb.covering_us, 200.0, 1e-6);
  EXPECT_LT(lb.traffic_us, lb.covering_us);
  EXPECT_NEAR(lb.bound_us, 200.0, 1e-6);
  for (const Plan& p : {plan_capuchin(a, 4 * kMiB), plan_lru(a, 4 * kMiB)}) {
    SimResult s = simulate(a, p, 4 * kMiB);
    ASSERT_TRUE(s.feasible) << s.reason;
    EXPECT_GE(s.step_time_us + 1e-6, lb.bound_us);
  }
}

// A region carried over from the previous iteration and used once in the middle of it: one
// eviction after that use (a wrap entry) keeps it off the device both before and after, for one
// copy-out and one copy-in per iteration, which the bound counts once.
TEST(LowerBoundTest, AWrapEvictionIsCountedOnce) {
  Trace t = empty_trace(5, 1.0, 4.0 * kMiB / 50e-6);
  add_region(t, 4 * kMiB, 0, -1, {2});  // carried over, used at launch 2 only
  add_region(t, 4 * kMiB, 0, 0, {0});   // temporaries beside it before and after
  add_region(t, 4 * kMiB, 4, 4, {4});
  Analysis a = analyze(t);
  LowerBound lb = lower_bound(a, 4 * kMiB);
  EXPECT_NEAR(lb.covering_us, 50.0, 1e-6);
  SimResult s = simulate(a, plan_capuchin(a, 4 * kMiB), 4 * kMiB);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_GE(s.step_time_us + 1e-6, lb.bound_us);
}

// Six launches of 10 us on a link that copies 4 MiB in 40 us, a 4 MiB budget. At launch 1 a
// temporary (P) needs the device, so D (written at 0, never read again) and W (carried over, read
// at 5 only) must both be off: D's copy-out holds launch 1 back to 50 us, and W's wrap copy-out
// after launch 5 can start only once launches 1 to 5 (50 us) have run after that: 50 + 50 + 40 =
// 140 us. Or W leaves before launch 1, its copy-out first: launch 1 waits for both, 80 us, and
// the rest takes 60 us: 140 us again. The bound splits W between the two (a fraction f copied
// out first): launch 1 starts at 40 + 40f, and W's restore (40 us after launch 1) and launch 5
// come before the wrap's copy-out, which ends 100 - 40f later: 140 us, which the bound's grid
// of splits may only undercut. Counting only the launches from 1 to 5 before the copy-out, the
// bound was 130 us; released at launch 5's ideal end instead, 110 us (launch 1's own term).
TEST(LowerBoundTest, AWrapCopyOutWaitsForTheDelayedLastAccess) {
  Trace t = empty_trace(6, 10.0, 4.0 * kMiB / 40e-6);
  add_region(t, 4 * kMiB, 0, 4, {0});   // D
  add_region(t, 4 * kMiB, 1, 1, {1});   // P
  add_region(t, 4 * kMiB, 0, -1, {5});  // W
  Analysis a = analyze(t);
  LowerBound lb = lower_bound(a, 4 * kMiB);
  EXPECT_GT(lb.traffic_us, 135.0);
  EXPECT_LE(lb.traffic_us, 140.0 + 1e-6);
  EXPECT_EQ(lb.tightest_launch, 1u);
  EXPECT_DOUBLE_EQ(lb.bound_us, lb.traffic_us);
  for (const Plan& p : {plan_capuchin(a, 4 * kMiB), plan_lru(a, 4 * kMiB)}) {
    SimResult s = simulate(a, p, 4 * kMiB);
    ASSERT_TRUE(s.feasible) << s.reason;
    EXPECT_GE(s.step_time_us + 1e-6, lb.bound_us);
  }
}

// W (4 MiB, carried over, read at launch 6 only) is resident at the start; D is written by
// launch 1 (50 us) and never read again; the temporary P at launch 2 needs one of them off under
// an 8 MiB budget. D's copy-out could start only at 60 us (launch 2 would start at 100 us, 150 us
// in all), and W's wrap after launch 6 would end at 150 us too; but a plan may evict W after
// launch 0, its copy-out running under launch 1, and bring it back for launch 6: 120 us. The
// bound counts that way out too (it was 150 us).
TEST(LowerBoundTest, ACarriedRegionMayLeaveBeforeItsFirstUse) {
  Trace t = empty_trace(7, 10.0, 4.0 * kMiB / 40e-6);
  t.launches[1].dur_us = 50.0;
  add_region(t, 4 * kMiB, 1, 5, {1});                      // D
  add_region(t, 4 * kMiB, 2, 2, {2});                      // P
  const RegionId w = add_region(t, 4 * kMiB, 0, -1, {6});  // W
  Analysis a = analyze(t);
  Plan plan;
  PlanEntry e;
  e.region = w;
  e.evict_after = 0;
  e.trigger = 3;
  e.back_access = 6;
  plan.entries.push_back(e);
  const SimResult s = simulate(a, plan, 8 * kMiB);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_EQ(s.demand_evictions, 0u);
  EXPECT_DOUBLE_EQ(s.step_time_us, 120.0);
  EXPECT_LE(lower_bound(a, 8 * kMiB).bound_us, s.step_time_us);
}

// X, carried over and freed after launch 3, its only read, is the previous iteration's Y (same
// size and lifetime, written at 0, never read again). At launch 1 a temporary (P) needs the
// device, so both are off there, under an 8 MiB budget. What puts X on the host at the start is
// Y's copy-out after launch 0 (100 us, the link to the host being slow), not a copy-out after
// X's read at 3: Y evicted for good runs in 150 us (X's copy-in takes 10 us). The bound took X's
// read as the wrap's last access, delayed by launch 1's start (110 us): 223.8 us.
TEST(LowerBoundTest, AFreedRegionIsCopiedOutAfterItsNextInstancesLastAccess) {
  Trace t = empty_trace(4, 10.0, 4.0 * kMiB / 100e-6);
  t.device.h2d_bytes_per_s *= 10;
  for (Launch& l : t.launches) l.seq += 100;
  const RegionId x = add_region(t, 4 * kMiB, 96, 103, {3});
  const RegionId y = add_region(t, 4 * kMiB, 100, 107, {0});
  add_region(t, 8 * kMiB, 101, 101, {1});  // P
  Analysis a = analyze(t);
  ASSERT_EQ(a.next_instance[a.index.at(x)], a.index.at(y));
  Plan gone;  // Y evicted for good after its write: X starts the next iteration on the host
  gone.entries.push_back({y, EvictKind::kSwap, 0, kNoLaunch, kNoLaunch, kNoLaunch, 100.0});
  const SimResult s = simulate(a, gone, 8 * kMiB);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_EQ(s.demand_evictions, 0u);
  EXPECT_DOUBLE_EQ(s.step_time_us, 150.0);
  EXPECT_LE(lower_bound(a, 8 * kMiB).bound_us, s.step_time_us);
}

// Four launches of 10 us on a link that copies 4 MiB in 100 us, an 8 MiB budget. At launch 1 a
// temporary (P) needs the device, so X (written at 0, read at 2) or W (carried over, read at 3
// only) must be off. X's copy-out holds launch 1 back to 110 us, and its copy-in and launches 2
// and 3 take 120 us more: 230 us. W wrapped is restored after launch 1, launch 3 runs once it is
// back (at 120 us), and its copy-out after launch 3 ends at 230 us. Or W leaves first (its
// copy-out released at once, bounded as such although no plan evicts before launch 0 ends):
// launch 1 at 100 us, W back at 210, 220 us, which the bound's cells of splits may undercut by a
// sixty-fourth of W's copy-out (the least of 16 cells, resplit in four: a sixteenth without).
// Counting only that launch 3 follows launch 1 (30 us), the wrap's copy-out would end at 140 us,
// the bound before it counted the restore.
TEST(LowerBoundTest, AWrapCopyOutWaitsForTheRestoresBeforeIt) {
  Trace t = empty_trace(4, 10.0, 4.0 * kMiB / 100e-6);
  add_region(t, 4 * kMiB, 0, 2, {0, 2});  // X
  add_region(t, 4 * kMiB, 1, 1, {1});     // P
  add_region(t, 4 * kMiB, 0, -1, {3});    // W
  Analysis a = analyze(t);
  LowerBound lb = lower_bound(a, 8 * kMiB);
  EXPECT_GE(lb.traffic_us, 220.0 - 100.0 / 64 - 1e-6);
  EXPECT_LE(lb.traffic_us, 220.0 + 1e-6);
  EXPECT_EQ(lb.tightest_launch, 1u);
  for (PolicyKind p : kAllPolicies) {
    SimResult s = simulate(a, make_plan(p, a, 8 * kMiB), 8 * kMiB);
    ASSERT_TRUE(s.feasible) << s.reason;
    EXPECT_GE(s.step_time_us + 1e-6, lb.bound_us) << policy_name(p);
  }
}

// Launches 2 and 3 each read three carried regions of 4 MiB, on a link that copies 4 MiB in
// 100 us; at launch 0 a temporary leaves room for only three of the six. A region off comes back
// before the launch that reads it, and one wrapped leaves again after it. The bound counted each
// wrap's copy-out as released once its own copy-in was done (405.3 us); a launch reads all its
// regions, so the copy-outs after it wait for all of their copy-ins: 420 us, less a last cell of
// the split. The best plan the search finds takes 520 us.
TEST(LowerBoundTest, AWrapsCopyOutsWaitForTheOthersRestores) {
  Trace t = empty_trace(4, 10.0, 4.0 * kMiB / 100e-6);
  add_region(t, 12 * kMiB, 0, 0, {0});
  for (std::size_t reader : {2u, 2u, 2u, 3u, 3u, 3u}) add_region(t, 4 * kMiB, 0, -1, {reader});
  Analysis a = analyze(t);
  const std::uint64_t budget = 24 * kMiB;
  ASSERT_EQ(a.live_bytes[0], budget + 12 * kMiB);
  const LowerBound lb = lower_bound(a, budget);
  EXPECT_GT(lb.bound_us, 419.0);
  for (PolicyKind p : kAllPolicies) {
    const SimResult s = simulate(a, make_plan(p, a, budget), budget);
    ASSERT_TRUE(s.feasible) << s.reason;
    EXPECT_GE(s.step_time_us + 1e-6, lb.bound_us) << policy_name(p);
  }
  SearchOptions o;
  o.max_evaluations = 2000;
  const SearchResult r = search_plan(a, budget, o);
  EXPECT_EQ(r.sim.access_violations, 0u);
  EXPECT_GE(r.sim.step_time_us + 1e-6, lb.bound_us);
}

// X, carried over and read at launch 3, is the previous iteration's Y, written at 0; both are
// recomputable from P, which lives throughout. At launch 1 a temporary needs X and Y off (a 6 MiB
// budget): dropping Y for good after its write makes X start the next iteration dropped, and
// launch 3 recomputes it (5 us): no copy at all. The whole-iteration term charged X's first piece a
// copy-out (100 us) in one of its two ways of counting a wrap's copy-out.
TEST(LowerBoundTest, ARegionThatStartsDroppedCostsNoCopyOut) {
  Trace t = empty_trace(4, 10.0, 4.0 * kMiB / 100e-6);
  for (Launch& l : t.launches) l.seq += 100;
  const RegionId p = add_region(t, 2 * kMiB, 90, -1, {0, 3});
  const RegionId x = add_region(t, 4 * kMiB, 97, 102, {3});
  const RegionId y = add_region(t, 4 * kMiB, 101, 106, {0});
  add_region(t, 4 * kMiB, 101, 101, {1});
  for (RegionId r : {x, y}) t.regions[r - 1].recompute = Recompute{5.0, {p}};
  Analysis a = analyze(t);
  ASSERT_EQ(a.next_instance[a.index.at(x)], a.index.at(y));
  Plan drop;
  drop.entries.push_back({y, EvictKind::kRecompute, 0, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  const SimResult s = simulate(a, drop, 6 * kMiB);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_EQ(s.swapped_out_bytes + s.swapped_in_bytes, 0u);
  EXPECT_DOUBLE_EQ(s.step_time_us, 45.0);
  const LowerBound lb = lower_bound(a, 6 * kMiB);
  EXPECT_LE(lb.covering_us, s.step_time_us);
  EXPECT_LE(lb.bound_us, s.step_time_us);
}

// X, carried over (never freed), is read only at launch 3 and recomputable from S, allocated at
// 2. A temporary at launch 1 needs X off under a 6 MiB budget: X, resident at the start, is
// dropped after launch 0 and recomputed at 3 (5 us), no copy at all. The bound took a region
// carried over and not yet read as swapped unless it could start the iteration dropped: at
// least X's copy-in (100 us) after launch 1.
TEST(LowerBoundTest, ACarriedRegionMayBeDroppedAndRecomputedBeforeItsFirstUse) {
  Trace t = empty_trace(4, 10.0, 4.0 * kMiB / 100e-6);
  const RegionId s = add_region(t, 2 * kMiB, 2, 3, {2});
  const RegionId x = add_region(t, 4 * kMiB, 0, -1, {3});
  add_region(t, 4 * kMiB, 1, 1, {1});
  t.regions[x - 1].recompute = Recompute{5.0, {s}};
  Analysis a = analyze(t);
  Plan drop;
  drop.entries.push_back({x, EvictKind::kRecompute, 0, kNoLaunch, kNoLaunch, 3, 0.0});
  const SimResult r = simulate(a, drop, 6 * kMiB);
  ASSERT_TRUE(r.feasible) << r.reason;
  EXPECT_EQ(r.access_violations, 0u);
  EXPECT_EQ(r.swapped_out_bytes + r.swapped_in_bytes, 0u);
  EXPECT_DOUBLE_EQ(r.step_time_us, 45.0);
  EXPECT_LE(lower_bound(a, 6 * kMiB).bound_us, r.step_time_us);
}

// Y, written at launch 0 beside a temporary, and X, its previous iteration's instance, read at 3;
// evicting Y for good after launch 0 leaves X on the host, restored in 10 us: 110 us. The
// restores-before-the-last-access term took Y's last access (launch 0, i itself) to start after
// i ended, with no copy-in before it: 113.75 us.
TEST(LowerBoundTest, AWrapWithNoRestoreBeforeItsLastAccessIsNotDelayedByOne) {
  Trace t = empty_trace(4, 10.0, 4.0 * kMiB / 100e-6);
  t.device.h2d_bytes_per_s *= 10;
  for (Launch& l : t.launches) l.seq += 100;
  add_region(t, 4 * kMiB, 96, 103, {3});  // X
  const RegionId y = add_region(t, 4 * kMiB, 100, 107, {0});
  add_region(t, 4 * kMiB, 100, 100, {0});
  Analysis a = analyze(t);
  Plan gone;
  gone.entries.push_back({y, EvictKind::kSwap, 0, kNoLaunch, kNoLaunch, kNoLaunch, 100.0});
  const SimResult s = simulate(a, gone, 8 * kMiB);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_DOUBLE_EQ(s.step_time_us, 110.0);
  EXPECT_LE(lower_bound(a, 8 * kMiB).bound_us, s.step_time_us);
}

// R (4 MiB, recomputed from P in 100 us) is read at 0 and 4; D, recomputed from R, at 0 and 3
// on a second stream. Both dropped after launch 0, R comes back at 3 with D, on stream 1, not
// at 4 on stream 0: 135 us. The bound charged R's 100 us to stream 0 after launch 1: 179.8 us.
TEST(LowerBoundTest, ASourceRecomputedWithAnotherRegionCostsNothingOnThisStream) {
  Trace t = empty_trace(5, 10.0, 1.0 * kMiB / 100e-6);
  t.launches[2].dur_us = 100;
  t.launches[3].stream = 1;
  const RegionId p = add_region(t, 2 * kMiB, 0, -1, {0, 1, 4});
  const RegionId r = add_region(t, 4 * kMiB, 0, 4, {0, 4});
  const RegionId d = add_region(t, 2 * kMiB, 0, 3, {0, 3});
  add_region(t, 4 * kMiB, 1, 1, {1});
  t.regions[r - 1].recompute = Recompute{100.0, {p}};
  t.regions[d - 1].recompute = Recompute{5.0, {r}};
  Analysis a = analyze(t);
  Plan plan;
  plan.entries.push_back({r, EvictKind::kRecompute, 0, kNoLaunch, kNoLaunch, 4, 0.0});
  plan.entries.push_back({d, EvictKind::kRecompute, 0, kNoLaunch, kNoLaunch, 3, 0.0});
  const SimResult s = simulate(a, plan, 8 * kMiB);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_DOUBLE_EQ(s.step_time_us, 135.0);
  EXPECT_LE(lower_bound(a, 8 * kMiB).bound_us, s.step_time_us);
}

TEST(LowerBoundTest, RecomputationReplacesTraffic) {
  Trace t = fixture(true);
  Analysis a = analyze(t);
  LowerBound lb = lower_bound(a, 8 * kMiB);
  // Launch by launch the bound is a fractional relaxation. Copying a fraction c of X out takes
  // 50c us from the end of launch 1 (20 us), and recomputing the rest costs 5(1-c) us after
  // launch 3: max(30, 20 + 50c) + 10 + max(60 + 5(1-c), 50c + 20), least at c = 0.2: 30 + 10 +
  // 64 = 104 us. But a run that recomputes X at all runs its 100 us of compute and the whole 5
  // us (README "A recomputation needs room"), and one that does not swaps it: 150 us at least
  // (SwapTrafficAroundThePeak). So the bound is 105 us, what a real plan takes: it drops X whole.
  EXPECT_DOUBLE_EQ(lb.bound_us, 105.0);
  SimResult s = simulate(a, plan_capuchin(a, 8 * kMiB), 8 * kMiB);
  ASSERT_TRUE(s.feasible);
  EXPECT_DOUBLE_EQ(s.step_time_us, 105.0);
  EXPECT_GE(s.step_time_us, lb.bound_us);
}
// The fixture with X a source of D, recomputed on a second stream after the last launch on the
// first. X may come back recomputed with D only at a launch on another stream after the launch it
// is off at and by its next access (8), and every launch up to 8 runs on stream 0: its
// recomputation still costs stream 0 its 5 us, and the bound is the fixture's, 105 us. (It took
// X's recomputation for free wherever the trace has a second stream: 100 us.)
TEST(LowerBoundTest, ASourceWithNoOtherStreamBeforeItsNextAccessCostsItsStream) {
  Trace t = fixture(true);
  t.launches.push_back({10, 100.0, 10.0, 1, {}, "k10"});
  const RegionId d = add_region(t, 4 * kMiB, 10, -1, {10});
  t.regions[d - 1].recompute = Recompute{1.0, {t.regions[0].id}};
  Analysis a = analyze(t);
  ASSERT_TRUE(a.is_source[0]);
  EXPECT_DOUBLE_EQ(a.ideal_step_us, 100.0);
  const LowerBound lb = lower_bound(a, 8 * kMiB);
  EXPECT_DOUBLE_EQ(lb.bound_us, 105.0);
  SimResult s = simulate(a, plan_capuchin(a, 8 * kMiB), 8 * kMiB);
  ASSERT_TRUE(s.feasible);
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_GE(s.step_time_us, lb.bound_us);
}

// X (4 MiB) is recomputable from S (4 MiB), itself recomputable from nothing; at launch 5, Z
// (8 MiB, read again at 6) and W (4 MiB) leave no room for either. Budget 12 MiB, 4 MiB per 50 us
// each way. Launch by launch, dropping both at 5 and recomputing them (5 us each) looks cheap:
// 107.3 us. But X comes back for launch 6 only recomputed there, beside S, while Z is live: 16
// MiB, so 4 MiB of Z, written by launch 5 (ending at 60 us), is copied out first (until 110 us)
// and back after (50 us), before launch 6 and the 40 us from it on: 200 us. Any run that swaps X
// instead takes 150 us at least (its copy-out from 20 us delays launch 5 to 70 us; then 10 us
// and its 50 us copy-in, and 20 us of compute left after the next read of S, the one region read
// after 5 that the bound credits with the least). The bound is the smaller: 150 us.
TEST(LowerBoundTest, ARecomputationNeedsRoomForItsSources) {
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 50e-6);
  const RegionId s = add_region(t, 4 * kMiB, 1, 8, {1, 8});
  const RegionId x = add_region(t, 4 * kMiB, 1, 7, {1, 6});
  add_region(t, 8 * kMiB, 5, 6, {5, 6});
  add_region(t, 4 * kMiB, 5, 5, {5});
  t.regions[s - 1].recompute = Recompute{5.0, {}};
  t.regions[x - 1].recompute = Recompute{5.0, {s}};
  Analysis a = analyze(t);
  const LowerBound lb = lower_bound(a, 12 * kMiB);
  EXPECT_DOUBLE_EQ(lb.bound_us, 150.0);
  EXPECT_EQ(lb.tightest_launch, 5u);
  // Without the source, X's recomputation needs only its own room: back to the relaxation.
  Trace alone = t;
  alone.regions[x - 1].recompute->sources.clear();
  EXPECT_LT(lower_bound(analyze(alone), 12 * kMiB).bound_us, 110.0);
  // No plan beats it: the search finds 175 us (S dropped, X swapped).
  SearchOptions o;
  o.max_evaluations = 2000;
  const SearchResult r = search_plan(a, 12 * kMiB, o);
  ASSERT_TRUE(r.sim.feasible);
  EXPECT_EQ(r.sim.access_violations, 0u);
  EXPECT_GE(r.sim.step_time_us, lb.bound_us);
  EXPECT_LT(r.sim.step_time_us, 1.2 * lb.bound_us);
}

// X recomputable from a region freed after launch 2: it cannot come back recomputed for its read
// at 8, so in a valid run it leaves by swapping, and the bound is the swap fixture's. A plan that
// drops it anyway reads data it does not have (an access violation), which the bound ignores.
TEST(LowerBoundTest, ARegionWhoseSourceIsGoneLeavesBySwapping) {
  Trace t = fixture(true);
  const RegionId source = add_region(t, 2 * kMiB, 0, 2, {0, 2});
  t.regions[0].recompute = Recompute{5.0, {source}};
  Analysis a = analyze(t);
  LowerBound lb = lower_bound(a, 8 * kMiB);
  EXPECT_DOUBLE_EQ(lb.bound_us, 150.0);
  SimResult s = simulate(a, plan_capuchin(a, 8 * kMiB), 8 * kMiB);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_GE(s.step_time_us, lb.bound_us);

  Plan drop;
  PlanEntry e;
  e.region = t.regions[0].id;
  e.kind = EvictKind::kRecompute;
  e.evict_after = 1;
  e.back_access = e.trigger = 8;
  drop.entries.push_back(e);
  SimResult d = simulate(a, drop, 8 * kMiB);
  ASSERT_TRUE(d.feasible) << d.reason;
  EXPECT_GT(d.access_violations, 0u);
  EXPECT_LT(d.step_time_us, lb.bound_us);
}

TEST(LowerBoundTest, NoExcessMeansCompute) {
  Trace t = fixture(false);
  Analysis a = analyze(t);
  LowerBound lb = lower_bound(a, 12 * kMiB);
  EXPECT_DOUBLE_EQ(lb.bound_us, 100.0);
  EXPECT_DOUBLE_EQ(lb.traffic_us, 0.0);
}

// Past max_visits the bound drops its refinements and counts every recomputable region as free
// to leave: looser, never above the full bound, and still below what every policy reaches.
TEST(LowerBoundTest, TheFallbackForLongIterationsIsStillABound) {
  std::mt19937_64 rng(7);
  int compared = 0;
  for (int k = 0; k < 60; ++k) {
    Trace t = testing::random_trace(rng);
    Analysis a = analyze(t);
    for (int pct : {40, 70}) {
      const std::uint64_t budget = a.peak_bytes * static_cast<std::uint64_t>(pct) / 100;
      if (!impossible_budget_reason(a, budget).empty()) continue;
      const LowerBound full = lower_bound(a, budget);
      const LowerBound coarse = lower_bound(a, budget, /*max_visits=*/0);
      EXPECT_LE(coarse.bound_us, full.bound_us * (1 + 1e-9)) << "trace " << k << " at " << pct;
      EXPECT_GE(coarse.bound_us, a.ideal_step_us * (1 - 1e-9));
      for (const Plan& p : {plan_capuchin(a, budget), plan_lru(a, budget)}) {
        const SimResult s = simulate(a, p, budget);
        if (s.feasible) {
          EXPECT_GE(s.step_time_us, coarse.bound_us * (1 - 1e-9)) << p.policy;
        }
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 40);
}

// Runs the plan and expects it to reach the ideal step with no demand eviction, and the bound to
// be no higher.
void expect_ideal_run_within_the_bound(const Trace& t, const Plan& p, std::uint64_t budget) {
  const Analysis a = analyze(t);
  const SimResult s = simulate(a, p, budget);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.demand_evictions, 0u);
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_DOUBLE_EQ(s.step_time_us, a.ideal_step_us);
  EXPECT_LE(lower_bound(a, budget).bound_us, s.step_time_us * (1 + 1e-12));
}

// A region off when a launch starts may come back while it runs, in memory a copy-out landing
// then frees. W, read once per iteration, is off when the 1,000 us launch 2 starts (100 MB over
// 200 MB/ms: 500 us each way); A's copy-out lands at 500 us and W comes back in its memory by
// 1,000 us, for launch 3. The bound had W's copy-in start when launch 2 ends, so W's copy-out,
// after launch 3, ended at 2,000 us: a bound of 1,968.75 us against a run of 1,728 us.
TEST(LowerBoundTest, ACopyInMayRunWhileTheLaunchRuns) {
  Trace t = empty_trace(5, 0.0, 2e11);
  t.device.min_evictable_bytes = 0;
  t.launches[2].dur_us = 1000.0;
  t.launches[4].dur_us = 728.0;
  const std::uint64_t mb100 = 100'000'000;
  const RegionId a = add_region(t, mb100, 1, -1, {1});  // written, never read again
  add_region(t, mb100, 0, -1, {2});
  const RegionId w = add_region(t, mb100, 0, -1, {3});
  Plan p;
  p.entries.push_back({a, EvictKind::kSwap, 1, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  p.entries.push_back({w, EvictKind::kSwap, 3, kNoLaunch, 2, 3, 500.0});  // a wrap
  expect_ideal_run_within_the_bound(t, p, 2 * mb100);
}

// On two streams a region read after a launch, by launch order, may be read while it runs: X,
// read by launch 2 on stream 1, comes back (168 us each way) in the memory of A, copied out
// after launch 0, and is read and copied out again during the 1,000 us launch 1 on stream 0.
// The bound had X's copy-in after launch 1: 1,168 us against a run of 1,000 us.
TEST(LowerBoundTest, ARegionReadOnAnotherStreamMayComeBackWhileTheLaunchRuns) {
  Trace t = empty_trace(3, 0.0, 5e10);
  t.device.min_evictable_bytes = 0;
  t.launches[1].dur_us = 1000.0;
  t.launches[2].stream = 1;
  const RegionId a = add_region(t, 8 * kMiB, 0, 1, {0});
  add_region(t, 8 * kMiB, 0, -1, {1});
  const RegionId x = add_region(t, 8 * kMiB, 0, -1, {2});
  Plan p;
  p.entries.push_back({a, EvictKind::kSwap, 0, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  p.entries.push_back({x, EvictKind::kSwap, 2, kNoLaunch, 1, 2, 167.77});  // a wrap
  expect_ideal_run_within_the_bound(t, p, 16 * kMiB);
}

// A region too small to evict is resident while it lives, but on several streams its memory may
// come back while a launch it is live at still runs: freed after launch 4 (stream 0, no time),
// the 1 MiB region allocated for launch 3 gives its memory back while the 1,888 us launch 3 runs
// on stream 1, and the 6 MiB region restored for launch 6 comes back in it. The bound took the
// small regions as on the device for all of launch 3: 3,432.6 us against a run of 3,352 us.
TEST(LowerBoundTest, ASmallRegionFreedOnAnotherStreamGivesItsMemoryBackEarly) {
  Trace t = empty_trace(7, 0.0, 13e9);
  t.device.d2h_bytes_per_s = 19.5e9;
  t.launches[1].dur_us = 1464.0;
  t.launches[3].dur_us = 1888.0;
  for (std::size_t i : {1, 3, 6}) t.launches[i].stream = 1;
  add_region(t, 1 * kMiB, 3, 3, {});
  const RegionId d = add_region(t, 2 * kMiB, 0, 3, {});
  t.regions.back().recompute = Recompute{0.0, {}};
  const RegionId w = add_region(t, 6 * kMiB, 0, -1, {6});
  add_region(t, 6 * kMiB, 2, 3, {3});
  add_region(t, 1 * kMiB, 0, 4, {});
  add_region(t, 2'096'729, 1, 6, {});
  Plan p;
  p.entries.push_back({d, EvictKind::kRecompute, 2, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  p.entries.push_back({w, EvictKind::kSwap, 0, kNoLaunch, 5, 6, 483.96});
  const Analysis a = analyze(t);
  const SimResult s = simulate(a, p, 15 * kMiB);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_DOUBLE_EQ(s.step_time_us, 3352.0);
  EXPECT_LE(lower_bound(a, 15 * kMiB).bound_us, s.step_time_us * (1 + 1e-12));
}

// A region smaller than min_evictable_bytes never leaves the device, so it is not free to leave,
// even when no launch touches it: the byte over the budget at launch 1 must come from X, copied
// out before launch 1 and back after it. Counted as free, it left only compute (300 us).
TEST(LowerBoundTest, ARegionTooSmallToEvictIsNeverOff) {
  Trace t = empty_trace(3, 100.0, 1e9);
  add_region(t, 4 * kMiB, 0, -1, {0, 2});  // X
  add_region(t, 4 * kMiB, 1, 1, {1});
  add_region(t, 1 * kMiB, 0, -1, {});  // below the 2 MiB threshold, touched by no launch
  const Analysis a = analyze(t);
  const std::uint64_t budget = 8 * kMiB;
  const double mib_us = kMiB / 1e9 * 1e6;
  const LowerBound lb = lower_bound(a, budget);
  // X's copy-out starts when launch 0 ends, its copy-in when launch 1 ends, then launch 2 runs.
  EXPECT_NEAR(lb.bound_us, 100 + mib_us + 100 + mib_us + 100, 1e-6);
  for (const Plan& p : {plan_capuchin(a, budget), plan_lru(a, budget)}) {
    const SimResult s = simulate(a, p, budget);
    ASSERT_TRUE(s.feasible) << s.reason;
    EXPECT_GE(s.step_time_us, lb.bound_us) << p.policy;
  }
  // Where it may leave (every region can move), it is free to: compute alone is left.
  t.device.min_evictable_bytes = 0;
  const Analysis b = analyze(t);
  EXPECT_DOUBLE_EQ(lower_bound(b, budget).bound_us, 300.0);
}

// A 4-layer ViT-B/16, batch 64, swap-only: long enough for the refinement's visits to matter.
Trace vit4_swap_only() {
  TransformerConfig c;
  c.layers = 4, c.patch = 16, c.seq = 197, c.hidden = 768, c.heads = 12, c.batch = 64;
  c.vocab = 1000;
  return without_recompute(make_transformer(c));
}

// Past max_visits the refinements still run at the launches with the highest values without
// them (at least one). A 4-layer ViT-B/16, swap-only, at 50% of its peak: 35,285 us without the
// refinements, 37,220 us with them at every launch, 37,043 us refined at the highest launch
// only; every policy's step stays above it.
TEST(LowerBoundTest, PastTheVisitsTheHighestLaunchesAreRefinedStill) {
  const Trace t = vit4_swap_only();
  const Analysis a = analyze(t);
  const std::uint64_t budget = a.peak_bytes / 2;
  const double full = lower_bound(a, budget).bound_us;
  const double partial = lower_bound(a, budget, /*max_visits=*/0).bound_us;
  EXPECT_LE(partial, full * (1 + 1e-12));
  EXPECT_GT(partial, 37'000.0);  // 35,285 us with no launch refined
  for (const Plan& p : {plan_capuchin(a, budget), plan_belady(a, budget), plan_lru(a, budget)}) {
    const SimResult s = simulate(a, p, budget);
    if (s.feasible) {
      EXPECT_GE(s.step_time_us, full * (1 - 1e-9)) << p.policy;
    }
  }
}

// The refinement visits every region at each launch it runs at: at most a sixteenth of
// max_visits in all (or one launch), so a long iteration costs under a second. At every launch
// over the budget when that many visits allow it, at the highest launches otherwise.
TEST(LowerBoundTest, TheRefinementSpendsASixteenthOfTheVisitsAtMost) {
  const Trace t = vit4_swap_only();
  const Analysis a = analyze(t);
  const std::uint64_t budget = a.peak_bytes / 2;
  std::size_t over = 0;
  for (std::uint64_t b : a.live_bytes) over += b > budget;
  ASSERT_GT(over, 16u);
  const double regions = static_cast<double>(t.regions.size());
  const double all = static_cast<double>(over) * regions;
  const LowerBound full = lower_bound(a, budget, 16 * all);
  EXPECT_EQ(full.refined_launches, over);
  for (double visits : {16 * all - 1, all, all / 4, 0.0}) {
    const LowerBound part = lower_bound(a, budget, visits);
    EXPECT_LT(part.refined_launches, over) << visits;
    EXPECT_GE(part.refined_launches, 1u) << visits;
    EXPECT_LE(static_cast<double>(part.refined_launches) * regions, std::max(regions, visits / 16))
        << visits;
    EXPECT_LE(part.bound_us, full.bound_us * (1 + 1e-12)) << visits;
  }
}

// A corpus trace at half its peak: its lower bound, after checking that the plans the search
// finds in each of `evaluations` run validly and no faster than it.
double bound_at_half_peak_searched(std::string_view name,
                                   std::initializer_list<std::size_t> evaluations) {
  const Trace t = *corpus_trace(name);
  const Analysis a = analyze(t);
  const std::uint64_t budget = a.peak_bytes / 2;
  const double bound = lower_bound(a, budget).bound_us;
  for (const std::size_t e : evaluations) {
    SearchOptions o;
    o.max_evaluations = e;
    const SearchResult r = search_plan(a, budget, o);
    EXPECT_TRUE(r.sim.feasible) << name << " " << e;
    EXPECT_EQ(r.sim.access_violations, 0u) << name << " " << e;
    EXPECT_GE(r.sim.step_time_us, bound) << name << " " << e;
  }
  return bound;
}

// On this random iteration at half its peak, a launch's value needs more than 32 cells of the
// alpha grid refined, which it draws from the allowance shared by all launches. With 32 cells per
// launch at most the bound was 25,770 us.
TEST(LowerBoundTest, ALaunchMayRefineMoreCellsThanItsShare) {
  EXPECT_GT(bound_at_half_peak_searched("random:1000", {300}), 35'000.0);
}

// On this random iteration at half its peak, the room a recomputation needs also counts the
// copy-outs of the bytes carried over from the previous iteration that are off the device then:
// made before it, from the iteration's start, or after their last use, at the step's end, which
// the copy-ins after the recomputation delay. The bound rose from 84.6 ms to 97.1 ms; the
// search's plans run 101-106 ms.
TEST(LowerBoundTest, TheRoomForARecomputationCountsCarriedBytesCopiedOut) {
  EXPECT_GT(bound_at_half_peak_searched("random:1005", {300, 2000}), 95'000.0);
}

// On this random iteration at half its peak, the split of the bytes swapped between copy-outs
// before the peak and wraps copied out after their last use is least where the two cross: cells
// there are cut finer. With 16 even cells the bound was 47,649 us; the search's plans run about
// 49,200 us.
TEST(LowerBoundTest, TheSplitIsCutFinerWhereItIsLeast) {
  EXPECT_GT(bound_at_half_peak_searched("random:1002", {300}), 48'500.0);
}

// The fixture with X recomputable: the coarse bound lets X leave for free, so only compute is
// left; the full bound charges its recomputation or its copies.
TEST(LowerBoundTest, TheFallbackLetsRecomputableRegionsLeaveForFree) {
  Trace t = fixture(true);
  Analysis a = analyze(t);
  EXPECT_DOUBLE_EQ(lower_bound(a, 8 * kMiB, 0).bound_us, 100.0);
  EXPECT_GT(lower_bound(a, 8 * kMiB).bound_us, 103.5);
}

}  // namespace
}  // namespace gswap::policy
