// capuchin_test.cpp: Capuchin arithmetic and decisions on hand-built traces whose optimal plan is
// known: FT and the in-trigger, the hidden swap, Algorithm 2 source substitution, and the 5%
// feedback rule.
#include "policy/capuchin.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>

#include "policy/baselines.h"
#include "policy/corpus.h"
#include "policy/reference_traces.h"
#include "policy/simulator.h"
#include "policy/test_traces.h"

namespace gswap::policy {
namespace {

using testing::add_region;
using testing::empty_trace;
using testing::kMiB;

// 10 launches of 10 us; a 4 MiB region X used at launches 1 and 8; a 8 MiB region Y live over
// launches 3..6. The link moves 4 MiB in exactly 10 us.
struct SwapFixture {
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 10e-6);
  RegionId x, y;
  SwapFixture() {
    x = add_region(t, 4 * kMiB, 0, -1, {1, 8});
    y = add_region(t, 8 * kMiB, 3, 6, {3, 4, 5, 6});
  }
};

// Where regions allocated before their first use leave too little room, the plan says so, and
// the simulator evicts on demand what the plan could not.
// A cancelled planner stops choosing evictions and says so, with no entries (gswapd drops the
// job of a client that left; a wide iteration takes seconds to plan).
TEST(CapuchinTest, ACancelledPlannerStopsAndSaysSo) {
  const Trace t = make_unet(2);
  const Analysis a = analyze(t);
  std::atomic<bool> cancel{true};
  CapuchinOptions o;
  o.cancel = &cancel;
  const Plan p = plan_capuchin(a, a.peak_bytes / 2, o);
  EXPECT_FALSE(p.feasible);
  EXPECT_TRUE(p.entries.empty());
  EXPECT_EQ(p.reason, "planning cancelled");
  cancel = false;
  const Plan q = plan_capuchin(a, a.peak_bytes / 2, o);
  EXPECT_TRUE(q.feasible);
  EXPECT_FALSE(q.entries.empty());
}

// A region read by every GEMM (the cuBLAS workspace) offers a gap between each two of them, far
// shorter than its copies: the greedy plan swapped it there 241 times and ran behind no plan at
// all. Such swaps are left to repair.
TEST(CapuchinTest, ARegionReadOftenIsNotSwappedBetweenReadsTooCloseForItsCopies) {
  TransformerConfig c;
  c.layers = 48, c.hidden = 512, c.heads = 8, c.seq = 256, c.batch = 8, c.vocab = 32000;
  const Trace t = make_transformer(c);
  const Analysis a = analyze(t);
  const std::uint64_t budget = a.peak_bytes * 30 / 100;
  const Plan p = plan_capuchin(a, budget);
  ASSERT_TRUE(p.fits) << p.reason;
  const SimResult s = simulate(a, p, budget);
  EXPECT_EQ(s.demand_evictions, 0u);
  EXPECT_LT(s.step_time_us, simulate(a, Plan{}, budget).step_time_us);
  EXPECT_LT(s.step_time_us, simulate(a, plan_belady(a, budget), budget).step_time_us);
}

TEST(CapuchinTest, ABudgetBelowWhatNoPlanCanEvictIsReported) {
  Trace t = empty_trace(5, 10.0, 1e9);
  add_region(t, 4 * kMiB, 0, -1, {0, 4});
  add_region(t, 4 * kMiB, 1, 3, {3});  // allocated before launch 1, first used at 3
  add_region(t, 3 * kMiB, 1, 2, {1, 2});
  Analysis a = analyze(t);
  const std::uint64_t budget = 6 * kMiB;  // launches 1 and 2 need 3 + 4 MiB
  const Plan p = plan_capuchin(a, budget);
  ASSERT_TRUE(p.feasible);
  EXPECT_FALSE(p.fits);
  EXPECT_EQ(p.reason, unplannable_budget_reason(a, budget));
  const SimResult s = simulate(a, p, budget);
  EXPECT_GT(s.demand_evictions, 0u);
  const Plan q = plan_capuchin(a, 7 * kMiB);
  EXPECT_TRUE(q.fits) << q.reason;
  EXPECT_EQ(simulate(a, q, 7 * kMiB).demand_evictions, 0u);
}

// A region carried over that the iteration never touches stays on the host under pressure: it
// costs neither memory nor copies, so the plan fits without moving anything else.
TEST(CapuchinTest, ARegionTheIterationNeverTouchesStaysOnTheHost) {
  Trace t = empty_trace(4, 10.0, 1e9);
  add_region(t, 4 * kMiB, 0, -1, {0, 1, 2, 3});
  add_region(t, 8 * kMiB, 0, -1, {});  // allocated long ago, not used in the iteration
  add_region(t, 4 * kMiB, 1, 2, {1, 2});
  Analysis a = analyze(t);
  EXPECT_TRUE(a.idle(1));
  const std::uint64_t budget = 8 * kMiB;  // the peak is 16 MiB
  const Plan p = plan_capuchin(a, budget);
  EXPECT_TRUE(p.fits) << p.reason;
  EXPECT_TRUE(p.entries.empty());
  const SimResult s = simulate(a, p, budget);
  EXPECT_EQ(s.demand_evictions, 0u);
  EXPECT_EQ(s.swapped_out_bytes, 0u);
  EXPECT_DOUBLE_EQ(s.step_time_us, a.ideal_step_us);
  // At the peak nothing is under pressure: it stays where it is, resident.
  EXPECT_EQ(simulate(a, Plan{}, a.peak_bytes).peak_resident_bytes, 16 * kMiB);
}

// Not idle: a carried-over region the iteration frees without touching (a buffer allocated late
// in the previous iteration is resident until its free), and one under min_evictable_bytes.
TEST(CapuchinTest, RegionsFreedOrTooSmallToEvictAreNotIdle) {
  Trace t = empty_trace(4, 10.0, 1e9);
  add_region(t, 4 * kMiB, 0, -1, {0, 1, 2, 3});
  add_region(t, 4 * kMiB, 0, 1, {});   // freed after launch 1, never touched
  add_region(t, 1 * kMiB, 0, -1, {});  // under the 2 MiB default
  Analysis a = analyze(t);
  EXPECT_FALSE(a.idle(1));
  EXPECT_FALSE(a.idle(2));
  // No entry can move the freed one: beside the 4 MiB working set and the small region, a
  // budget of 8 MiB leaves no plan that fits.
  EXPECT_EQ(a.unplannable[0], 4 * kMiB);
  EXPECT_FALSE(plan_capuchin(a, 8 * kMiB).fits);
}

TEST(CapuchinTest, FreeTimeAndInTrigger) {
  SwapFixture f;
  Analysis a = analyze(f.t);
  SwapTiming s = swap_timing(a, 4 * kMiB, 1, 8);
  EXPECT_DOUBLE_EQ(s.swap_out_us, 10.0);
  EXPECT_DOUBLE_EQ(s.swap_in_us, 10.0);
  EXPECT_DOUBLE_EQ(s.swap_out_end_us, 30.0);   // t_e = end of launch 1 = 20
  EXPECT_DOUBLE_EQ(s.swap_in_start_us, 70.0);  // t_b = start of launch 8 = 80
  EXPECT_DOUBLE_EQ(s.free_time_us, 40.0);
  EXPECT_EQ(s.in_trigger, 7u);  // the latest launch starting no later than 70 us
}

TEST(CapuchinTest, HiddenSwapIsTheOptimalPlan) {
  SwapFixture f;
  Analysis a = analyze(f.t);
  const std::uint64_t budget = 8 * kMiB;  // X + Y = 12 MiB at the peak: X must leave
  Plan p = plan_capuchin(a, budget);
  ASSERT_TRUE(p.feasible);
  ASSERT_EQ(p.entries.size(), 1u);
  const PlanEntry& e = p.entries[0];
  EXPECT_EQ(e.region, f.x);
  EXPECT_EQ(e.kind, EvictKind::kSwap);
  EXPECT_EQ(e.evict_after, 1u);
  EXPECT_EQ(e.trigger, 7u);
  EXPECT_EQ(e.back_access, 8u);
  SimResult s = simulate(a, p, budget);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_DOUBLE_EQ(s.step_time_us, 100.0);  // fully hidden: the ideal step
  EXPECT_DOUBLE_EQ(s.stall_us, 0.0);
  EXPECT_LE(s.peak_resident_bytes, budget);
  EXPECT_EQ(s.swapped_out_bytes, 4 * kMiB);
  EXPECT_EQ(s.lateness_us[0], 0.0);
  // On demand (LRU) the same budget stalls on the restore.
  SimResult lru = simulate(a, plan_lru(a, budget), budget);
  EXPECT_GT(lru.step_time_us, s.step_time_us);
}

TEST(CapuchinTest, PeakWindowPushesTriggerLater) {
  // Y now lives until launch 7, so restoring X at launch 7 would exceed the budget: the trigger
  // must move to 8 (on demand) and the swap is exposed.
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 10e-6);
  RegionId x = add_region(t, 4 * kMiB, 0, -1, {1, 8});
  add_region(t, 8 * kMiB, 3, 7, {3, 4, 5, 6, 7});
  Analysis a = analyze(t);
  Plan p = plan_capuchin(a, 8 * kMiB);
  ASSERT_EQ(p.entries.size(), 1u);
  EXPECT_EQ(p.entries[0].region, x);
  EXPECT_EQ(p.entries[0].trigger, 8u);
  SimResult s = simulate(a, p, 8 * kMiB);
  EXPECT_LE(s.peak_resident_bytes, 8 * kMiB);
  EXPECT_DOUBLE_EQ(s.stall_us, 10.0);  // the whole swap-in
}

