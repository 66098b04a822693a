// policy_bench.cpp: the policy benchmark. Prints, as a Markdown table, every reference model x
// budget (30%, 50%, 70% of its peak) x policy: predicted step time over the ideal step, over the
// lower bound, and the planning time; then the planning time of a 20,000-launch iteration.
// `--smoke` runs one small case only (used by CTest to keep the program working).
#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <vector>

#include <fmt/format.h>

#include "policy/capuchin.h"
#include "policy/planners.h"
#include "policy/reference_traces.h"

using namespace gswap::policy;

namespace {

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// Planning is single-threaded; its CPU time is what it costs, while wall time on a shared
// machine also counts other processes. Both are printed for the large case.
double cpu_ms() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

void table(const std::vector<std::string_view>& models, const std::vector<int>& percents) {
  fmt::print(
      "| model | budget | policy | step/ideal | step/bound | stall ms | plan ms (CPU) | note |\n");
  fmt::print("|---|---|---|---|---|---|---|---|\n");
  for (std::string_view m : models) {
    const Trace t = *reference_trace(m);
    const Analysis a = analyze(t);
    for (int pct : percents) {
      const std::uint64_t budget = a.peak_bytes * static_cast<std::uint64_t>(pct) / 100;
      std::vector<Evaluation> evs;
      for (PolicyKind p : kAllPolicies) evs.push_back(evaluate(p, a, budget, cpu_ms));
      const double cap = evs[0].sim.step_time_us;
      for (std::size_t k = 0; k < evs.size(); ++k) {
        const Evaluation& ev = evs[k];
        std::string note;
        if (!ev.sim.feasible) {
          note = "infeasible: " + ev.sim.reason;
        } else if (k == 0) {
          std::vector<std::string> lost;
          for (std::size_t j = 1; j < evs.size(); ++j)
            if (evs[j].sim.feasible && evs[j].sim.step_time_us <= cap)
              lost.push_back(policy_name(kAllPolicies[j]));
          if (!lost.empty()) {
            note = "not ahead of";
            for (auto& l : lost) note += " " + l;
          }
          if (ev.sim.demand_evictions)
            note += fmt::format(" ({} demand evictions)", ev.sim.demand_evictions);
        } else if (ev.sim.demand_evictions) {
          note = fmt::format("{} demand evictions", ev.sim.demand_evictions);
        }
        fmt::print("| {} | {}% | {} | {:.3f} | {:.3f} | {:.1f} | {:.2f} | {} |\n", m, pct,
                   policy_name(kAllPolicies[k]),
                   ev.sim.feasible ? ev.sim.step_time_us / a.ideal_step_us : 0.0,
                   ev.sim.feasible ? ev.sim.step_time_us / ev.bound.bound_us : 0.0,
                   ev.sim.stall_us / 1000, ev.plan_time_ms, note);
      }
    }
  }
}

void large(int layers, int repeats) {
  TransformerConfig c;
  c.name = "transformer-large";
  c.layers = layers, c.hidden = 512, c.heads = 8, c.seq = 256, c.batch = 8, c.vocab = 32000;
  const Trace t = make_transformer(c);
  const Analysis a = analyze(t);
  const std::uint64_t budget = a.peak_bytes / 2;
  std::vector<double> cpu, wall;
  std::size_t entries = 0;
  for (int r = 0; r < repeats; ++r) {
    const double c0 = cpu_ms(), w0 = now_ms();
    Plan p = plan_capuchin(a, budget);
    cpu.push_back(cpu_ms() - c0);
    wall.push_back(now_ms() - w0);
    entries = p.entries.size();
  }
  std::sort(cpu.begin(), cpu.end());
  std::sort(wall.begin(), wall.end());
  fmt::print(
      "\nCapuchin planning, {} launches, {} regions, budget 50% of peak, {} runs, {} plan "
      "entries: CPU median {:.1f} ms (min {:.1f}, max {:.1f}); wall median {:.1f} ms\n",
      a.n, t.regions.size(), repeats, entries, cpu[cpu.size() / 2], cpu.front(), cpu.back(),
      wall[wall.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  const bool smoke = argc > 1 && std::strcmp(argv[1], "--smoke") == 0;
  if (smoke) {
    table({"resnet50"}, {50});
    large(24, 1);
    return 0;
  }
  table({"resnet50", "bert-large", "gpt2-medium"}, {30, 50, 70});
  large(688, 5);  // 29 launches per layer: about 20,000 launches
  return 0;
}
