// plan.h: what a planner hands to the simulator and, through the daemon, to the preload library.
//
// A plan is a list of evictions. Each says, for one region and one gap between two of its
// accesses: evict it after access `evict_after` (by swapping it to host or by dropping it to be
// recomputed), start bringing it back before launch `trigger` (a prefetch), because launch
// `back_access` needs it. Positions are indices into Trace::launches of the iteration the plan was
// made for (the daemon maps them to the next iteration through stable region identity).
//
// A "wrap" entry (back_access <= evict_after) evicts a region after its last access in the
// iteration and brings it back for its first access in the next one, so the region starts each
// iteration on the host. Weights and optimiser state are planned this way. A region accessed once
// per iteration (an Adam moment) wraps with back_access == evict_after.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "policy/trace.h"

namespace gswap::policy {

inline constexpr std::size_t kNoLaunch = std::numeric_limits<std::size_t>::max();

enum class EvictKind : std::uint8_t {
  kSwap,       // device-to-host copy after the access, host-to-device copy from the trigger
  kRecompute,  // dropped after the access, recomputed from its sources just before back_access
};

struct PlanEntry {
  RegionId region = 0;
  EvictKind kind = EvictKind::kSwap;
  std::size_t evict_after = 0;       // the access after which the region is evicted
  std::size_t evict_at = kNoLaunch;  // issue the eviction just before this launch instead of
                                     // right after evict_after (on-demand releases)
  std::size_t trigger = kNoLaunch;   // start the swap-in before this launch; kNoLaunch: on demand
  std::size_t back_access = kNoLaunch;  // the next access; kNoLaunch: not needed again
  double swap_in_us = 0;                // SwapTime of the swap-in, which the feedback rule scales
};

// Whether the entry's eviction is issued at evict_at (a launch of the iteration of n launches
// after its access) rather than right after evict_after. The simulator, the feedback rule and the
// plan gswapd publishes all read evict_at through this.
inline bool evicts_at(const PlanEntry& e, std::size_t n) {
  return e.evict_at != kNoLaunch && e.evict_at > e.evict_after && e.evict_at < n;
}

// The first launch that runs with the entry's eviction issued.
inline std::size_t first_launch_evicted(const PlanEntry& e, std::size_t n) {
  return evicts_at(e, n) ? e.evict_at : e.evict_after + 1;
}

// True when the entry's gap runs past the end of the iteration into the next one.
inline bool is_wrap(const PlanEntry& e) {
  return e.back_access != kNoLaunch && e.back_access <= e.evict_after;
}

struct Plan {
  std::string policy;
  std::vector<PlanEntry> entries;
  // False when no plan can fit the budget (one launch's working set exceeds it); `reason` says
  // which launch. The simulator refuses such budgets too.
  bool feasible = true;
  std::string reason;
  // The planner's own verdict: true when its memory model has every launch within the budget.
  // The memory model is the simulator's (a region is off the device from the launch after its
  // eviction up to the launch before its restore is issued; the simulator stalls for a copy-out
  // rather than evict on demand), so a plan that fits runs with no demand eviction. False with a
  // feasible budget means the planner ran out of evictions; `reason` then says so.
  bool fits = true;
};

}  // namespace gswap::policy
