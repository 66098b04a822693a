// lower_bound.h: a provable lower bound on the step time any plan can reach in the simulator at a
// given budget. The derivation is in policy/README.md ("Lower bound").
#pragma once

#include <cstdint>

#include "policy/analysis.h"

namespace gswap::policy {

struct LowerBound {
  double bound_us = 0;    // max of the three below
  double compute_us = 0;  // busiest stream's compute, or the ideal step when longer
  double traffic_us = 0;  // the link-traffic bound at the tightest launch
  // The copies every launch over the budget needs, counted once over the whole iteration, on
  // each direction's engine (policy/README.md, "Traffic over the whole iteration").
  double covering_us = 0;
  std::size_t tightest_launch = 0;
  std::size_t refined_launches = 0;  // launches the refinement ran at (each visits every region)
};

// max_visits: the refinements and the recomputation items each visit regions at every launch
// over the budget; past a sixteenth of this many visits (about 100-200 ns each) they fall back
// to coarser terms that are still a bound, the refinements running only at the launches with
// the highest values, on that sixteenth (policy/README.md). Tests lower it to exercise the
// fallbacks.
LowerBound lower_bound(const Analysis& a, std::uint64_t budget, double max_visits = 5e7);

}  // namespace gswap::policy
