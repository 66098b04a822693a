// corpus_test.cpp: the planner's promises over the whole corpus — the generated models (small
// batches), their swap-only variants, random training iterations, random traces, and every
// captured trace dropped into policy/corpus/:
//   - a plan the planner says fits runs in the simulator with no demand eviction;
//   - no simulated step falls below the lower bound;
//   - the searched plan is never behind a baseline, nor behind the greedy plan.
#include "policy/corpus.h"

#include <filesystem>
#include <iterator>
#include <fstream>
#include <random>
#include <sstream>
#include <unordered_map>

#include <gtest/gtest.h>

#include "policy/baselines.h"
#include "policy/capuchin.h"
#include "policy/lower_bound.h"
#include "policy/planners.h"
#include "policy/search.h"
#include "policy/simulator.h"
#include "policy/test_traces.h"
#include "policy/trace_json.h"

namespace gswap::policy {
namespace {

constexpr int kPercents[] = {30, 50, 70, 90};

// The greedy planner's verdict against the simulator, for every planner configuration.
void expect_fits_means_no_demand_eviction(const Analysis& a, std::uint64_t budget,
                                          const std::string& what) {
  for (int mode = 0; mode < 3; ++mode) {
    CapuchinOptions o;
    o.allow_swap = mode != 2;
    o.allow_recompute = mode != 1;
    const Plan p = plan_capuchin(a, budget, o);
    if (!p.feasible) continue;
    const SimResult s = simulate(a, p, budget);
    if (!s.feasible) {  // e.g. recompute-only when persistent state alone exceeds the budget
      EXPECT_FALSE(p.fits) << what << " mode " << mode;
      continue;
    }
    if (p.fits) {
      EXPECT_EQ(s.demand_evictions, 0u) << what << " mode " << mode;
    }
    if (mode == 0) {  // the traffic-minimising seed keeps the same promise
      const Plan q = plan_belady(a, budget);
      const SimResult sq = simulate(a, q, budget);
      if (q.fits) {
        EXPECT_EQ(sq.demand_evictions, 0u) << what << " belady";
      }
      EXPECT_EQ(sq.access_violations, 0u) << what << " belady";
    }
    // The models and captured iterations always have a fitting plan, unless regions allocated
    // before they are used leave too little room (then the planner says why).
    if (mode == 0 && a.peak_bytes > budget && what.rfind("random trace", 0) != 0) {
      if (a.max_min_planned <= budget) {
        EXPECT_TRUE(p.fits) << what << ": " << p.reason;
      } else {
        EXPECT_FALSE(p.fits) << what;
        EXPECT_EQ(p.reason, unplannable_budget_reason(a, budget)) << what;
      }
    }
    EXPECT_EQ(s.access_violations, 0u) << what << " mode " << mode;
    EXPECT_LE(s.peak_resident_bytes, budget) << what;
  }
}

// Loose ceilings on the searched plan's step over the lower bound, by budget (30/50/70/90%),
// for the generated models: a gross regression trips them. docs/benchmarks.md records the exact
// figures, measured with the search's full time budget on the full-size models; these small
// variants get 100 simulated plans.
constexpr double kLooseCeiling[] = {4.5, 3.5, 4.0, 2.5};

void check_trace(const std::string& name, const Trace& t, std::size_t evaluations,
                 bool ceilings = false) {
  const Analysis a = analyze(t);
  for (std::size_t pi = 0; pi < std::size(kPercents); ++pi) {
    const int pct = kPercents[pi];
    const std::uint64_t budget = a.peak_bytes * static_cast<std::uint64_t>(pct) / 100;
    if (budget < a.max_min_resident) continue;  // impossible: nothing to check
    const std::string what = name + " at " + std::to_string(pct) + "%";
    expect_fits_means_no_demand_eviction(a, budget, what);
    const double lb = lower_bound(a, budget).bound_us;
    SearchOptions so;
    so.max_evaluations = evaluations;
    const SearchResult r = search_plan(a, budget, so);
    ASSERT_TRUE(r.sim.feasible) << what;
    EXPECT_EQ(r.plan.fits, r.sim.demand_evictions == 0) << what;
    if (a.max_min_planned > budget) {
      EXPECT_FALSE(r.plan.fits) << what;
      EXPECT_EQ(r.plan.reason, unplannable_budget_reason(a, budget)) << what;
    }
    EXPECT_GE(r.sim.step_time_us, lb * (1 - 1e-9)) << what;
    if (ceilings) {
      EXPECT_LE(r.sim.step_time_us, lb * kLooseCeiling[pi]) << what;
    }
    const SimResult greedy = simulate(a, plan_capuchin(a, budget), budget);
    if (greedy.feasible) {
      EXPECT_LE(r.sim.step_time_us, greedy.step_time_us * (1 + 1e-9)) << what;
    }
    for (const Plan& p : {plan_lru(a, budget), plan_vdnn(a, budget), plan_recompute_only(a, budget),
                          plan_delta(a, budget)}) {
      const SimResult s = simulate(a, p, budget);
      if (!s.feasible) continue;
      EXPECT_GE(s.step_time_us, lb * (1 - 1e-9)) << what << " " << p.policy;
      EXPECT_LE(r.sim.step_time_us, s.step_time_us * (1 + 1e-9)) << what << " " << p.policy;
    }
  }
}

TEST(CorpusTest, GeneratedModelsAndRandomIterations) {
  for (const CorpusTrace& ct : corpus(/*small=*/true, /*random_count=*/8)) {
    SCOPED_TRACE(ct.name);
    const bool model = ct.name.rfind("random:", 0) != 0;
    check_trace(ct.name, ct.trace, model ? 100 : 40, model);
  }
}

// Every generated trace passes the reader's checks (sizes, and regions touched only while
// allocated), so what the corpus plans is what a user could load.
TEST(CorpusTest, GeneratedTracesAreValidTraceFiles) {
  std::string err;
  for (const CorpusTrace& ct : corpus(/*small=*/true, /*random_count=*/8)) {
    Trace back;
    EXPECT_TRUE(parse_trace_json(write_trace_json(ct.trace), &back, &err))
        << ct.name << ": " << err;
  }
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    Trace back;
    EXPECT_TRUE(parse_trace_json(write_trace_json(make_random_training(seed)), &back, &err))
        << "seed " << seed << ": " << err;
  }
}

TEST(CorpusTest, SwapOnlyVariantsCarryNoRecompute) {
  for (const CorpusTrace& ct : corpus(true, 0)) {
    if (ct.name.find("/swap-only") == std::string::npos) continue;
    for (const Region& r : ct.trace.regions) EXPECT_FALSE(r.recompute) << ct.name;
  }
}

TEST(CorpusTest, RandomTrainingIsDeterministicAndWellFormed) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const Trace t = make_random_training(seed);
    EXPECT_EQ(write_trace_json(t), write_trace_json(make_random_training(seed)));
    const Analysis a = analyze(t);
    // Forward, backward and optimizer: every activation is freed, persistent state is not.
    for (std::size_t r = 0; r < t.regions.size(); ++r) {
      if (!a.live_at_start[r]) {
        EXPECT_FALSE(a.live_at_end[r]) << "seed " << seed;
      }
    }
    bool bwd = false, opt = false;
    for (const Launch& l : t.launches) {
      bwd |= l.kernel.find("_bwd") != std::string::npos ||
             l.kernel.find("_dgrad") != std::string::npos;
      opt |= l.kernel.find("adam") != std::string::npos;
    }
    EXPECT_TRUE(bwd && opt) << "seed " << seed;
  }
}

