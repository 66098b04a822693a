// simulate_command.h: the `gswapctl simulate` subcommand, provided by policy/ and registered by
// gswapctl's main. It needs no daemon.
#pragma once

#include <cstdint>
#include <string>

#include "policy/planners.h"
#include "policy/simulator.h"
#include "policy/trace.h"

namespace CLI {
class App;
}

namespace gswap::policy::cli {

// Adds `simulate --trace F --budget B --policy P [--json] [--timeline FILE]` to the command line.
void add_simulate_command(CLI::App& app);

// What `simulate` and `plot` share.
// A trace file (gswap-trace JSON) or a built-in trace (ref:NAME); throws with a clear message.
Trace load_trace(const std::string& spec);
// A budget as `simulate --budget` takes it: bytes with a unit, or a percentage of `peak`.
// Throws CLI::ValidationError naming `option`.
std::uint64_t parse_budget(const std::string& text, std::uint64_t peak, const std::string& option);

struct PlanOptions {
  std::string policy = "capuchin";
  double search_ms = 200;
  std::uint64_t seed = 1;
};
// Plans the trace at the budget with the policy (capuchin: the greedy plan improved by the
// search, as gswapd plans) and simulates the plan. *evaluations: plans the search simulated.
Evaluation plan_and_simulate(const Analysis& a, std::uint64_t budget, const PlanOptions& o,
                             std::size_t* evaluations = nullptr);
// Writes `text` to `path`, or throws "cannot write PATH: reason".
void write_file(const std::string& path, const std::string& text);

}  // namespace gswap::policy::cli
