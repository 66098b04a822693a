// plot_command.h: the `gswapctl plot` subcommand: the memory plot (policy/memory_plot.h) of one
// iteration of a trace planned at a budget. policy/ provides it; gswapctl registers it with a way
// to fetch a running program's trace from gswapd (--pid), which policy/ cannot do itself.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "policy/trace.h"

namespace CLI {
class App;
}

namespace gswap::policy::cli {

// A running program's last measured iteration, and the budget its plans are made for.
struct ProgramTrace {
  Trace trace;
  std::uint64_t plan_budget = 0;
  std::string name;  // "minitrain (pid 123)"
};
using TraceFetcher = std::function<ProgramTrace(long pid)>;

// Adds `plot (--pid P | --trace F|ref:NAME) [--budget B] [--policy P] --out FILE.svg`. Without a
// fetcher, --pid is refused with a message saying gswapctl has it.
void add_plot_command(CLI::App& app, TraceFetcher fetch = nullptr);

// The SVG of `trace` planned at `budget` (none: the trace's peak, nothing moves). A budget of 0
// is a budget like any other: impossible unless no launch touches anything. Throws with the
// commands' message (simulate_command.h's infeasible_message) when the plan cannot run.
std::string plot_svg(const Trace& trace, std::optional<std::uint64_t> budget,
                     const std::string& name, const std::string& policy, double search_ms);

}  // namespace gswap::policy::cli