// S (persistent) -> R1 (cost 5) -> R2 (cost 7); R2 is read again at 9, R1 at 10. A filler F
// forces both out over launches 4..7.
struct ChainFixture {
  Trace t = empty_trace(12, 10.0, 1e6);  // a slow link: swapping never pays
  RegionId s, r1, r2;
  ChainFixture() {
    s = add_region(t, 4 * kMiB, 0, -1, {0, 11});
    r1 = add_region(t, 4 * kMiB, 1, 10, {1, 2, 10});
    r2 = add_region(t, 4 * kMiB, 2, 9, {2, 9});
    add_region(t, 8 * kMiB, 4, 7, {4, 5, 6, 7});
    t.regions[r1 - 1].recompute = Recompute{5.0, {s}};
    t.regions[r2 - 1].recompute = Recompute{7.0, {r1}};
  }
};

TEST(CapuchinTest, Algorithm2SubstitutesDroppedSources) {
  ChainFixture f;
  Analysis a = analyze(f.t);
  const std::uint64_t budget = 12 * kMiB;  // peak S+R1+R2+F = 20 MiB
  Plan p = plan_capuchin(a, budget);
  ASSERT_EQ(p.entries.size(), 2u);
  for (const PlanEntry& e : p.entries) EXPECT_EQ(e.kind, EvictKind::kRecompute);
  SimResult s = simulate(a, p, budget);
  ASSERT_TRUE(s.feasible) << s.reason;
  // R2's recomputation at launch 9 finds R1 dropped and recomputes it first (R1 is then kept
  // for its own access at 10): 7 + 5 us, not 7 + 5 + 5.
  EXPECT_DOUBLE_EQ(s.recompute_us, 12.0);
  EXPECT_EQ(s.recomputed_bytes, 8 * kMiB);
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_LE(s.peak_resident_bytes, budget);
  EXPECT_EQ(s.swapped_out_bytes, 0u);
}

