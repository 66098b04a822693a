// recompute_check.h: the last step of every planner that drops regions: a drop stays a drop only
// where its recomputation can run when the region is needed.
#pragma once

#include <cstddef>

#include "policy/analysis.h"
#include "policy/plan.h"

namespace gswap::policy {

// Turns into swaps the recompute entries whose recomputation could not run, and returns how many
// it changed. A dropped region is recomputed from its sources whenever it is needed while
// dropped: at its back-access, at the first use of the next iteration's instance when it is
// dropped for good (the simulator's rule), and whenever a region recomputed from it is recomputed
// meanwhile. Its sources must then be allocated and on the device, on the host, or dropped but
// recomputable there in turn. A source not allocated then (not yet, or freed), or a cycle, makes
// the entry that needs it a swap (its data then survives on the host and comes back from there);
// a source dropped where it cannot be recomputed has its own drop made a swap. A planner that
// dropped a region for one need can overlook another (a dependent's recomputation in the same
// launch, or the next iteration's first use), and such a plan would read data it does not have.
std::size_t make_recomputations_executable(const Analysis& a, Plan& plan);

}  // namespace gswap::policy
