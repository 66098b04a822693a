// simulator_test.cpp: the simulator's model on hand-built traces, and property tests on random
// traces: every policy's plan stays within the budget, every evicted region is back before its
// next access, and no predicted step time falls below the lower bound.
#include "policy/simulator.h"

#include <random>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "policy/baselines.h"
#include "policy/capuchin.h"
#include "policy/lower_bound.h"
#include "policy/planners.h"
#include "policy/search.h"
#include "policy/test_traces.h"

namespace gswap::policy {
namespace {

using testing::add_region;
using testing::empty_trace;
using testing::kMiB;

TEST(SimulatorTest, UnconstrainedRunIsTheIdealTimeline) {
  Trace t = empty_trace(5, 10.0, 1e9);
  add_region(t, 4 * kMiB, 0, -1, {0, 4});
  Analysis a = analyze(t);
  SimResult s = simulate(a, Plan{}, 1ull << 30);
  ASSERT_TRUE(s.feasible);
  EXPECT_DOUBLE_EQ(s.step_time_us, 50.0);
  EXPECT_DOUBLE_EQ(s.ideal_step_time_us, 50.0);
  EXPECT_EQ(s.peak_resident_bytes, 4 * kMiB);
  EXPECT_EQ(s.swapped_out_bytes, 0u);
}

// Persistent state above the budget, every launch within it: a passive policy starts the
// iteration by evicting on demand, as it would at the end of the previous one, not "impossible".
TEST(SimulatorTest, PersistentStateAboveTheBudgetIsEvictedAtTheStart) {
  Trace t = empty_trace(16, 1.0, 1e10);
  t.device.min_evictable_bytes = 0;
  for (std::size_t r = 0; r < 8; ++r) add_region(t, 4096, 0, -1, {r, r + 8});
  Analysis a = analyze(t);
  const std::uint64_t budget = 4 * 4096;
  SimResult s = simulate(a, plan_lru(a, budget), budget);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_GT(s.demand_evictions, 0u);
  EXPECT_LE(s.peak_resident_bytes, budget);
  EXPECT_EQ(s.access_violations, 0u);
}

TEST(SimulatorTest, BudgetRespectingPlanReportsPeakWithinBudget) {
  // X (4 MiB) used at 0 and 9; Y (4 MiB) allocated at 2, used to 6. Budget 4 MiB + a bit: X
  // must be out while Y lives. The swap-out frees memory only when its copy is done, so Y's
  // allocation waits for it.
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 25e-6);  // 25 us per 4 MiB
  RegionId x = add_region(t, 4 * kMiB, 0, -1, {0, 9});
  add_region(t, 4 * kMiB, 2, 6, {2, 3, 4, 5, 6});
  Analysis a = analyze(t);
  Plan p;
  p.entries.push_back({x, EvictKind::kSwap, 0, kNoLaunch, 7, 9, 25.0});
  const std::uint64_t budget = 5 * kMiB;
  SimResult s = simulate(a, p, budget);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_LE(s.peak_resident_bytes, budget);
  EXPECT_EQ(s.demand_evictions, 0u);
  // Out copy runs 10..35; launch 2 would start at 20 and waits until 35.
  EXPECT_DOUBLE_EQ(s.stall_us, 15.0 + 5.0);  // and 5 us waiting for the late restore below
  EXPECT_DOUBLE_EQ(s.d2h_busy_us, 25.0);
  EXPECT_DOUBLE_EQ(s.h2d_busy_us, 25.0);
  EXPECT_EQ(s.access_violations, 0u);
  // The restore starts with launch 7 (at 85 us, after the stall) and takes 25 us; launch 9 would
  // start at 105, so it is 5 us late, which the feedback rule would fix.
  EXPECT_DOUBLE_EQ(s.lateness_us[0], 5.0);
}

// A plan that evicts a region for good after its last use, while the next iteration reads it
// (the trace's carried-over instance of it): that iteration starts with it on the host and
// restores it on demand at its first use, as the library does. It is not resident for free.
TEST(SimulatorTest, ARegionEvictedForGoodStartsTheNextIterationOnTheHost) {
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 25e-6);  // 25 us per 4 MiB
  for (Launch& l : t.launches) l.seq += 100;
  RegionId x = add_region(t, 4 * kMiB, 95, 102, {0, 2});   // the previous iteration's instance
  RegionId y = add_region(t, 4 * kMiB, 105, 112, {5, 7});  // this one's, read next at 0 and 2
  Analysis a = analyze(t);
  ASSERT_EQ(a.next_instance[a.index.at(x)], a.index.at(y));
  const std::uint64_t budget = 1ull << 30;
  SimResult kept = simulate(a, Plan{}, budget);
  EXPECT_EQ(kept.demand_restores, 0u);
  EXPECT_DOUBLE_EQ(kept.step_time_us, 100.0);

  Plan p;
  p.entries.push_back({y, EvictKind::kSwap, 7, kNoLaunch, kNoLaunch, kNoLaunch, 25.0});
  SimResult s = simulate(a, p, budget);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.demand_restores, 1u);
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_DOUBLE_EQ(s.h2d_busy_us, 25.0);
  EXPECT_DOUBLE_EQ(s.d2h_busy_us, 25.0);
  // x comes back over 0..25 us and launch 0 waits for it; launch 7 ends at 105, y's copy-out
  // 105..130.
  EXPECT_DOUBLE_EQ(s.stall_us, 25.0);
  EXPECT_DOUBLE_EQ(s.step_time_us, 130.0);

  // Unpaired (y lives longer than x), the same plan leaves x where it was: resident.
  t.regions[y - 1].free_seq = 114;
  Analysis b = analyze(t);
  SimResult u = simulate(b, p, budget);
  EXPECT_EQ(u.demand_restores, 0u);
  EXPECT_DOUBLE_EQ(u.stall_us, 0.0);
  EXPECT_DOUBLE_EQ(u.step_time_us, 105.0);  // y's copy-out over 80..105
}