// R (64 MiB, recomputable for free from S) is read at launches 1 and 3; S (187 MiB, carried over)
// only at launch 4. At 226 MiB nothing fits beside S and R together, and recomputing R at launch
// 3 needs S there beside it: the simulator cannot make room without evicting the source. The
// planner must not choose it (it did, and the plan could not run where LRU's runs).
TEST(CapuchinTest, ARecomputationWhoseSourcesCannotFitBesideItIsNotChosen) {
  Trace t = empty_trace(5, 10.0, 50e9);
  const RegionId s = add_region(t, 187 * kMiB, 0, -1, {4});
  add_region(t, 64 * kMiB, 1, -1, {1, 3});
  t.regions.back().recompute = Recompute{0.0, {s}};
  Analysis a = analyze(t);
  const std::uint64_t budget = 226 * kMiB;
  const Plan p = plan_capuchin(a, budget);
  for (const PlanEntry& e : p.entries) EXPECT_NE(e.kind, EvictKind::kRecompute);
  const SimResult sim = simulate(a, p, budget);
  EXPECT_TRUE(sim.feasible) << sim.reason;
  ASSERT_TRUE(simulate(a, plan_lru(a, budget), budget).feasible);
  // With room for both, the free recomputation is still the plan.
  const std::uint64_t roomy = 251 * kMiB + kMiB / 2;
  Trace u = t;
  add_region(u, 8 * kMiB, 2, 2, {2});  // a peak of 259 MiB at launch 2
  Analysis b = analyze(u);
  const Plan q = plan_capuchin(b, roomy);
  ASSERT_EQ(q.entries.size(), 1u);
  EXPECT_EQ(q.entries[0].kind, EvictKind::kRecompute);
  EXPECT_TRUE(simulate(b, q, roomy).feasible);
}

