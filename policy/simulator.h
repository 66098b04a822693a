// simulator.h: a discrete-event model of running one iteration of a trace under a plan and a
// memory budget. Compute: one stream per trace stream, launches in order, each taking its traced
// dur_us. Copies: one engine per direction at the trace's measured bandwidth, serialised in issue
// order. Memory: a region occupies the budget while resident or while a copy of it is in flight;
// an eviction frees memory only when its copy is done. The budget is never exceeded: an allocation
// or restore that does not fit waits for the earliest unfinished swap-out, and when none is in
// flight, evicts the least recently used resident region on demand (the passive LRU behaviour).
// A planned prefetch that does not fit once its trigger launch has its own memory takes, as the
// library does, the memory of a same-sized swap-out or free still in flight (a donor): its copy
// starts after the donor's, and that memory no longer comes back to the budget.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/analysis.h"
#include "policy/plan.h"

namespace gswap::policy {

// The longest chain of dropped regions recomputed one from another that the simulator follows
// (recursively); a longer one is counted as an access violation.
inline constexpr int kMaxRecomputeDepth = 1024;

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
  std::size_t donated_restores = 0;   // prefetches given the memory of a swap-out still in flight
  std::size_t access_violations = 0;  // launches started with a region absent; must stay 0
  // Of those, recomputations whose chain of sources is longer than kMaxRecomputeDepth.
  std::size_t too_deep_recomputations = 0;
  // Per plan entry: how long its back-access waited for a swap-in still in flight (0 when on
  // time). This is the "observed lateness" the feedback rule consumes.
  std::vector<double> lateness_us;
};

// What happened, event by event, for timelines and plots (simulate_timeline, memory plots). Times
// are microseconds from the iteration's start; regions are indices into the trace's regions.
struct SimEvents {
  struct Launch {
    double start_us = 0, end_us = 0;
    double stall_us = 0;  // waited for memory or restores before starting (recomputation apart)
    std::size_t waited_for = kNoLaunch;  // the region whose restore it waited for, if any
  };
  struct Copy {
    std::size_t region = 0;
    bool to_device = false;
    double start_us = 0, end_us = 0;
    std::size_t entry = kNoLaunch;  // the plan entry that moved it; kNoLaunch: on demand
    bool late = false;              // a planned restore still in flight when its back-access came
  };
  struct Recompute {
    std::size_t region = 0, launch = 0;  // recomputed for this launch
    double start_us = 0, end_us = 0;
  };
  // A change of memory at a time: device bytes taken (+) or released (-), host bytes held.
  struct Memory {
    double time_us = 0;
    std::int64_t device_delta = 0, host_delta = 0;
  };
  std::vector<Launch> launches;  // one per launch of the trace
  std::vector<Copy> copies;
  std::vector<Recompute> recomputes;
  std::vector<Memory> memory;  // in the order it happened; replay for the resident curve
  std::uint64_t resident_at_start = 0, host_at_start = 0;
};

SimResult simulate(const Analysis& a, const Plan& plan, std::uint64_t budget);
// The same, recording every event into *events (slower; for timelines and plots only).
SimResult simulate(const Analysis& a, const Plan& plan, std::uint64_t budget, SimEvents* events);

}  // namespace gswap::policy
