// plot_command.cpp: `plot (--pid P | --trace F|ref:NAME) [--budget B] --out FILE.svg`: plans the
// iteration at the budget as gswapd would, simulates the plan, and draws live bytes, resident
// bytes and the budget, with the swap traffic below (policy/memory_plot.h). Errors are thrown for
// the caller's command boundary to report.
#include "policy/cli/plot_command.h"

#include <cmath>
#include <iostream>
#include <memory>
#include <stdexcept>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "policy/analysis.h"
#include "policy/printable_text.h"
#include "policy/cli/simulate_command.h"
#include "policy/memory_plot.h"
#include "policy/sim_timeline.h"
#include "policy/write_file.h"

namespace gswap::policy::cli {
namespace {

struct Options {
  long pid = 0;
  std::string trace, budget, out, policy = "capuchin";
  double search_ms = 200;
};

std::string mib(std::uint64_t b) {
  const double v = static_cast<double>(b);
  return v >= 2.0 * (1ull << 30) ? fmt::format("{:.2f} GiB", v / (1ull << 30))
                                 : fmt::format("{:.1f} MiB", v / (1ull << 20));
}

std::string duration_text(double us) {
  return us >= 2e3 ? fmt::format("{:.2f} ms", us / 1e3) : fmt::format("{:.1f} \xC2\xB5s", us);
}

}  // namespace

std::string plot_svg(const Trace& trace, std::optional<std::uint64_t> budget_or_peak,
                     const std::string& name, const std::string& policy, double search_ms) {
  const Analysis a = analyze(trace);
  if (a.n == 0)
    throw std::runtime_error(printable_text(name) + ": the trace has no launches to plot");
  const std::uint64_t budget = budget_or_peak.value_or(a.peak_bytes);
  Evaluation ev = plan_and_simulate(a, budget, {policy, search_ms, 1, 4, false});
  if (std::string error = infeasible_message(a, budget, policy, ev); !error.empty())
    throw std::runtime_error(error);
  SimEvents events;
  const SimResult s = simulate(a, ev.plan, budget, &events);
  if (!std::isfinite(s.step_time_us))
    throw std::runtime_error(fmt::format("{}: cannot draw a simulated step of {} us",
                                         printable_text(name), s.step_time_us));
  MemoryPlot p;
  p.budget = budget;
  p.curves = memory_curves(a, events, s.step_time_us);
  p.traffic = swap_traffic(a, events, s.step_time_us, 60);
  // A trace with nothing live has no peak to compare the budget with.
  const std::string share =
      a.peak_bytes ? fmt::format("{:.0f}% of the peak", 100.0 * static_cast<double>(budget) /
                                                            static_cast<double>(a.peak_bytes))
                   : std::string("nothing is live in the trace");
  p.title =
      fmt::format("{}: memory over one iteration at a budget of {} ({})", name, mib(budget), share);
  p.subtitle = fmt::format(
      "{} launches, peak live {}; {} plan, simulated: step {} (ideal {}), stall {}, "
      "{} out, {} in, {} recomputed",
      a.n, mib(a.peak_bytes), ev.plan.policy.empty() ? policy : ev.plan.policy,
      duration_text(s.step_time_us), duration_text(a.ideal_step_us), duration_text(s.stall_us),
      mib(s.swapped_out_bytes), mib(s.swapped_in_bytes), mib(s.recomputed_bytes));
  return render_memory_plot_svg(p);
}

void add_plot_command(CLI::App& app, TraceFetcher fetch) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "plot", "Draw memory over one iteration (live, resident, budget, swap traffic) as SVG");
  auto* pid = sub->add_option("--pid", o->pid, "a running program (its trace, from gswapd)");
  auto* trace = sub->add_option("--trace", o->trace,
                                "a trace file (gswap-trace JSON) or a built-in trace (ref:NAME)");
  pid->excludes(trace);
  sub->add_option("--budget", o->budget,
                  "plan at this budget: bytes with a unit (6GiB) or a percentage of the trace's "
                  "peak (50%); default: the program's plan budget (--pid), else the peak");
  sub->add_option("--policy", o->policy, "the planner, as for simulate")->capture_default_str();
  sub->add_option("--search-ms", o->search_ms, "capuchin: the plan search's time")
      ->capture_default_str();
  sub->add_option("--out", o->out, "the SVG file to write")->required();
  sub->callback([o, fetch, sub] {
    if (!sub->count("--pid") && !sub->count("--trace"))
      throw std::runtime_error("plot: give --pid P or --trace FILE|ref:NAME");
    // As simulate: the search's time means nothing to the other policies.
    if (sub->count("--search-ms") && parse_policy(o->policy) &&
        parse_policy(o->policy) != PolicyKind::kCapuchin)
      throw CLI::ValidationError(
          "--search-ms", "applies to --policy capuchin only, not " + printable_text(o->policy));
    Trace t;
    std::string name;
    std::optional<std::uint64_t> budget;  // none: the trace's peak
    if (sub->count("--pid")) {
      if (!fetch) throw std::runtime_error("plot --pid needs gswapctl (it asks gswapd)");
      ProgramTrace p = fetch(o->pid);
      t = std::move(p.trace);
      name = p.name;
      if (p.plan_budget > 0) budget = p.plan_budget;  // 0: gswapd has no plan budget for it
    } else {
      refuse_writing_over(o->out, "--out", {{o->trace, "--trace"}});
      t = load_trace(o->trace);
      name = o->trace;
    }
    // A budget the user gives is planned at as given, 0 included (as simulate does), never read
    // as "not given".
    if (sub->count("--budget")) budget = parse_budget(o->budget, analyze(t).peak_bytes, "--budget");
    std::string svg = plot_svg(t, budget, name, o->policy, o->search_ms);
    write_file(o->out, svg);
    std::cout << printable_text(fmt::format("wrote the memory plot of {} to {}", name, o->out))
              << "\n";
  });
}

}  // namespace gswap::policy::cli