// The planner's plan at `fraction` of the peak says it fits, and the simulator runs it so: no
// demand eviction, no access to an absent region, never above the budget.
void expect_fitting_plan_runs_as_planned(const Trace& t, double fraction) {
  Analysis an = analyze(t);
  const auto budget = static_cast<std::uint64_t>(static_cast<double>(an.peak_bytes) * fraction);
  Plan p = plan_capuchin(an, budget);
  ASSERT_TRUE(p.feasible);
  ASSERT_TRUE(p.fits) << p.reason;
  SimResult s = simulate(an, p, budget);
  ASSERT_TRUE(s.feasible) << s.reason;
  EXPECT_EQ(s.demand_evictions, 0u);
  EXPECT_EQ(s.access_violations, 0u);
  EXPECT_LE(s.peak_resident_bytes, budget);
}

// A three-link chain (C from B from A) on three streams, where A is dropped after its last read
// and B is chosen after C: C's recomputation then recomputes B, and B's recomputes A, so A, B
// and C all exist at C's back-access. A plan the planner calls fitting must count them there
// (the simulator does, and without them it evicted on demand).
TEST(CapuchinTest, ChainIntermediatesOfADependentAreCounted) {
  Trace t;
  t.device = {80ull << 30, 1e9, 2e9};
  t.device.min_evictable_bytes = 0;
  const double dur[] = {93.13, 456.46, 13.47, 40.51, 331.40, 13.42};
  const std::uint32_t stream[] = {2, 0, 2, 1, 1, 1};
  for (std::size_t i = 0; i < 6; ++i)
    t.launches.push_back({i, 0, dur[i], stream[i], {}, "k" + std::to_string(i)});
  add_region(t, 24 * kMiB, 0, -1, {5});
  add_region(t, 52 * kMiB, 0, -1, {0});
  add_region(t, 44 * kMiB, 0, -1, {4});
  add_region(t, 40 * kMiB, 0, -1, {2});
  add_region(t, 138 * kMiB, 0, -1, {});
  add_region(t, 108 * kMiB, 0, -1, {5});
  const RegionId a = add_region(t, 198 * kMiB, 0, 4, {0});
  const RegionId b = add_region(t, 54 * kMiB, 1, 4, {1, 4});
  const RegionId c = add_region(t, 94 * kMiB, 1, 3, {1, 3});
  add_region(t, 90 * kMiB, 2, 2, {2});
  add_region(t, 160 * kMiB, 3, 3, {3});
  t.regions[a - 1].recompute = Recompute{376.89, {}};
  t.regions[b - 1].recompute = Recompute{228.36, {a}};
  t.regions[c - 1].recompute = Recompute{383.45, {b}};
  expect_fitting_plan_runs_as_planned(t, 0.7);
}

