// simulator.h: a discrete-event model of running one iteration of a trace under a plan and a
// memory budget. Compute: one stream per trace stream, launches in order, each taking its traced
// dur_us. Copies: one engine per direction at the trace's measured bandwidth, serialised in issue
// order. Memory: a region occupies the budget while resident or while a copy of it is in flight;
// an eviction frees memory only when its copy is done. The budget is never exceeded: an allocation
// or restore that does not fit waits for the earliest unfinished swap-out, and when none is in
// flight, evicts the least recently used resident region on demand (the passive LRU behaviour).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/analysis.h"
#include "policy/plan.h"

namespace gswap::policy {

struct SimResult {
  bool feasible = true;
  std::string reason;             // why not feasible
  double step_time_us = 0;        // last compute end or last copy end, whichever is later
  double ideal_step_time_us = 0;  // the same trace with infinite memory
  double stall_us = 0;            // compute waiting for memory or restores
  double recompute_us = 0;        // compute spent recomputing dropped regions
  double h2d_busy_us = 0, d2h_busy_us = 0;
  std::uint64_t budget_bytes = 0;
  std::uint64_t peak_resident_bytes = 0;
  std::uint64_t swapped_out_bytes = 0, swapped_in_bytes = 0, recomputed_bytes = 0;
  std::size_t demand_evictions = 0;   // evictions the plan did not ask for
  std::size_t demand_restores = 0;    // restores that stalled a launch because nothing prefetched
  std::size_t access_violations = 0;  // launches started with a region absent; must stay 0
  // Per plan entry: how long its back-access waited for a swap-in still in flight (0 when on
  // time). This is the "observed lateness" the feedback rule consumes.
  std::vector<double> lateness_us;
};

SimResult simulate(const Analysis& a, const Plan& plan, std::uint64_t budget);

}  // namespace gswap::policy