// The pair across the boundary is one region: the lower bound counts its copy-out once (not as
// the next instance's and again as the carried-over one's), and stays below what plans run in.
// A wrap entry on a region the iteration frees does nothing: it starts the iteration resident.
TEST(SimulatorTest, ARegionAcrossTheIterationsStartKeepsTheBoundBelowEveryPlan) {
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 1000e-6);  // 1000 us per 4 MiB
  for (Launch& l : t.launches) l.seq += 100;
  RegionId x = add_region(t, 4 * kMiB, 91, 102, {2});   // read at 2, freed before seq 103
  RegionId y = add_region(t, 4 * kMiB, 101, 112, {1});  // the next iteration's x
  add_region(t, 8 * kMiB, 100, 100, {0});               // temporaries
  add_region(t, 8 * kMiB, 103, 109, {3, 4, 5, 6, 7, 8, 9});
  Analysis a = analyze(t);
  ASSERT_EQ(a.next_instance[a.index.at(x)], a.index.at(y));
  const std::uint64_t budget = 8 * kMiB;
  const double lb = lower_bound(a, budget).bound_us;
  Plan gone;  // y evicted for good after its write: x comes back on demand next iteration
  gone.entries.push_back({y, EvictKind::kSwap, 1, kNoLaunch, kNoLaunch, kNoLaunch, 1000.0});
  Plan wrap;  // a wrap entry on x, which the iteration frees before it could run
  wrap.entries.push_back({x, EvictKind::kSwap, 5, kNoLaunch, 9, 2, 1000.0});
  for (const Plan& p :
       std::vector<Plan>{gone, wrap, plan_lru(a, budget), plan_capuchin(a, budget)}) {
    const SimResult s = simulate(a, p, budget);
    if (!s.feasible) continue;
    EXPECT_GE(s.step_time_us, lb * (1 - 1e-9)) << p.policy;
  }
  const SimResult w = simulate(a, wrap, budget), none = simulate(a, Plan{}, budget);
  EXPECT_DOUBLE_EQ(w.step_time_us, none.step_time_us);
  EXPECT_EQ(w.swapped_out_bytes, none.swapped_out_bytes);
}