// B is recomputed from A, and C from B. C is chosen first (B is there at C's back-access), then
// A is swapped out across C's back-access, then B is dropped: C's recomputation would now
// recompute B from A while A is on the host. Dropping B must be refused there (the simulator
// restored A on demand and evicted other regions to make room).
TEST(CapuchinTest, ADependentsChainNeedsItsSourcesOnTheDevice) {
  Trace t;
  t.device = {80ull << 30, 50e9, 50e9};
  t.device.min_evictable_bytes = 0;
  const double dur[] = {428.32, 168.88, 416.04, 212.68, 248.26, 268.85, 486.16, 86.88};
  for (std::size_t i = 0; i < 8; ++i)
    t.launches.push_back({i, 0, dur[i], i < 3 ? 1u : 0u, {}, "k" + std::to_string(i)});
  add_region(t, 53540375, 0, -1, {0, 7});
  add_region(t, 61446224, 0, -1, {4});
  const RegionId a = add_region(t, 26120574, 0, 7, {0, 7});
  const RegionId b = add_region(t, 211016666, 1, 6, {1, 6});
  const RegionId c = add_region(t, 241024166, 1, 5, {1, 5});
  add_region(t, 134337558, 2, 4, {4});
  add_region(t, 261846350, 3, -1, {3});
  add_region(t, 65309189, 4, 7, {4});
  t.regions[b - 1].recompute = Recompute{467.11, {a}};
  t.regions[c - 1].recompute = Recompute{39.01, {b}};
  expect_fitting_plan_runs_as_planned(t, 0.7);
}

TEST(CapuchinTest, RecomputeOnlyRefusesSwaps) {
  SwapFixture f;  // X has no recompute information
  Analysis a = analyze(f.t);
  Plan p = plan_recompute_only(a, 8 * kMiB);
  EXPECT_TRUE(p.entries.empty());
  EXPECT_FALSE(p.reason.empty());
}

TEST(CapuchinTest, FeedbackMovesLateTriggersEarlierByFivePercent) {
  SwapFixture f;
  Analysis a = analyze(f.t);
  Plan p = plan_capuchin(a, 8 * kMiB);
  ASSERT_EQ(p.entries.size(), 1u);
  ASSERT_EQ(p.entries[0].trigger, 7u);
  std::vector<double> on_time = {0.0};
  EXPECT_EQ(apply_feedback(a, p, on_time).entries[0].trigger, 7u);
  // Late: start 5% of SwapTime (0.5 us) before launch 7's start of 70 us, i.e. at launch 6.
  std::vector<double> late = {3.0};
  Plan q = apply_feedback(a, p, late);
  EXPECT_EQ(q.entries[0].trigger, 6u);
  // Repeated feedback never moves a trigger before the eviction.
  for (int k = 0; k < 20; ++k) q = apply_feedback(a, q, late);
  EXPECT_EQ(q.entries[0].trigger, 2u);
  // Nor before an eviction issued later than right after its access (evict_at, DELTA's
  // on-demand releases): it stops at the launch where that eviction is issued.
  Plan r = p;
  p.entries[0].evict_at = 5;
  for (int k = 0; k < 20; ++k) p = apply_feedback(a, p, late);
  EXPECT_EQ(p.entries[0].trigger, 5u);
  // An evict_at outside the iteration is no eviction point: the simulator and gswapd evict right
  // after the access, and feedback may move the trigger up to it.
  r.entries[0].evict_at = 10;
  EXPECT_FALSE(evicts_at(r.entries[0], a.n));
  EXPECT_EQ(first_launch_evicted(r.entries[0], a.n), 2u);
  for (int k = 0; k < 20; ++k) r = apply_feedback(a, r, late);
  EXPECT_EQ(r.entries[0].trigger, 2u);
  Plan q5 = plan_capuchin(a, 8 * kMiB), q10 = q5;
  q10.entries[0].evict_at = 10;
  EXPECT_DOUBLE_EQ(simulate(a, q10, 8 * kMiB).step_time_us, simulate(a, q5, 8 * kMiB).step_time_us);
}

