// timeline_dump.h: a client's recent past as gswap's timeline (policy/chrome_trace.h), for
// `gswapctl trace dump --timeline`: what gswapd keeps of it (client.h), on the device's time axis.
#pragma once

#include <cstdint>

#include "daemon/client.h"
#include "policy/chrome_trace.h"

namespace gswap::daemon {

// Kernels of the launch window that were timed, on their streams; the swap copies the library
// completed (planned or on demand), restores marked late where the kernel timings show it (below);
// host waits on the thread that waited; recomputations; the memory counters the daemon sampled.
//
// The library reports no lateness per copy, so it is read off the kernel timings: a restore is
// late when the first timed kernel that uses the region starts as the copy ends (within 2% of the
// copy or 20 us) after its stream stood idle; that idle time goes on the "streams waiting for
// restores" track. Restores followed by untimed kernels (guided iterations are timed one in
// measure_every) say nothing about lateness.
policy::chrome::Timeline client_timeline(const Client& c);

}  // namespace gswap::daemon
