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

// Traffic-minimising (Belady's MIN on the trace): replays the launches, and whenever the resident
// bytes exceed the budget, evicts the resident regions the next launch does not touch whose next
// access is furthest away (dead data first, then regions next needed in the next iteration).
// Each is restored as early as the planned memory allows, soonest back-access first. It moves
// the fewest bytes, which is what counts when the link is the bottleneck; the search seeds with it.
Plan plan_belady(const Analysis& a, std::uint64_t budget);

}  // namespace gswap::policy