TEST(CapuchinTest, FeedbackRemovesLatenessTheSimulatorObserved) {
  // X's 25 us restore starts with launch 8 (80 us) but launch 9 wants it at 90 us: 15 us late.
  // Each round of feedback starts it at least 5% of SwapTime earlier, which here is one launch:
  // launch 7 is still 5 us late, launch 6 is on time.
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 25e-6);
  RegionId x = add_region(t, 4 * kMiB, 0, -1, {0, 9});
  Analysis a = analyze(t);
  Plan p;
  p.entries.push_back({x, EvictKind::kSwap, 0, kNoLaunch, 8, 9, 25.0});
  const std::uint64_t budget = 1ull << 30;
  SimResult s = simulate(a, p, budget);
  EXPECT_DOUBLE_EQ(s.lateness_us[0], 15.0);
  std::vector<double> seen;
  for (int round = 0; round < 5 && s.lateness_us[0] > 0; ++round) {
    seen.push_back(s.lateness_us[0]);
    p = apply_feedback(a, p, s.lateness_us);
    s = simulate(a, p, budget);
  }
  EXPECT_EQ(seen, (std::vector<double>{15.0, 5.0}));
  EXPECT_EQ(p.entries[0].trigger, 6u);
  EXPECT_EQ(s.lateness_us[0], 0.0);
  EXPECT_DOUBLE_EQ(s.step_time_us, 100.0);
}

// Two 4 MiB slots. X is out from launch 0 to its back-access at 9; Y is live over 2..8; Z is
// allocated at 6 and freed after 7. A prefetch of X started before Z's allocation takes the slot Z
// needs, and Z's allocation evicts it again on demand; from launch 6 on it is deferred until Z is
// freed. The link moves 4 MiB in 25 us, so X's restore is late wherever it starts.
struct CrowdedFixture {
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 25e-6);
  RegionId x, y, z;
  const std::uint64_t budget = 8 * kMiB;
  CrowdedFixture() {
    x = add_region(t, 4 * kMiB, 0, -1, {0, 9});
    y = add_region(t, 4 * kMiB, 2, 8, {2, 5, 8});
    z = add_region(t, 4 * kMiB, 6, 7, {6, 7});
  }
  Plan plan(std::size_t trigger) const {
    Plan p;
    p.entries.push_back({x, EvictKind::kSwap, 0, kNoLaunch, trigger, 9, 25.0});
    return p;
  }
};

TEST(CapuchinTest, CheckedFeedbackRefusesATriggerThatCrowdsOutAnAllocation) {
  CrowdedFixture f;
  Analysis a = analyze(f.t);
  const std::vector<double> late = {15.0};
  auto never = [] { return false; };
  // The plain rule moves the trigger from 6 to 5, before Z's allocation: a demand eviction.
  Plan moved = apply_feedback(a, f.plan(6), late);
  ASSERT_EQ(moved.entries[0].trigger, 5u);
  EXPECT_GT(simulate(a, moved, f.budget).demand_evictions,
            simulate(a, f.plan(6), f.budget).demand_evictions);
  CheckedFeedback c = apply_feedback_checked(a, f.plan(6), late, f.budget, never);
  EXPECT_EQ(c.plan.entries[0].trigger, 6u);
  EXPECT_EQ(c.moved, 0u);
  EXPECT_EQ(c.refused, 1u);
  ASSERT_EQ(c.refused_entry.size(), 1u);
  EXPECT_TRUE(c.refused_entry[0]);
  // From 8 to 7 costs nothing (the prefetch waits for Z's free either way): it moves.
  c = apply_feedback_checked(a, f.plan(8), late, f.budget, never);
  EXPECT_EQ(c.plan.entries[0].trigger, 7u);
  EXPECT_EQ(c.moved, 1u);
  EXPECT_EQ(c.refused, 0u);
  // With room for everything the earlier prefetch is faster, and the rule applies as it is.
  c = apply_feedback_checked(a, f.plan(6), late, 1ull << 30, never);
  EXPECT_EQ(c.plan.entries[0].trigger, 5u);
  // On time: nothing moves and nothing is refused.
  c = apply_feedback_checked(a, f.plan(6), std::vector<double>{0.0}, f.budget, never);
  EXPECT_EQ(c.moved + c.refused, 0u);
}

