// simulate_command.h: the `gswapctl simulate` subcommand, provided by policy/ and registered by
// gswapctl's main. It needs no daemon.
#pragma once

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

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
// A trace file (gswap-trace JSON) or a built-in trace (ref:NAME); throws with a clear message
// (printable: text quoted from the trace is escaped). Anything but a regular file is refused.
// A file with several iteration marks gives its last marked iteration (last_marked_iteration).
Trace load_trace(const std::string& spec);
// A plan file (gswap-plan JSON) made for `trace`; throws with a clear, printable message.
Plan load_plan(const std::string& path, const Trace& trace);
// A budget as `simulate --budget` takes it: bytes with a unit, or a percentage of `peak`.
// Throws CLI::ValidationError naming `option`.
std::uint64_t parse_budget(const std::string& text, std::uint64_t peak, const std::string& option);

struct PlanOptions {
  std::string policy = "capuchin";
  double search_ms = 200;
  std::uint64_t seed = 1;
  // Walks side by side, as gswapd's plan_search_threads (usable_search_threads of it).
  std::uint64_t search_threads = 4;
  // The search keeps to plans that fit where one is found, as gswapd does (SearchOptions).
  bool require_fit = false;
};
// Plans the trace at the budget with the policy (capuchin: the greedy plan improved by the
// search, as gswapd plans) and simulates the plan. *evaluations: plans the search simulated.
Evaluation plan_and_simulate(const Analysis& a, std::uint64_t budget, const PlanOptions& o,
                             std::size_t* evaluations = nullptr);
// Empty when the plan and its simulation ran at the budget; otherwise the message the commands
// fail with, printable (printable_text.h). A budget some launch cannot fit (analysis.h's
// impossible_budget_reason) gives "budget of N bytes is impossible: REASON"; a possible budget at
// which this policy's plan cannot run gives "the P plan cannot run at a budget of N bytes: REASON
// (the budget itself is possible: try --policy capuchin)".
std::string infeasible_message(const Analysis& a, std::uint64_t budget, const std::string& policy,
                               const Evaluation& ev);
// Throws "OPTION OUT is the INPUT_OPTION file: ..." where `out` names the same file as one of
// `inputs` (path, option), a link or another spelling of it included: writing it would destroy
// what the command reads. Built-in traces (ref:NAME) and empty paths are skipped.
void refuse_writing_over(const std::string& out, const std::string& option,
                         const std::vector<std::pair<std::string, std::string>>& inputs);
// `rc`, once standard output has been flushed; where that or an earlier write to it failed (a
// full disk, /dev/full), "PROGRAM: cannot write standard output: reason" on standard error and 1
// (what was printed is incomplete: a script reading it must not take it).
int checked_stdout(const char* program, int rc);

}  // namespace gswap::policy::cli
