// exact.h: the optimal swap/recompute schedule of a small iteration, solved as a mixed-integer
// linear program with COIN-OR CBC (Debian's coinor-libcbc-dev). It is the truth the planner is
// measured against in tests, and a check that the lower bound never exceeds an achievable step.
//
// The model is the simulator's (README.md "Exact optimum" gives every constraint): launches in
// order, each stream serial; one copy engine per direction; a region is off the device at a
// launch only if its copy-out (or drop) has released it before that launch starts and its
// restore is issued no earlier than the next launch is ready; every launch over the budget
// must fit. Within that model it restricts, so that the schedule it finds is one the simulator
// can run: copy-outs run in eviction order and restores in back-access order, and a region is
// recomputed only from sources that are on the device at its back-access (no chains).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "policy/analysis.h"
#include "policy/plan.h"

namespace gswap::policy {

struct ExactOptions {
  double time_limit_s = 20;
  bool allow_recompute = true;
  std::size_t max_launches = 80;  // larger iterations are refused (the model grows as n^2)
};

struct ExactResult {
  bool solved = false;   // a schedule was found
  bool optimal = false;  // and proven optimal within the time limit
  std::string reason;    // why not solved
  double step_us = 0;    // the model's optimal step
  double bound_us = 0;   // the solver's proven lower bound on the model's step
  Plan plan;             // the schedule as a plan the simulator runs
  std::size_t binaries = 0, rows = 0;
};

ExactResult solve_exact(const Analysis& a, std::uint64_t budget, const ExactOptions& options = {});

}  // namespace gswap::policy
