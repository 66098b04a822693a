// memory_plot.h: the memory plot of one iteration as an SVG image (`gswapctl plot`): live bytes,
// resident bytes and the budget over time, with the swap traffic per time bucket in a panel
// below. Written with fmt alone; axes carry units (us/ms/s, KiB/MiB/GiB), the figure a legend
// and a title.
//
// Elements a reader (or a test) can find by id: polyline#live, polyline#resident, line#budget,
// g#swap-out and g#swap-in (one rect per bucket); tick labels are text.ytick / text.xtick next to
// line.ytick / line.xtick at the same coordinate.
#pragma once

#include <cstdint>
#include <string>

#include "policy/sim_timeline.h"

namespace gswap::policy {

struct MemoryPlot {
  std::string title, subtitle;
  MemoryCurves curves;
  std::uint64_t budget = 0;
  SwapTraffic traffic;
};

// Throws std::invalid_argument when the curves' duration or the traffic's bucket is not finite.
// Each axis draws at most 64 ticks, whatever its range.
std::string render_memory_plot_svg(const MemoryPlot& p);

// Tick helpers (exposed for tests): a 1-2-5 step giving at most `max_ticks` ticks up to `max`.
double nice_step(double max, int max_ticks);
// "512 KiB", "1.5 GiB"; "250 us", "1.5 ms".
std::string bytes_label(double bytes, double unit, const char* unit_name);

}  // namespace gswap::policy