// Ten launches of 10 us, 25 us per 4 MiB each way. X, carried over and freed after launch 2, read
// at `x_reads`; Y, its next instance, written at 5 and read at 7; both recomputable (sources set
// by the caller). Region 1 is the persistent source P, region 2 one carried over and freed after
// launch 0 (Q). `drop` drops Y for good after its last read.
struct AcrossTheStart {
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 25e-6);
  RegionId p, q, x, y;
  Plan drop;
  explicit AcrossTheStart(std::initializer_list<std::size_t> x_reads) {
    for (Launch& l : t.launches) l.seq += 100;
    p = add_region(t, 4 * kMiB, 0, -1, {0, 9});
    q = add_region(t, 4 * kMiB, 0, 100, {0});
    x = add_region(t, 4 * kMiB, 95, 102, x_reads);
    y = add_region(t, 4 * kMiB, 105, 112, {5, 7});
    drop.entries.push_back({y, EvictKind::kRecompute, 7, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  }
  SimResult run(RegionId source) {
    for (RegionId id : {x, y}) t.regions[id - 1].recompute = Recompute{5.0, {source}};
    const Analysis a = analyze(t);
    EXPECT_EQ(a.next_instance[a.index.at(x)], a.index.at(y));
    return simulate(a, drop, 1ull << 30);
  }
};

// Dropped for good instead, the next iteration's instance is recomputed at its first use when
// its sources are there at the start and still at that use. Otherwise the drop keeps a copy on
// the host (a copy-out) and the first use restores it: never resident for free, and never
// restored from nothing (it was charged a restore with no copy-out, and ran under the lower
// bound), nor recomputed from a source already gone (an access violation).
TEST(SimulatorTest, ARegionDroppedForGoodIsRecomputedInTheNextIteration) {
  AcrossTheStart pair({0, 2});
  const SimResult s = pair.run(pair.p);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_DOUBLE_EQ(s.recompute_us, 5.0);
  EXPECT_DOUBLE_EQ(s.step_time_us, 105.0);
  // Recomputable from a region that is not there at the start: a swap. X comes back over 0..25
  // us, launch 7 ends at 105 us, Y's copy-out over 105..130.
  const SimResult r = pair.run(pair.y);
  EXPECT_EQ(r.access_violations, 0u);
  EXPECT_EQ(r.demand_restores, 1u);
  EXPECT_EQ(r.swapped_out_bytes, 4 * kMiB);
  EXPECT_DOUBLE_EQ(r.recompute_us, 0.0);
  EXPECT_DOUBLE_EQ(r.step_time_us, 130.0);
  // From Q, carried over but freed before X's first use at launch 2: a swap too (X started
  // dropped, and its recomputation at 2 had no source).
  AcrossTheStart late({2});
  const SimResult u = late.run(late.q);
  ASSERT_TRUE(u.feasible) << u.reason;
  EXPECT_EQ(u.access_violations, 0u);
  EXPECT_EQ(u.demand_restores, 1u);
  EXPECT_EQ(u.swapped_out_bytes, 4 * kMiB);
}

// X, recomputable from P (carried over, freed after launch 0) and read at 2, is a source of Z:
// dropping Y, its next instance, for good keeps a copy, as P is gone by X's first use (X was
// started dropped, its recomputation at 2 an access violation). And Y dropped with a back-access
// where it is never read, then "evicted for good" when already off: no copy-out happened, yet X
// started on the host; the copy is now made at the end of the iteration.
TEST(SimulatorTest, TheNextIterationIsRestoredOnlyFromACopyThatWasMade) {
  Trace t = empty_trace(4, 10.0, 4.0 * kMiB / 25e-6);
  for (Launch& l : t.launches) l.seq += 100;
  const RegionId p = add_region(t, 4 * kMiB, 90, 100, {0});
  const RegionId x = add_region(t, 4 * kMiB, 95, 102, {2});
  const RegionId y = add_region(t, 4 * kMiB, 101, 108, {1});
  const RegionId z = add_region(t, 4 * kMiB, 100, 103, {3});
  for (RegionId id : {x, y}) t.regions[id - 1].recompute = Recompute{5.0, {p}};
  t.regions[z - 1].recompute = Recompute{5.0, {x}};
  Analysis a = analyze(t);
  Plan drop;
  drop.entries.push_back({y, EvictKind::kRecompute, 1, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  const SimResult s = simulate(a, drop, 1ull << 30);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_EQ(s.swapped_out_bytes, 4 * kMiB);
  EXPECT_EQ(s.swapped_in_bytes, 4 * kMiB);

  Plan twice;
  twice.entries.push_back({y, EvictKind::kRecompute, 1, kNoLaunch, kNoLaunch, 3, 0.0});
  twice.entries.push_back({y, EvictKind::kSwap, 2, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  const SimResult u = simulate(a, twice, 1ull << 30);
  ASSERT_TRUE(u.feasible) << u.reason;
  EXPECT_EQ(u.swapped_in_bytes, 4 * kMiB);
  EXPECT_EQ(u.swapped_out_bytes, 4 * kMiB);
}

// A wrap entry on the next instance after the last launch, where the trace frees it: the free
// comes first, so it does not end the iteration on the host, and the carried-over instance
// starts resident. (It was counted as ending it there: the carried-over one was restored from
// a copy that was never made.)
TEST(SimulatorTest, AnEvictionAfterTheFreeLeavesNothingOnTheHost) {
  Trace t = empty_trace(4, 10.0, 4.0 * kMiB / 25e-6);
  for (Launch& l : t.launches) l.seq += 100;
  const RegionId x = add_region(t, 4 * kMiB, 97, 101, {1});
  const RegionId y = add_region(t, 4 * kMiB, 101, 105, {1, 3});
  Analysis a = analyze(t);
  ASSERT_EQ(a.next_instance[a.index.at(x)], a.index.at(y));
  Plan wrap;
  wrap.entries.push_back({y, EvictKind::kSwap, 3, kNoLaunch, kNoLaunch, 1, 25.0});
  const SimResult s = simulate(a, wrap, 1ull << 30);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.swapped_out_bytes, 0u);
  EXPECT_EQ(s.swapped_in_bytes, 0u);
  EXPECT_DOUBLE_EQ(s.step_time_us, 40.0);
}

// R, recomputed from P, is read at 0 and 6 and dropped after 0; D, recomputed from R, is dropped
// after 1 and read at 3, where R is recomputed with it and kept. Evicted at launch 4, R's
// copy-out starts once launch 3 has ended (and R was written): 40 us, not at its last read
// (10 us).
TEST(SimulatorTest, ACopyOutFollowsTheRecomputationThatWroteTheRegion) {
  Trace t = empty_trace(8, 10.0, 4.0 * kMiB / 25e-6);
  const RegionId p = add_region(t, 4 * kMiB, 0, -1, {0, 7});
  const RegionId r = add_region(t, 4 * kMiB, 0, 7, {0, 6});
  const RegionId d = add_region(t, 4 * kMiB, 1, 7, {1, 3});
  t.regions[r - 1].recompute = Recompute{5.0, {p}};
  t.regions[d - 1].recompute = Recompute{5.0, {r}};
  Analysis a = analyze(t);
  Plan plan;
  plan.entries.push_back({r, EvictKind::kRecompute, 0, kNoLaunch, kNoLaunch, 3, 0.0});
  plan.entries.push_back({d, EvictKind::kRecompute, 1, kNoLaunch, kNoLaunch, 3, 0.0});
  plan.entries.push_back({r, EvictKind::kSwap, 3, 4, 5, 6, 25.0});
  SimEvents ev;
  const SimResult s = simulate(a, plan, 1ull << 30, &ev);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  ASSERT_EQ(s.swapped_out_bytes, 4 * kMiB);
  double out_start = -1;
  for (const auto& c : ev.copies)
    if (!c.to_device) out_start = c.start_us;
  EXPECT_GE(out_start, ev.launches[3].end_us);
}

// R, recomputed from P, is dropped after 0 for its read at 3; D, recomputed from R, is dropped
// after 1 for its read at 2, where R is recomputed with it and kept. Launch 3 then reads R: from
// there on it is an ordinary region. P is freed after 4, so when X's allocation at 6 needs R's
// memory, R must leave with a copy (a demand eviction) for its read at 8, not be dropped as a
// kept intermediate that nothing could recompute.
TEST(SimulatorTest, AKeptIntermediateTheProgramReadsIsNoLongerDroppedForFree) {
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 25e-6);
  const RegionId p = add_region(t, 4 * kMiB, 0, 4, {0});
  const RegionId r = add_region(t, 4 * kMiB, 0, -1, {0, 3, 8});
  const RegionId d = add_region(t, 4 * kMiB, 1, 2, {1, 2});
  add_region(t, 12 * kMiB, 6, 6, {6});
  t.regions[r - 1].recompute = Recompute{5.0, {p}};
  t.regions[d - 1].recompute = Recompute{5.0, {r}};
  Analysis a = analyze(t);
  Plan plan;
  plan.entries.push_back({r, EvictKind::kRecompute, 0, kNoLaunch, 3, 3, 0.0});
  plan.entries.push_back({d, EvictKind::kRecompute, 1, kNoLaunch, 2, 2, 0.0});
  const SimResult s = simulate(a, plan, 12 * kMiB);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_EQ(s.demand_evictions, 1u);
  EXPECT_EQ(s.swapped_out_bytes, 4 * kMiB);
  EXPECT_EQ(s.recomputed_bytes, 8 * kMiB);  // R and D at launch 2, nothing more
}

// X = f(S1, S2) and S2 = g(S1), all three dropped after launch 3; X is read again at 6, beside Z
// (16 MiB), also read there. Recomputing X makes S1 resident, then S2 (S1 kept beside it), then
// X: S1 is still a source of X when S2 is done, so it stays protected until X exists. At 28 MiB
// X cannot be recomputed beside its two sources and Z (32 MiB): the plan cannot run. (The
// simulator dropped S1, a kept intermediate, to make room for X, and "recomputed" X from it in
// 83 us, under the lower bound.) At 32 MiB all three are recomputed, once each.
TEST(SimulatorTest, AKeptSourceStaysWhileARecomputationThatReadsItWaits) {
  Trace t = empty_trace(8, 10.0, 4.0 * kMiB / 1000e-6);
  const RegionId s1 = add_region(t, 4 * kMiB, 1, 7, {1, 2, 3});
  const RegionId s2 = add_region(t, 4 * kMiB, 2, 7, {2, 3});
  const RegionId x = add_region(t, 8 * kMiB, 3, 7, {3, 6});
  add_region(t, 16 * kMiB, 4, 7, {4, 6, 7});
  add_region(t, 12 * kMiB, 5, 5, {5});
  t.regions[s1 - 1].recompute = Recompute{1.0, {}};
  t.regions[s2 - 1].recompute = Recompute{1.0, {s1}};
  t.regions[x - 1].recompute = Recompute{1.0, {s1, s2}};
  Analysis a = analyze(t);
  Plan plan;
  plan.entries.push_back({s1, EvictKind::kRecompute, 3, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  plan.entries.push_back({s2, EvictKind::kRecompute, 3, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  plan.entries.push_back({x, EvictKind::kRecompute, 3, kNoLaunch, 6, 6, 0.0});
  EXPECT_FALSE(simulate(a, plan, 28 * kMiB).feasible);
  const SimResult s = simulate(a, plan, 32 * kMiB);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_EQ(s.recomputed_bytes, 16 * kMiB);
  EXPECT_DOUBLE_EQ(s.step_time_us, 83.0);
  EXPECT_GE(s.step_time_us, lower_bound(a, 32 * kMiB).bound_us);
}

// R, read only at launch 0 and freed after launch 3, is swapped out after launch 0 "for good" with
// a trigger at 3 (and no back-access: none of R's accesses comes after). Nothing needs R again,
// so the trigger is not followed. (It was: R's restore took the memory of G's copy-out, running
// until 210 us, R was freed before that restore even started, and the memory came back at the
// free, at 111 us, while G's data was still being copied out of it; X, recomputed for launch 4
// beside S and Z, used it, and the run beat the lower bound.) X waits for G's copy-out: launch 4
// runs from 211 us.
TEST(SimulatorTest, AnEvictionForGoodHasNoRestoreToFollow) {
  Trace t = empty_trace(5, 10.0, 4.0 * kMiB / 100e-6);
  t.device.h2d_bytes_per_s = 4.0 * kMiB / 1e-6;
  const double dur[5] = {10, 90, 10, 1, 100};
  for (int k = 0; k < 5; ++k) t.launches[k].dur_us = dur[k];
  const RegionId r = add_region(t, 4 * kMiB, 0, 3, {0});
  const RegionId g = add_region(t, 4 * kMiB, 1, 4, {1});
  const RegionId x = add_region(t, 4 * kMiB, 1, 4, {1, 4});
  const RegionId src = add_region(t, 4 * kMiB, 1, 4, {1});
  add_region(t, 8 * kMiB, 2, 4, {2, 4});
  add_region(t, 4 * kMiB, 3, 3, {3});
  t.regions[x - 1].recompute = Recompute{1.0, {src}};
  t.regions[src - 1].recompute = Recompute{1.0, {}};
  Analysis a = analyze(t);
  Plan plan;
  plan.entries.push_back({r, EvictKind::kSwap, 0, kNoLaunch, 3, kNoLaunch, 0.0});
  plan.entries.push_back({g, EvictKind::kSwap, 1, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  plan.entries.push_back({x, EvictKind::kRecompute, 1, kNoLaunch, 4, 4, 0.0});
  plan.entries.push_back({src, EvictKind::kRecompute, 1, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  SimEvents ev;
  const SimResult s = simulate(a, plan, 16 * kMiB, &ev);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_EQ(s.swapped_in_bytes, 0u);
  EXPECT_DOUBLE_EQ(ev.launches[4].start_us, 211.0);
  EXPECT_DOUBLE_EQ(s.step_time_us, 311.0);
  EXPECT_GE(s.step_time_us, lower_bound(a, 16 * kMiB).bound_us);
}

// What is live at the start is over the budget: region 1 is evicted on demand before launch 0,
// and its copy-out (75 us) must end before launch 0 can have that memory. Launch 0 starts at 75
// us, not at 0.
TEST(SimulatorTest, TheFirstLaunchWaitsForTheEvictionsThatMakeRoomForIt) {
  Trace t;
  t.device = {80ull << 30, 419430400000.0, 83886080000.0};  // 6 MiB: 15 us in, 75 us out
  t.device.min_evictable_bytes = 0;
  t.launches.push_back({5, 0, 10, 1, {2, 4}, "k"});
  t.launches.push_back({6, 0, 100, 1, {3}, "k"});
  t.launches.push_back({7, 0, 50, 0, {}, "k"});
  t.launches.push_back({9, 0, 10, 0, {1}, "k"});
  auto region = [&](RegionId id, std::uint64_t bytes, Seq alloc) {
    Region r;
    r.id = id, r.bytes = bytes, r.alloc_seq = alloc;
    t.regions.push_back(r);
    return &t.regions.back();
  };
  region(1, 6 * kMiB, 0);
  region(2, 6 * kMiB, 0)->recompute = Recompute{0, {}};
  region(3, 4 * kMiB, 0)->recompute = Recompute{0, {1, 2}};
  region(4, 4 * kMiB, 5)->free_seq = 9;
  Analysis a = analyze(t);
  Plan plan;
  plan.entries.push_back({2, EvictKind::kRecompute, 2, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  const std::uint64_t budget = 14994636;
  SimEvents ev;
  const SimResult s = simulate(a, plan, budget, &ev);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_DOUBLE_EQ(ev.launches[0].start_us, 75.0);
  EXPECT_GE(s.step_time_us, lower_bound(a, budget).bound_us);
}

// Two entries after R's last access (launch 1): a drop after 1 and a swap after 2. The drop comes
// first; the swap then finds R dropped and copies nothing. So R ends the iteration dropped and,
// recomputable from S (carried over), starts the next one dropped: launch 1 recomputes it. (The
// simulator took the swap for a wrap and restored R from a copy never made.) With the two
// entries the other way round, the swap copies R out and the drop finds nothing: R starts on the
// host and is restored.
TEST(SimulatorTest, OfTwoEvictionsAfterTheLastUseTheFirstSaysHowTheRegionEnds) {
  Trace t = empty_trace(3, 10.0, 4.0 * kMiB / 100e-6);
  const RegionId src = add_region(t, 4 * kMiB, 0, -1, {0});
  const RegionId r = add_region(t, 8 * kMiB, 0, -1, {1});
  t.regions[r - 1].recompute = Recompute{5.0, {src}};
  Analysis a = analyze(t);
  const std::uint64_t budget = 12 * kMiB;
  Plan drop_first;
  drop_first.entries.push_back({r, EvictKind::kRecompute, 1, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  drop_first.entries.push_back({r, EvictKind::kSwap, 1, 2, kNoLaunch, kNoLaunch, 0.0});
  SimResult s = simulate(a, drop_first, budget);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_EQ(s.recomputed_bytes, 8 * kMiB);
  EXPECT_EQ(s.swapped_in_bytes, 0u);
  EXPECT_EQ(s.swapped_out_bytes, 0u);
  Plan swap_first;
  swap_first.entries.push_back({r, EvictKind::kSwap, 1, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  swap_first.entries.push_back({r, EvictKind::kRecompute, 1, 2, kNoLaunch, kNoLaunch, 0.0});
  s = simulate(a, swap_first, budget);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_EQ(s.recomputed_bytes, 0u);
  EXPECT_EQ(s.swapped_in_bytes, 8 * kMiB);
  EXPECT_EQ(s.swapped_out_bytes, 8 * kMiB);
}

// How a region ends the iteration (and so how it starts the next) comes from the entries the run
// issues, in the order it issues them. Five plans whose entries the start state took for a wrap
// the run never made, each restoring a region from a copy never made and so beating the lower
// bound: (1) a drop after launch 1 and a swap issued at launch 2 (the drop is issued first); (2) a
// wrap past the last launch (never issued); (3) a wrap on a region too small to evict (ignored);
// (4) a drop after the last access whose back-access is no access of it (nothing brings it back),
// then a swap; (5) on two streams, a drop issued at launch 2 after the last access (judged by its
// evict_after, before it), then a swap.
TEST(SimulatorTest, TheEntriesTheRunIssuesSayHowARegionEndsTheIteration) {
  auto region = [](Trace& t, RegionId id, std::uint64_t bytes, Seq alloc, long free_seq = -1) {
    Region r;
    r.id = id, r.bytes = bytes, r.alloc_seq = alloc;
    if (free_seq >= 0) r.free_seq = static_cast<Seq>(free_seq);
    t.regions.push_back(r);
    return &t.regions.back();
  };
  auto launch = [](Trace& t, Seq seq, double dur, std::uint32_t stream,
                   std::vector<RegionId> regions) {
    t.launches.push_back({seq, 0, dur, stream, std::move(regions), "k"});
  };
  auto entry = [](RegionId r, EvictKind k, std::size_t after, std::size_t back = kNoLaunch,
                  std::size_t at = kNoLaunch) {
    return PlanEntry{r, k, after, at, kNoLaunch, back, 0.0};
  };
  struct Case {
    Trace t;
    Plan p;
    std::uint64_t budget;
  };
  std::vector<Case> cases(5);
  {
    Trace& t = cases[0].t;
    t.device = {80ull << 30, 8388608000.0, 4194304000.0};
    t.device.min_evictable_bytes = 0;
    launch(t, 5, 0, 0, {1, 4});
    launch(t, 6, 100, 0, {6});
    launch(t, 7, 50, 0, {});
    region(t, 1, 10 * kMiB, 5, 7)->recompute = Recompute{0, {}};
    region(t, 4, 2 * kMiB, 3, 8);
    region(t, 6, 12 * kMiB, 0)->recompute = Recompute{100, {1}};
    cases[0].p.entries = {entry(6, EvictKind::kSwap, 1, kNoLaunch, 2),
                          entry(1, EvictKind::kRecompute, 0), entry(6, EvictKind::kRecompute, 1)};
    cases[0].budget = 18790481;
  }
  for (int k : {1, 2}) {
    Trace& t = cases[k].t;
    t.device = {80ull << 30, 8388608000.0, 4194304000.0};
    t.device.min_evictable_bytes = k == 1 ? 0 : 2 * kMiB;
    launch(t, 0, 10, 0, {3});
    launch(t, 1, 10, 0, k == 1 ? std::vector<RegionId>{1} : std::vector<RegionId>{1, 2});
    launch(t, 2, 10, 0, {});
    region(t, 1, 12 * kMiB, 0);
    if (k == 2) region(t, 2, 1 * kMiB, 0);
    region(t, 3, 12 * kMiB, 0, 1);
    cases[k].p.entries = {k == 1 ? entry(1, EvictKind::kSwap, 7, 1)
                                 : entry(2, EvictKind::kSwap, 1, 1)};
    cases[k].budget = k == 1 ? 12 * kMiB : 24 * kMiB;
  }
  {
    Trace& t = cases[3].t;
    t.device = {80ull << 30, 419430400000.0, 83886080000.0};
    t.device.min_evictable_bytes = 2 * kMiB;
    launch(t, 12, 10, 0, {1});
    launch(t, 14, 10, 0, {});
    launch(t, 18, 1, 0, {2});
    launch(t, 20, 0, 0, {});
    launch(t, 21, 20, 0, {});
    region(t, 1, 12 * kMiB, 12, 15)->recompute = Recompute{100, {2}};
    region(t, 2, 10 * kMiB, 0)->recompute = Recompute{0, {1}};
    cases[3].p.entries = {entry(2, EvictKind::kRecompute, 2, 4), entry(2, EvictKind::kSwap, 3)};
    cases[3].budget = 15938355;
  }
  {
    Trace& t = cases[4].t;
    t.device = {80ull << 30, 4194304000000.0, 419430400000.0};
    t.device.min_evictable_bytes = 2 * kMiB;
    launch(t, 9, 10, 1, {1, 2});
    launch(t, 14, 10, 1, {4});
    launch(t, 15, 5, 0, {});
    launch(t, 17, 10, 0, {});
    region(t, 1, 12 * kMiB, 9, 10);
    region(t, 2, 8 * kMiB, 2, 16)->recompute = Recompute{0, {}};
    region(t, 4, 10 * kMiB, 0)->recompute = Recompute{100, {}};
    cases[4].p.entries = {entry(4, EvictKind::kSwap, 3),
                          entry(4, EvictKind::kRecompute, 0, kNoLaunch, 2)};
    cases[4].budget = 21600665;
  }
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const Analysis a = analyze(cases[k].t);
    const SimResult s = simulate(a, cases[k].p, cases[k].budget);
    if (!s.feasible || s.access_violations) continue;
    EXPECT_GE(s.step_time_us, lower_bound(a, cases[k].budget).bound_us - 1e-6) << "case " << k + 1;
  }
}

// X, carried over and read at launch 0, is the previous instance of Y, allocated for launch 1 and
// never read. A drop of Y after launch 0 comes before Y exists: it drops nothing, so Y ends the
// iteration resident and X starts the next one resident, not dropped (it was recomputed at 0).
TEST(SimulatorTest, AnEvictionBeforeTheRegionIsAllocatedDoesNothing) {
  Trace t = empty_trace(2, 10.0, 1e6 * kMiB);
  for (Launch& l : t.launches) l.seq += 10;
  Region x, y;
  x.id = 1, x.bytes = 4 * kMiB, x.alloc_seq = 9, x.free_seq = 11;
  y.id = 2, y.bytes = 4 * kMiB, y.alloc_seq = 11, y.free_seq = 13;
  x.recompute = y.recompute = Recompute{3.0, {}};
  t.regions = {x, y};
  t.launches[0].regions.push_back(1);
  Analysis a = analyze(t);
  ASSERT_EQ(a.next_instance[0], 1u);
  Plan plan;
  plan.entries.push_back({2, EvictKind::kRecompute, 0, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  const SimResult s = simulate(a, plan, a.peak_bytes);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.recompute_us, 0.0);
}

// X, allocated for launch 1 (on stream 1, 100 us), is freed after launch 2 on stream 0, which
// ends long before launch 1 does. B, evicted to make room for X, comes back for launch 3 only in
// X's memory, and that memory is X's until launch 1 ends (120 us): B's copy-in runs 120-130 us,
// launch 3 130-140 us. (The simulator gave the memory back at the end of launch 2, 30 us, while
// launch 1 still used X, and ran the step in 120 us, under the lower bound of 130 us.)
TEST(SimulatorTest, MemoryALaunchOnAnotherStreamUsesComesBackWhenItEnds) {
  Trace t = empty_trace(4, 10.0, 8.0 * kMiB / 10e-6);
  t.launches[1].stream = 1;
  t.launches[1].dur_us = 100.0;
  add_region(t, 8 * kMiB, 0, -1, {0, 3});
  add_region(t, 8 * kMiB, 1, 2, {1});
  Analysis a = analyze(t);
  SimEvents ev;
  const SimResult s = simulate(a, Plan{}, 12 * kMiB, &ev);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_DOUBLE_EQ(ev.launches[1].end_us, 120.0);
  EXPECT_DOUBLE_EQ(ev.launches[3].start_us, 130.0);
  EXPECT_DOUBLE_EQ(s.step_time_us, 140.0);
  EXPECT_GE(s.step_time_us, lower_bound(a, 12 * kMiB).bound_us);
}

// 100 regions allocated and written one per launch, room for four: every allocation from the
// fifth on evicts the least recently used region (past the first 64 demand evictions, through the
// heap rather than a scan), so the four read again at the end are all still resident.
TEST(SimulatorTest, DemandEvictionsTakeTheLeastRecentlyUsedRegionPastTheFirstSixtyFour) {
  Trace t = empty_trace(101, 10.0, 4.0 * kMiB / 25e-6);
  for (std::size_t i = 0; i < 100; ++i) {
    const RegionId id = add_region(t, 4 * kMiB, i, -1, {i});
    if (i >= 96) t.launches[100].regions.push_back(id);
  }
  Analysis a = analyze(t);
  const SimResult s = simulate(a, Plan{}, 16 * kMiB);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.demand_evictions, 96u);
  EXPECT_EQ(s.demand_restores, 0u);
  EXPECT_EQ(s.access_violations, 0u);
}

TEST(SimulatorTest, SameDirectionCopiesSerialise) {
  Trace t = empty_trace(6, 10.0, 4.0 * kMiB / 10e-6);  // 10 us per 4 MiB
  RegionId x = add_region(t, 4 * kMiB, 0, -1, {0, 5});
  RegionId y = add_region(t, 4 * kMiB, 0, -1, {0, 5});
  Analysis a = analyze(t);
  Plan p;
  p.entries.push_back({x, EvictKind::kSwap, 0, kNoLaunch, 4, 5, 10.0});
  p.entries.push_back({y, EvictKind::kSwap, 0, kNoLaunch, 4, 5, 10.0});
  SimResult s = simulate(a, p, 1ull << 30);
  EXPECT_DOUBLE_EQ(s.d2h_busy_us, 20.0);
  EXPECT_DOUBLE_EQ(s.h2d_busy_us, 20.0);
  // Out: 10..20 and 20..30; in from launch 4 (40 us): 40..50 and 50..60, so launch 5 waits
  // from 50 to 60 for the second restore.
  EXPECT_DOUBLE_EQ(s.step_time_us, 70.0);
  EXPECT_DOUBLE_EQ(s.stall_us, 10.0);
}

// A planned eviction after a launch that does not touch the region still follows that launch: the
// library orders the copy-out after the work on the region's streams. W, read only at launch 3,
// is evicted after launch 0 (40 us long): its copy-out runs 40..50, not 0..10, and its restore,
// triggered at launch 2 (50..60), 50..60, so launch 3 does not wait.
TEST(SimulatorTest, AnEvictionAfterALaunchStartsWhenThatLaunchEnds) {
  Trace t = empty_trace(4, 10.0, 4.0 * kMiB / 10e-6);  // 10 us per 4 MiB
  t.launches[0].dur_us = 40.0;
  RegionId w = add_region(t, 4 * kMiB, 0, -1, {3});
  Analysis a = analyze(t);
  Plan p;
  p.entries.push_back({w, EvictKind::kSwap, 0, kNoLaunch, 2, 3, 10.0});
  SimEvents ev;
  SimResult s = simulate(a, p, 1ull << 30, &ev);
  ASSERT_EQ(ev.copies.size(), 2u);
  EXPECT_DOUBLE_EQ(ev.copies[0].start_us, 40.0);
  EXPECT_DOUBLE_EQ(ev.copies[1].start_us, 50.0);
  EXPECT_DOUBLE_EQ(s.step_time_us, 70.0);
  EXPECT_DOUBLE_EQ(s.stall_us, 0.0);
}

// The program's own copies over the link hold their direction's copy engine: two uploads on two
// streams take turns, an upload and a download do not, and an upload enqueued after a prefetch
// waits for it.
TEST(SimulatorTest, TheProgramsOwnCopiesShareTheCopyEngines) {
  Trace t = empty_trace(2, 10.0, 1e9);
  t.launches[1].stream = 1;
  t.launches[0].link = t.launches[1].link = CopyLink::kToDevice;
  EXPECT_DOUBLE_EQ(simulate(analyze(t), Plan{}, 1ull << 30).step_time_us, 20.0);
  t.launches[1].link = CopyLink::kToHost;
  EXPECT_DOUBLE_EQ(simulate(analyze(t), Plan{}, 1ull << 30).step_time_us, 10.0);
  t.launches[1].link = CopyLink::kNone;
  EXPECT_DOUBLE_EQ(simulate(analyze(t), Plan{}, 1ull << 30).step_time_us, 10.0);

  Trace u = empty_trace(6, 10.0, 4.0 * kMiB / 10e-6);  // 10 us per 4 MiB
  RegionId x = add_region(u, 4 * kMiB, 0, -1, {0, 5});
  RegionId y = add_region(u, 4 * kMiB, 0, -1, {0, 5});
  u.launches[4].link = CopyLink::kToDevice;
  Plan p;
  p.entries.push_back({x, EvictKind::kSwap, 0, kNoLaunch, 4, 5, 10.0});
  p.entries.push_back({y, EvictKind::kSwap, 0, kNoLaunch, 4, 5, 10.0});
  SimResult s = simulate(analyze(u), p, 1ull << 30);
  // The restores take the engine at 40..50 and 50..60 (launch 4 starts them before it is
  // enqueued); the upload then runs 60..70 and launch 5 70..80.
  EXPECT_DOUBLE_EQ(s.step_time_us, 80.0);
  EXPECT_DOUBLE_EQ(s.stall_us, 20.0);
}

TEST(SimulatorTest, RestoreBeforeSwapOutEndsCancelsTheEviction) {
  Trace t = empty_trace(3, 1.0, 4.0 * kMiB / 10e-6);
  RegionId x = add_region(t, 4 * kMiB, 0, -1, {0, 2});
  Analysis a = analyze(t);
  Plan p;
  p.entries.push_back({x, EvictKind::kSwap, 0, kNoLaunch, 1, 2, 10.0});
  SimResult s = simulate(a, p, 1ull << 30);
  EXPECT_EQ(s.swapped_in_bytes, 0u);  // the data never left the device
  EXPECT_DOUBLE_EQ(s.stall_us, 0.0);
}

// A prefetch with no room at its trigger takes the memory of a same-sized swap-out still in flight
// (a donor), as the library does: its copy starts when the donor's ends, not at a later launch.
TEST(SimulatorTest, APrefetchTakesTheMemoryOfASwapOutInFlight) {
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 25e-6);  // 25 us per 4 MiB
  RegionId x = add_region(t, 4 * kMiB, 0, 9, {0, 9});
  RegionId y = add_region(t, 4 * kMiB, 0, -1, {6});  // persistent, on the host between uses
  Analysis a = analyze(t);
  Plan p;
  p.entries.push_back({x, EvictKind::kSwap, 0, kNoLaunch, 8, 9, 25.0});
  p.entries.push_back({y, EvictKind::kSwap, 6, kNoLaunch, 2, 6, 25.0});  // a wrap
  SimEvents ev;
  SimResult s = simulate(a, p, 5 * kMiB, &ev);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.demand_evictions, 0u);
  EXPECT_LE(s.peak_resident_bytes, 5 * kMiB);
  // x leaves 10..35; y's prefetch (launch 2, at 20) takes x's memory: in 35..60, on time for
  // launch 6. y leaves 70..95; x's prefetch (launch 8) takes y's: in 95..120, launch 9 waits.
  EXPECT_EQ(s.donated_restores, 2u);
  EXPECT_EQ(s.lateness_us[1], 0.0);
  EXPECT_DOUBLE_EQ(s.lateness_us[0], 30.0);
  EXPECT_DOUBLE_EQ(s.step_time_us, 130.0);
  EXPECT_DOUBLE_EQ(s.stall_us, 30.0);
  ASSERT_EQ(ev.copies.size(), 4u);
  EXPECT_TRUE(ev.copies[1].to_device);
  EXPECT_DOUBLE_EQ(ev.copies[1].start_us, 35.0);
  EXPECT_DOUBLE_EQ(ev.copies[3].start_us, 95.0);
  // The memory curve never passes the budget: a donor's memory changes hands, it is not freed.
  std::int64_t resident = static_cast<std::int64_t>(ev.resident_at_start), peak = resident;
  for (const SimEvents::Memory& m : ev.memory) peak = std::max(peak, resident += m.device_delta);
  EXPECT_LE(peak, static_cast<std::int64_t>(5 * kMiB));
}

// A region whose copy-out a prefetch cancelled, then dropped after a 5 ms launch and freed while
// that launch still runs on the other stream, lends its memory to a restore only once the launch
// ends. Its release time was the cancelled copy-out's: the restore of region 3 started at 1.35
// ms, beside the 128 MiB the launch still used (192 MiB under a 129 MiB budget), and the step,
// 5.02 ms, was below the lower bound (7.57 ms).
TEST(SimulatorTest, ADroppedRegionLendsItsMemoryOnlyOnceItsLastReaderEnds) {
  Trace t = empty_trace(6, 10.0, 5e10);
  t.launches[2].dur_us = 5000.0;
  for (std::size_t i : {3, 4, 5}) t.launches[i].stream = 1;
  const RegionId small = add_region(t, 4096, 0, -1, {0, 2});
  const RegionId a = add_region(t, 64 * kMiB, 0, 3, {0, 2});
  t.regions.back().recompute = Recompute{10.0, {small}};
  add_region(t, 64 * kMiB, 2, 3, {2});
  const RegionId w = add_region(t, 64 * kMiB, 0, -1, {5});
  const Analysis an = analyze(t);
  Plan p;
  const double in_us = 64.0 * kMiB / 5e10 * 1e6;
  p.entries.push_back({a, EvictKind::kSwap, 0, kNoLaunch, 1, 2, in_us});  // cancelled: back at 2
  p.entries.push_back({a, EvictKind::kRecompute, 2, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  p.entries.push_back({w, EvictKind::kSwap, 5, kNoLaunch, 4, 5, in_us});  // a wrap
  const std::uint64_t budget = 129 * kMiB;
  SimEvents ev;
  const SimResult s = simulate(an, p, budget, &ev);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  for (const SimEvents::Copy& c : ev.copies) {
    if (c.to_device && c.region == an.index.at(w)) {
      EXPECT_GE(c.start_us, ev.launches[2].end_us);
    }
  }
  EXPECT_GE(s.step_time_us, lower_bound(an, budget).bound_us);
}

TEST(SimulatorTest, DemandEvictionIsLeastRecentlyUsed) {
  // At launch 2 one of `old` (used at 0) and `recent` (used at 1) must go; `recent` is needed
  // again at 3, so evicting it instead of `old` would cost a restore.
  Trace t = empty_trace(4, 10.0, 1e12);
  add_region(t, 4 * kMiB, 0, -1, {0});
  add_region(t, 4 * kMiB, 0, -1, {1, 3});
  add_region(t, 4 * kMiB, 2, -1, {2, 3});
  Analysis a = analyze(t);
  SimResult s = simulate(a, Plan{}, 8 * kMiB);
  ASSERT_TRUE(s.feasible);
  EXPECT_EQ(s.demand_evictions, 1u);
  EXPECT_LE(s.peak_resident_bytes, 8 * kMiB);
  EXPECT_EQ(s.swapped_out_bytes, 4 * kMiB);
  EXPECT_EQ(s.swapped_in_bytes, 0u);
}

// The program allocates before it launches: an allocation that fits the budget only in place of
// what its launch touches takes that memory, as the library does, and the launch brings it back
// on demand (every policy said "budget cannot be met" here, on a budget the analysis called
// possible).
TEST(SimulatorTest, AnAllocationMayTakeTheMemoryOfWhatItsLaunchTouches) {
  Trace t = empty_trace(3, 10.0, 1e9);
  add_region(t, 16 * kMiB, 0, -1, {0, 1});
  add_region(t, 64 * kMiB, 1, -1, {2});  // allocated before launch 1, used at 2
  Analysis a = analyze(t);
  const std::uint64_t budget = 70 * kMiB;
  ASSERT_TRUE(impossible_budget_reason(a, budget).empty());
  SimResult s = simulate(a, Plan{}, budget);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_GT(s.demand_evictions, 0u);
  EXPECT_LE(s.peak_resident_bytes, budget);
  EXPECT_GE(s.step_time_us, lower_bound(a, budget).bound_us);
}

TEST(SimulatorTest, RandomTracesKeepEveryInvariant) {
  std::mt19937_64 rng(20260521);
  int feasible = 0, total = 0, traffic_bound = 0, covering_bound = 0;
  for (int k = 0; k < 300; ++k) {
    Trace t = testing::random_trace(rng);
    Analysis a = analyze(t);
    if (a.peak_bytes <= a.max_working_set) continue;
    const std::uint64_t span = a.peak_bytes - a.max_working_set;
    const std::uint64_t budget = a.max_working_set + rng() % (span + 1);
    const LowerBound lb = lower_bound(a, budget);
    EXPECT_GE(lb.bound_us + 1e-6, lb.compute_us);
    if (lb.traffic_us > lb.compute_us) ++traffic_bound;
    if (lb.covering_us > std::max(lb.compute_us, lb.traffic_us)) ++covering_bound;
    for (PolicyKind p : kAllPolicies) {
      Plan plan = make_plan(p, a, budget);
      ASSERT_TRUE(plan.feasible) << policy_name(p) << " trace " << k;
      SimResult s = simulate(a, plan, budget);
      ++total;
      if (!s.feasible) continue;  // a recompute chain can legitimately need more than the budget
      ++feasible;
      EXPECT_LE(s.peak_resident_bytes, budget) << policy_name(p) << " trace " << k;
      EXPECT_EQ(s.access_violations, 0u) << policy_name(p) << " trace " << k;
      EXPECT_GE(s.step_time_us, lb.bound_us - 1e-6) << policy_name(p) << " trace " << k;
      EXPECT_GE(s.step_time_us, a.ideal_step_us - 1e-6);
    }
  }
  EXPECT_GT(total, 500);
  EXPECT_GE(feasible, total * 9 / 10);
  EXPECT_GT(traffic_bound, 20);  // the traffic part of the bound is exercised, not just compute
  std::printf("bound set by the whole-iteration traffic on %d traces\n", covering_bound);
  EXPECT_GT(covering_bound, 5);  // and so is the count over the whole iteration
}

// Any plan, not only the planners': `gswapctl simulate --plan` runs what a user hands it. Random
// entries (overlapping, wrapping, with triggers anywhere, recomputations of any recomputable
// region) never crash the simulator, keep it within the budget, and, when every access finds its
// data, never beat the lower bound; without recomputations every access finds its region
// resident.
// A recomputation whose chain of sources is longer than the simulator follows is an access
// violation of its own kind, which gswapctl names: regions 1..n each recomputed from the one
// before, all dropped after launch 0 and read by launch 2 through the last one.
TEST(SimulatorTest, AChainLongerThanTheSimulatorFollowsIsCountedApart) {
  for (std::size_t n : {static_cast<std::size_t>(kMaxRecomputeDepth),
                        static_cast<std::size_t>(kMaxRecomputeDepth) + 1}) {
    Trace t = empty_trace(3, 1.0, 1e9);
    const RegionId root = add_region(t, 2 * kMiB, 0, -1, {0, 1});
    RegionId prev = root;
    Plan p;
    for (std::size_t i = 1; i <= n; ++i) {
      const RegionId r = add_region(t, 2 * kMiB, 0, -1, {0});
      t.regions[r - 1].recompute = Recompute{1.0, {prev}};
      p.entries.push_back({r, EvictKind::kRecompute, 0, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
      prev = r;
    }
    t.launches[2].regions.push_back(prev);
    const Analysis a = analyze(t);
    const SimResult s = simulate(a, p, a.peak_bytes);
    ASSERT_TRUE(s.feasible);
    const std::size_t deep = n > static_cast<std::size_t>(kMaxRecomputeDepth) ? 1 : 0;
    EXPECT_EQ(s.too_deep_recomputations, deep) << n;
    EXPECT_EQ(s.access_violations, deep) << n;
  }
}

TEST(SimulatorTest, RandomPlansKeepEveryInvariantAndTheBound) {
  std::mt19937_64 rng(20261126);
  int runs = 0, invalid = 0;
  for (int k = 0; k < 300; ++k) {
    Trace t = testing::random_trace(rng);
    Analysis a = analyze(t);
    if (a.peak_bytes <= a.max_working_set) continue;
    const std::uint64_t budget = a.max_working_set + rng() % (a.peak_bytes - a.max_working_set + 1);
    const LowerBound lb = lower_bound(a, budget);
    for (int p = 0; p < 4; ++p) {
      const Plan plan = testing::random_plan(rng, t);
      const bool recomputes =
          std::any_of(plan.entries.begin(), plan.entries.end(),
                      [](const PlanEntry& e) { return e.kind == EvictKind::kRecompute; });
      SimResult s = simulate(a, plan, budget);
      ++runs;
      if (!s.feasible) continue;
      EXPECT_LE(s.peak_resident_bytes, budget) << "trace " << k << " plan " << p;
      // Only a recomputation from a region already freed leaves an access without its data (the
      // plan is not valid; `simulate --plan` refuses it).
      if (!recomputes) {
        EXPECT_EQ(s.access_violations, 0u) << "trace " << k << " plan " << p;
      }
      invalid += s.access_violations > 0;
      EXPECT_TRUE(std::isfinite(s.step_time_us));
      // The bound holds for every run that reads only data it has: a region dropped where it
      // cannot be recomputed never leaves in a valid run (README "Recomputation needs its
      // sources"), while an invalid one may run faster.
      if (s.access_violations == 0) {
        EXPECT_GE(s.step_time_us, lb.bound_us - 1e-6) << "trace " << k << " plan " << p;
      }
    }
  }
  EXPECT_GT(runs, 500);
  EXPECT_GT(invalid, 0);  // the random plans do reach that case
}

// Y, the next instance of X, has no recompute spec: a "recompute" entry on it after its last use
// is a swap (there is nothing to recompute it from), so X starts the next iteration on the host,
// not dropped and recomputed at its read at 3 from G, freed after launch 1.
TEST(SimulatorTest, ADropForGoodOfARegionWithNoRecomputeSpecIsASwap) {
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 25e-6);
  for (Launch& l : t.launches) l.seq += 100;
  const RegionId g = add_region(t, 4 * kMiB, 0, 1, {0});
  const RegionId x = add_region(t, 2 * kMiB, 91, 103, {3});
  const RegionId y = add_region(t, 2 * kMiB, 101, 113, {1});
  t.regions[x - 1].recompute = Recompute{5.0, {g}};
  Analysis a = analyze(t);
  ASSERT_EQ(a.next_instance[a.index.at(x)], a.index.at(y));
  Plan plan;
  plan.entries.push_back({y, EvictKind::kRecompute, 1, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  const SimResult s = simulate(a, plan, 1ull << 30);
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_EQ(s.recompute_us, 0.0);
  EXPECT_EQ(s.demand_restores, 1u);  // X, restored at its read
}

// The same with regions cut in two by the iteration's start, where a plan that evicts or drops
// the next instance for good decides how the carried-over one starts: every policy, the search
// and random plans (half their entries on the last six regions, the pairs' among them) never
// beat the lower bound in a valid run, and the planners' and the search's plans are all valid.
// (Several kinds of run did before, each with its own test here or in lower_bound_test.cpp: a drop
// whose next iteration could not recompute it, restored from a copy never made; an eviction after
// the free at the last launch, counted as having left; a copy-out dated before the recomputation
// that wrote the region; a region recomputed early, as a source of another, while the bound took it
// for swapped.)
TEST(SimulatorTest, RandomTracesAcrossTheStartKeepTheBound) {
  std::mt19937_64 rng(20261127);
  int runs = 0, paired = 0;
  for (int k = 0; k < 2000; ++k) {
    Trace t = testing::random_trace_across_start(rng);
    Analysis a = analyze(t);
    for (std::size_t r = 0; r < t.regions.size(); ++r) paired += a.next_instance[r] != kNoRegion;
    if (a.peak_bytes <= a.max_working_set) continue;
    const std::uint64_t budget = a.max_working_set + rng() % (a.peak_bytes - a.max_working_set + 1);
    const LowerBound lb = lower_bound(a, budget);
    auto check = [&](const SimResult& s, const std::string& what) {
      ++runs;
      if (!s.feasible || s.access_violations) return;
      EXPECT_GE(s.step_time_us, lb.bound_us - 1e-6) << what << " trace " << k;
    };
    // The planners' own plans never read what they dropped (make_recomputations_executable).
    for (PolicyKind p : kAllPolicies) {
      const SimResult s = simulate(a, make_plan(p, a, budget), budget);
      EXPECT_EQ(s.access_violations, 0u) << policy_name(p) << " trace " << k;
      check(s, policy_name(p));
    }
    SearchOptions o;
    o.max_evaluations = 200;
    o.seed = static_cast<std::uint64_t>(k);
    const SimResult searched = search_plan(a, budget, o).sim;
    EXPECT_EQ(searched.access_violations, 0u) << "search trace " << k;
    check(searched, "search");
    for (int p = 0; p < 12; ++p) {
      const Plan plan = testing::random_plan(rng, t, 6);  // half on the last six regions
      check(simulate(a, plan, budget), "random plan " + std::to_string(p));
    }
  }
  EXPECT_GT(runs, 3000);
  EXPECT_GT(paired, 300);  // the regions across the start are paired, as the generator means
}

}  // namespace
}  // namespace gswap::policy