TEST(CorpusTest, RandomTracesKeepThePlannersWord) {
  std::mt19937_64 rng(20261123);
  int checked = 0;
  for (int k = 0; k < 300; ++k) {
    const Trace t = testing::random_trace(rng);
    const Analysis a = analyze(t);
    if (a.peak_bytes <= a.max_working_set) continue;
    const std::uint64_t budget = a.max_working_set + rng() % (a.peak_bytes - a.max_working_set + 1);
    expect_fits_means_no_demand_eviction(a, budget, "random trace " + std::to_string(k));
    ++checked;
  }
  for (std::uint64_t seed = 100; seed < 160; ++seed) {
    RandomTrainingOptions o;
    o.max_layers = 12;
    const Trace t = make_random_training(seed, o);
    const Analysis a = analyze(t);
    for (int pct : kPercents) {
      const std::uint64_t budget = a.peak_bytes * static_cast<std::uint64_t>(pct) / 100;
      if (budget < a.max_min_resident) continue;
      expect_fits_means_no_demand_eviction(a, budget, "random:" + std::to_string(seed));
      ++checked;
    }
  }
  EXPECT_GT(checked, 300);
}

// The iteration as gswapd may capture it: from launch k on, then launches 0 to k-1 of the next
// iteration (seq numbers one iteration later). A region of one iteration live across launch k
// appears twice: carried over (its own id) and allocated again for the next iteration (a new id).
// Regions of the next iteration recompute from the next iteration's sources.
Trace cut_at(const Trace& t, std::size_t k) {
  Seq span = 0;
  for (const Launch& l : t.launches) span = std::max(span, l.seq + 1);
  for (const Region& r : t.regions)
    span = std::max({span, r.alloc_seq + 1, r.free_seq.value_or(0) + 1});
  const Seq cut = t.launches[k].seq;
  RegionId next_id = 0;
  for (const Region& r : t.regions) next_id = std::max(next_id, r.id + 1);
  Trace out;
  out.device = t.device;
  std::unordered_map<RegionId, RegionId> next;  // id in the next iteration
  std::vector<std::size_t> shifted;             // regions of the next iteration, in out
  for (const Region& r : t.regions) {
    if (!r.free_seq || r.alloc_seq >= cut) {  // persistent, or allocated after the cut
      out.regions.push_back(r);
      next[r.id] = r.id;
      continue;
    }
    Region later = r;
    later.alloc_seq += span;
    *later.free_seq += span;
    if (*r.free_seq > cut) {  // live across the cut: carried over, and again
      out.regions.push_back(r);
      later.id = next_id++;
    }
    next[r.id] = later.id;
    shifted.push_back(out.regions.size());
    out.regions.push_back(later);
  }
  for (std::size_t i : shifted)
    if (auto& rc = out.regions[i].recompute)
      for (RegionId& src : rc->sources) src = next.at(src);
  for (std::size_t i = k; i < t.launches.size(); ++i) out.launches.push_back(t.launches[i]);
  const double shift = t.launches.back().start_us + t.launches.back().dur_us;
  for (std::size_t i = 0; i < k; ++i) {
    Launch l = t.launches[i];
    l.seq += span;
    l.start_us += shift;
    for (RegionId& id : l.regions) id = next.at(id);
    out.launches.push_back(l);
  }
  const double t0 = out.launches.front().start_us;
  for (Launch& l : out.launches) l.start_us -= t0;
  std::sort(out.regions.begin(), out.regions.end(),
            [](const Region& a, const Region& b) { return a.id < b.id; });
  return out;
}