TEST(CapuchinTest, CheckedFeedbackTriesEntriesOneByOneWhileTimeLasts) {
  // Two late entries: X's move crowds out Z (refused), W's costs nothing (moved). Out of time
  // before the one-by-one pass, neither is moved nor refused.
  CrowdedFixture f;
  RegionId w = add_region(f.t, 2 * kMiB, 0, -1, {0, 9});
  Analysis a = analyze(f.t);
  Plan p = f.plan(6);
  p.entries.push_back({w, EvictKind::kSwap, 0, kNoLaunch, 8, 9, 12.5});
  const std::vector<double> late = {15.0, 2.5};
  const std::uint64_t budget = 10 * kMiB;
  ASSERT_GT(simulate(a, apply_feedback(a, p, late), budget).demand_evictions,
            simulate(a, p, budget).demand_evictions);
  CheckedFeedback c = apply_feedback_checked(a, p, late, budget, [] { return false; });
  EXPECT_EQ(c.plan.entries[0].trigger, 6u);
  EXPECT_LT(c.plan.entries[1].trigger, 8u);
  EXPECT_EQ(c.moved, 1u);
  EXPECT_EQ(c.refused, 1u);
  c = apply_feedback_checked(a, p, late, budget, [] { return true; });
  EXPECT_EQ(c.moved + c.refused, 0u);
  EXPECT_EQ(c.plan.entries[1].trigger, 8u);
}

// Region B is recomputable from two idle regions (no launch touches them), which stay on the host
// below the peak. The planner dropped B and recomputed it from them, calling the plan fitting;
// the simulator had to bring them back on demand, with a demand eviction, at 6.3 times the
// bound. It now swaps B instead: the plan fits and runs as planned.
TEST(CapuchinTest, RecomputesFromNoRegionParkedOnTheHost) {
  Trace t = empty_trace(5, 10.0, 1e9);
  t.device.d2h_bytes_per_s = 2e9;
  const double durs[] = {79.842, 1471.453, 0.0, 822.161, 132.824};
  for (std::size_t i = 0; i < 5; ++i) t.launches[i].dur_us = durs[i];
  add_region(t, 64 * kMiB, 0, -1, {1});
  add_region(t, 64 * kMiB, 0, -1, {0, 3});  // B
  add_region(t, 32 * kMiB, 0, -1, {2});
  const RegionId idle32 = add_region(t, 32 * kMiB, 0, -1, {});
  add_region(t, 64 * kMiB, 0, -1, {4});
  const RegionId idle64 = add_region(t, 64 * kMiB, 0, -1, {});
  t.regions[1].recompute = Recompute{157.88, {idle64, idle32}};
  const Analysis a = analyze(t);
  const std::uint64_t budget = 192 * kMiB;
  ASSERT_TRUE(a.parked(a.index.at(idle64), budget));
  const Plan p = plan_capuchin(a, budget);
  ASSERT_TRUE(p.fits) << p.reason;
  for (const PlanEntry& e : p.entries) EXPECT_NE(e.kind, EvictKind::kRecompute);
  const SimResult s = simulate(a, p, budget);
  EXPECT_EQ(s.demand_evictions, 0u);
  EXPECT_EQ(s.access_violations, 0u);
}

