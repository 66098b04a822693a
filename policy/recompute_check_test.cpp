// recompute_check_test.cpp: drops whose recomputation could not run become swaps, and plans then
// run with no access violation.
#include "policy/recompute_check.h"

#include <random>

#include <gtest/gtest.h>

#include "policy/simulator.h"
#include "policy/test_traces.h"

namespace gswap::policy {
namespace {

using testing::add_region;
using testing::empty_trace;
using testing::kMiB;

constexpr std::uint64_t kBudget = 1ull << 30;

// S, recomputable from G (allocated at launch 3), is dropped after 0 and read again at 4, where G
// exists. D, recomputable from S, is dropped after 0 and read at 2: D's recomputation needs S
// there, before G exists. S's drop becomes a swap; D's stays.
TEST(RecomputeCheckTest, ADependentsRecomputationInsideItsSourcesDropMakesThatDropASwap) {
  Trace t = empty_trace(6, 10.0, 4.0 * kMiB / 25e-6);
  const RegionId g = add_region(t, 4 * kMiB, 3, -1, {3});
  const RegionId s = add_region(t, 4 * kMiB, 0, -1, {0, 4});
  const RegionId d = add_region(t, 4 * kMiB, 0, -1, {0, 2});
  t.regions[s - 1].recompute = Recompute{5.0, {g}};
  t.regions[d - 1].recompute = Recompute{5.0, {s}};
  Analysis a = analyze(t);
  Plan plan;
  plan.entries.push_back({s, EvictKind::kRecompute, 0, kNoLaunch, 4, 4, 0.0});
  plan.entries.push_back({d, EvictKind::kRecompute, 0, kNoLaunch, 2, 2, 0.0});
  ASSERT_GT(simulate(a, plan, kBudget).access_violations, 0u);

  EXPECT_EQ(make_recomputations_executable(a, plan), 1u);
  EXPECT_EQ(plan.entries[0].kind, EvictKind::kSwap);
  EXPECT_DOUBLE_EQ(plan.entries[0].swap_in_us, 25.0);
  EXPECT_EQ(plan.entries[1].kind, EvictKind::kRecompute);
  const SimResult r = simulate(a, plan, kBudget);
  EXPECT_EQ(r.access_violations, 0u);
  EXPECT_EQ(r.swapped_out_bytes, 4 * kMiB);
  EXPECT_EQ(make_recomputations_executable(a, plan), 0u);  // nothing left to change
}

// S's source is freed after launch 1, before S is read again at 4: S cannot be recomputed there.
TEST(RecomputeCheckTest, ADropWhoseSourceIsGoneAtItsNextAccessBecomesASwap) {
  Trace t = empty_trace(6, 10.0, 4.0 * kMiB / 25e-6);
  const RegionId g = add_region(t, 4 * kMiB, 0, 1, {0});
  const RegionId s = add_region(t, 4 * kMiB, 0, -1, {0, 4});
  t.regions[s - 1].recompute = Recompute{5.0, {g}};
  Analysis a = analyze(t);
  Plan plan;
  // The back-access named wrong: the simulator recomputes at the next access, 4, all the same.
  plan.entries.push_back({s, EvictKind::kRecompute, 0, kNoLaunch, 1, 1, 0.0});
  ASSERT_GT(simulate(a, plan, kBudget).access_violations, 0u);
  EXPECT_EQ(make_recomputations_executable(a, plan), 1u);
  EXPECT_EQ(plan.entries[0].kind, EvictKind::kSwap);
  EXPECT_EQ(simulate(a, plan, kBudget).access_violations, 0u);
}

// A and B are each recomputed from the other, both dropped over launch 3: one keeps a copy.
TEST(RecomputeCheckTest, ACycleOfDropsKeepsOneCopy) {
  Trace t = empty_trace(5, 10.0, 4.0 * kMiB / 25e-6);
  const RegionId x = add_region(t, 4 * kMiB, 0, -1, {0, 3});
  const RegionId y = add_region(t, 4 * kMiB, 0, -1, {0, 3});
  t.regions[x - 1].recompute = Recompute{5.0, {y}};
  t.regions[y - 1].recompute = Recompute{5.0, {x}};
  Analysis a = analyze(t);
  Plan plan;
  plan.entries.push_back({x, EvictKind::kRecompute, 0, kNoLaunch, 3, 3, 0.0});
  plan.entries.push_back({y, EvictKind::kRecompute, 0, kNoLaunch, 3, 3, 0.0});
  ASSERT_GT(simulate(a, plan, kBudget).access_violations, 0u);
  EXPECT_EQ(make_recomputations_executable(a, plan), 1u);
  EXPECT_EQ(simulate(a, plan, kBudget).access_violations, 0u);
}

// Y, dropped for good after its write, is the next iteration's X: the iteration starts with X
// dropped, recomputed from S at its read at 3. S is dropped after 0 for its read at 6, where its
// source Q (allocated at 5) exists, but at 3 Q does not: S's drop becomes a swap, and X is
// recomputed from S restored.
TEST(RecomputeCheckTest, TheNextIterationsFirstUseOfADropForGoodIsANeed) {
  Trace t = empty_trace(10, 10.0, 4.0 * kMiB / 25e-6);
  for (Launch& l : t.launches) l.seq += 100;
  const RegionId q = add_region(t, 4 * kMiB, 105, -1, {5});
  const RegionId s = add_region(t, 4 * kMiB, 0, -1, {0, 6});
  const RegionId x = add_region(t, 2 * kMiB, 91, 103, {3});
  const RegionId y = add_region(t, 2 * kMiB, 101, 113, {1});
  t.regions[s - 1].recompute = Recompute{5.0, {q}};
  t.regions[x - 1].recompute = t.regions[y - 1].recompute = Recompute{5.0, {s}};
  Analysis a = analyze(t);
  ASSERT_EQ(a.next_instance[a.index.at(x)], a.index.at(y));
  Plan plan;
  plan.entries.push_back({s, EvictKind::kRecompute, 0, kNoLaunch, 6, 6, 0.0});
  plan.entries.push_back({y, EvictKind::kRecompute, 1, kNoLaunch, kNoLaunch, kNoLaunch, 0.0});
  ASSERT_GT(simulate(a, plan, kBudget).access_violations, 0u);
  EXPECT_EQ(make_recomputations_executable(a, plan), 1u);
  EXPECT_EQ(plan.entries[0].kind, EvictKind::kSwap);
  EXPECT_EQ(plan.entries[1].kind, EvictKind::kRecompute);
  const SimResult r = simulate(a, plan, kBudget);
  EXPECT_EQ(r.access_violations, 0u);
  EXPECT_GT(r.recompute_us, 0.0);  // X still recomputed
}

// Any plan, however its entries are placed, runs with no access violation once checked.
TEST(RecomputeCheckTest, RandomPlansRunWithNoAccessViolationOnceChecked) {
  std::mt19937_64 rng(20261126);
  int violating = 0, runs = 0;
  for (int k = 0; k < 1500; ++k) {
    const Trace t = k % 2 ? testing::random_trace_across_start(rng) : testing::random_trace(rng);
    const Analysis a = analyze(t);
    if (a.peak_bytes <= a.max_working_set) continue;
    const std::uint64_t budget = a.max_working_set + rng() % (a.peak_bytes - a.max_working_set + 1);
    for (int p = 0; p < 10; ++p) {
      Plan plan = testing::random_plan(rng, t, 6);
      const SimResult before = simulate(a, plan, budget);
      if (!before.feasible) continue;
      ++runs;
      violating += before.access_violations > 0;
      make_recomputations_executable(a, plan);
      EXPECT_EQ(simulate(a, plan, budget).access_violations, 0u) << "trace " << k << " plan " << p;
    }
  }
  EXPECT_GT(runs, 10000);
  EXPECT_GT(violating, 500);  // the random plans do read what they dropped
}

}  // namespace
}  // namespace gswap::policy
