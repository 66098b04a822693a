// lower_bound.h: a provable lower bound on the step time any plan can reach in the simulator at a
// given budget. The derivation is in policy/README.md ("Lower bound").
#pragma once

#include <cstdint>

#include "policy/analysis.h"

namespace gswap::policy {

struct LowerBound {
  double bound_us = 0;    // max of the two below
  double compute_us = 0;  // busiest stream's compute, or the ideal step when longer
  double traffic_us = 0;  // the link-traffic bound at the tightest launch
  std::size_t tightest_launch = 0;
};

LowerBound lower_bound(const Analysis& a, std::uint64_t budget);

}  // namespace gswap::policy