// A and B are each recomputable from the other. The planner dropped both; the check that keeps
// recomputations executable made A's drop a swap (its recomputation would read B, dropped and
// recomputed from A: a cycle), but B, recomputed at launch 2 from A, then needed A back from the
// host, in memory the plan did not count: a demand eviction in a plan said to fit. Such a plan
// is no fit now, and the planner falls back to swapping alone, which fits.
TEST(CapuchinTest, ARecomputationFromARegionTheCheckSwappedIsNoFit) {
  Trace t = empty_trace(5, 0.0, 1e9);
  t.device.d2h_bytes_per_s = 2e9;
  t.device.min_evictable_bytes = 64 * kMiB;
  t.launches[1].dur_us = 1224.833;
  t.launches[3].dur_us = 8.083;
  const RegionId a = add_region(t, 128 * kMiB, 0, -1, {1, 4});
  const RegionId b = add_region(t, 128 * kMiB, 0, -1, {0, 2});
  t.regions[0].recompute = Recompute{27.755, {b}};
  t.regions[1].recompute = Recompute{0.0, {a}};
  add_region(t, 128 * kMiB, 1, 3, {});
  add_region(t, 64 * kMiB, 1, -1, {1, 3});
  const Analysis an = analyze(t);
  const std::uint64_t budget = 459'014'144;
  const Plan p = plan_capuchin(an, budget);
  ASSERT_TRUE(p.feasible) << p.reason;
  const SimResult s = simulate(an, p, budget);
  EXPECT_TRUE(p.fits) << p.reason;
  EXPECT_EQ(s.demand_evictions, 0u);
  EXPECT_EQ(s.access_violations, 0u);
}

// W (2 MiB) lives throughout, read at launches 0 and 2; O (4 MiB), allocated before launch 1 and
// never freed (memory a first step allocates once), is read only there. Under 5 MiB, W must be off
// at launch 1 and O at launch 2: O leaves after its use, with nothing bringing it back, its copy
// kept on the host (not dropped, even where it is recomputable: a later iteration may read it).
// The planners had no candidate for O and evicted it on demand.
TEST(CapuchinTest, ARegionAllocatedOnceLeavesAfterItsLastUse) {
  for (bool recomputable : {false, true}) {
    Trace t = empty_trace(3, 10.0, 1e9);
    const RegionId w = add_region(t, 2 * kMiB, 0, -1, {0, 2});
    const RegionId o = add_region(t, 4 * kMiB, 1, -1, {1});
    if (recomputable) t.regions[o - 1].recompute = Recompute{5.0, {w}};
    const Analysis a = analyze(t);
    ASSERT_TRUE(a.has_tail(a.index.at(o)));
    const Plan p = plan_capuchin(a, 5 * kMiB);
    EXPECT_TRUE(p.fits) << p.reason;
    const auto it = std::find_if(p.entries.begin(), p.entries.end(),
                                 [&](const PlanEntry& e) { return e.region == o; });
    ASSERT_NE(it, p.entries.end());
    EXPECT_EQ(it->kind, EvictKind::kSwap);
    EXPECT_EQ(it->evict_after, 1u);
    EXPECT_EQ(it->back_access, kNoLaunch);
    const SimResult s = simulate(a, p, 5 * kMiB);
    EXPECT_EQ(s.demand_evictions, 0u);
    EXPECT_EQ(s.access_violations, 0u);
  }
}

TEST(CapuchinTest, ImpossibleBudgetIsReported) {
  SwapFixture f;
  Analysis a = analyze(f.t);
  Plan p = plan_capuchin(a, 6 * kMiB);  // launch 3 touches Y, 8 MiB
  EXPECT_FALSE(p.feasible);
  EXPECT_NE(p.reason.find("launch 3"), std::string::npos) << p.reason;
  SimResult s = simulate(a, p, 6 * kMiB);
  EXPECT_FALSE(s.feasible);
}

// The planner's curve is in signed bytes: a budget of 2^63 bytes or more must fit everything,
// not wrap negative and evict every region.
TEST(CapuchinTest, ABudgetOfTwoToTheSixtyThreeBytesOrMoreEvictsNothing) {
  SwapFixture f;
  Analysis a = analyze(f.t);
  for (std::uint64_t budget : {std::uint64_t{1} << 63, ~std::uint64_t{0}}) {
    for (bool recompute : {true, false}) {
      const Plan p = plan_capuchin(a, budget, {.allow_swap = true, .allow_recompute = recompute});
      EXPECT_TRUE(p.feasible && p.fits) << budget << ": " << p.reason;
      EXPECT_TRUE(p.entries.empty()) << budget;
    }
  }
}

}  // namespace
}  // namespace gswap::policy
