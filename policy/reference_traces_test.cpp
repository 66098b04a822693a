// reference_traces_test.cpp: the reference traces are well formed, have the structure their
// models imply, survive the JSON round trip, and the planner meets its targets on them.
#include "policy/reference_traces.h"

#include <gtest/gtest.h>

#include "policy/analysis.h"
#include "policy/baselines.h"
#include "policy/capuchin.h"
#include "policy/lower_bound.h"
#include "policy/simulator.h"
#include "policy/trace_json.h"

namespace gswap::policy {
namespace {

class ReferenceTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ReferenceTest, WellFormedAndRoundTrips) {
  auto t = reference_trace(GetParam());
  ASSERT_TRUE(t.has_value());
  std::string err;
  Trace back;
  ASSERT_TRUE(parse_trace_json(write_trace_json(*t), &back, &err)) << err;
  EXPECT_EQ(back.launches.size(), t->launches.size());
  Analysis a = analyze(*t);
  EXPECT_GT(a.n, 300u);
  // Activations make the peak far larger than what lives across iterations.
  std::uint64_t persistent = 0;
  for (std::size_t r = 0; r < t->regions.size(); ++r)
    if (a.live_at_start[r] && a.live_at_end[r]) persistent += t->regions[r].bytes;
  EXPECT_GT(a.peak_bytes, 2 * persistent);
  EXPECT_LT(a.peak_bytes, t->device.capacity_bytes);
  // Every activation is freed within the iteration: the trace repeats.
  for (std::size_t r = 0; r < t->regions.size(); ++r)
    if (!a.live_at_start[r]) {
      EXPECT_FALSE(a.live_at_end[r]) << "region " << t->regions[r].id;
    }
  // Recompute sources exist while the region is live.
  for (std::size_t r = 0; r < t->regions.size(); ++r) {
    if (!t->regions[r].recompute) continue;
    for (RegionId s : t->regions[r].recompute->sources) {
      auto it = a.index.find(s);
      ASSERT_NE(it, a.index.end());
      EXPECT_LE(a.first_live[it->second], a.first_live[r]);
    }
  }
  // Kernel names show forward, backward and the optimizer.
  bool fwd = false, bwd = false, opt = false;
  for (const Launch& l : t->launches) {
    fwd |= l.kernel.find("_fwd") != std::string::npos;
    bwd |= l.kernel.find("grad") != std::string::npos;
    opt |= l.kernel == "adam_step";
  }
  EXPECT_TRUE(fwd && bwd && opt);
}

TEST_P(ReferenceTest, CapuchinAtHalfThePeakIsNearTheBoundAndBeatsBaselines) {
  Trace t = *reference_trace(GetParam());
  Analysis a = analyze(t);
  const std::uint64_t budget = a.peak_bytes / 2;
  SimResult cap = simulate(a, plan_capuchin(a, budget), budget);
  ASSERT_TRUE(cap.feasible) << cap.reason;
  EXPECT_LE(cap.peak_resident_bytes, budget);
  const double lb = lower_bound(a, budget).bound_us;
  EXPECT_GE(cap.step_time_us, lb);
  EXPECT_LE(cap.step_time_us, 1.05 * lb);
  for (const Plan& p : {plan_lru(a, budget), plan_vdnn(a, budget), plan_recompute_only(a, budget),
                        plan_delta(a, budget)}) {
    SimResult s = simulate(a, p, budget);
    if (s.feasible) {
      EXPECT_LT(cap.step_time_us, s.step_time_us) << p.policy;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, ReferenceTest,
                         ::testing::Values("resnet50", "bert-large", "gpt2-medium"));

TEST(ReferenceTracesTest, UnknownNameIsRefused) {
  EXPECT_FALSE(reference_trace("vgg16").has_value());
}

}  // namespace
}  // namespace gswap::policy