// Iterations cut inside the backward, where activations saved before the start are read after
// it, with recompute and swap-only: the planner's word holds, no step falls below the bound, and
// the search stays ahead of the baselines, now that a region evicted or dropped for good costs
// the next iteration its restore or recomputation.
TEST(CorpusTest, IterationsCutInsideTheBackwardKeepThePlannersWord) {
  int paired = 0;
  for (std::uint64_t seed = 100; seed < 110; ++seed) {
    RandomTrainingOptions o;
    o.max_layers = 8;
    const Trace whole = make_random_training(seed, o);
    const Trace t = cut_at(whole, whole.launches.size() * 2 / 3);
    const Analysis a = analyze(t);
    for (std::size_t r : a.next_instance) paired += r != kNoRegion;
    // Named apart from the models: the greedy planner does not take a carried-over region off
    // through its next instance (only the search, scored by the simulator, finds such plans),
    // so it need not fit every budget the analysis calls plannable.
    check_trace("random trace:" + std::to_string(seed) + " cut", t, 40);
    check_trace("random trace:" + std::to_string(seed) + " cut/swap-only", without_recompute(t),
                40);
  }
  EXPECT_GT(paired, 10);
}

// Traces captured from real programs: every *.json in policy/corpus/.
TEST(CorpusTest, CapturedTraces) {
  namespace fs = std::filesystem;
  const fs::path dir = GSWAP_POLICY_CORPUS_DIR;
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    std::ifstream in(entry.path());
    std::stringstream ss;
    ss << in.rdbuf();
    Trace t;
    std::string err;
    ASSERT_TRUE(parse_trace_json(ss.str(), &t, &err)) << entry.path() << ": " << err;
    check_trace(entry.path().filename().string(), t, 40);
    check_trace(entry.path().filename().string() + "/swap-only", without_recompute(t), 40);
    ++files;
  }
  RecordProperty("captured_traces", files);
}

}  // namespace
}  // namespace gswap::policy
