// sim_timeline.h: a simulated plan (simulator.h's recorded events) as gswap's timeline and as the
// curves of the memory plot, so a prediction reads like a measurement.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "policy/analysis.h"
#include "policy/chrome_trace.h"
#include "policy/plan.h"
#include "policy/simulator.h"

namespace gswap::policy {

// The simulated iteration on the tracks of chrome_trace.h: kernels on their streams, planned and
// on-demand swap-outs and restores (late or not), launches that waited (on the "streams waiting
// for restores" track: the simulator's compute waits on the device), recomputations, and the
// memory counter (resident bytes, the budget, and the bytes held on the host as pinned host
// bytes: the simulator assumes every host copy is pinned). Host threads are not simulated.
chrome::Timeline simulated_timeline(const Analysis& a, const Plan& plan, const SimEvents& ev,
                                    std::uint64_t budget);

// Memory over the simulated iteration, as step curves: (time in us, bytes), each value holding
// until the next point.
struct MemoryCurves {
  double duration_us = 0;
  std::vector<std::pair<double, std::uint64_t>> live;      // allocated bytes, launch by launch
  std::vector<std::pair<double, std::uint64_t>> resident;  // on the device under the plan
  std::uint64_t peak_live = 0, peak_resident = 0;
};
MemoryCurves memory_curves(const Analysis& a, const SimEvents& ev, double duration_us);

// Bytes copied in [k * bucket_us, (k + 1) * bucket_us) per direction, each copy spread evenly over
// its duration.
struct SwapTraffic {
  double bucket_us = 0;
  std::vector<double> out_bytes, in_bytes;
};
SwapTraffic swap_traffic(const Analysis& a, const SimEvents& ev, double duration_us,
                         std::size_t buckets);

}  // namespace gswap::policy
