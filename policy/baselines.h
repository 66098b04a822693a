// baselines.h: the plans gswap's planner is compared against, and DELTA, the online fallback for
// workloads whose iterations do not repeat.
#pragma once

#include <cstdint>

#include "policy/analysis.h"
#include "policy/plan.h"

namespace gswap::policy {

// Passive LRU on demand: no plan at all. The simulator evicts the least recently used region
// when an allocation or restore does not fit, and restores on access, stalling compute.
Plan plan_lru(const Analysis& a, std::uint64_t budget);

// vDNN-style: every evictable region that is used both before and after the forward/backward
// turn (the launch of peak live bytes) is swapped out after its last access before the turn and
// prefetched one launch ahead of its first access after it. Budget-oblivious, like vDNN.
Plan plan_vdnn(const Analysis& a, std::uint64_t budget);

// Recompute-only: the Capuchin planner restricted to recomputation (MSPS order with Algorithm 2
// substitution) on regions that carry recompute information.
Plan plan_recompute_only(const Analysis& a, std::uint64_t budget);

// DELTA (online): replays the launches with a resident set. When more than 3/4 of the budget is
// in use after a launch, it releases the resident regions with the lowest 1/(bytes x staleness)
// that the next launch does not need, recomputing those whose cost is at most bytes/bandwidth and
// offloading the rest. Offloaded regions are prefetched in predicted next-use order (soonest
// first, not FIFO) while memory stays under the release threshold. Prediction is the previous
// iteration's access pattern, which is the trace itself.
Plan plan_delta(const Analysis& a, std::uint64_t budget);

}  // namespace gswap::policy
