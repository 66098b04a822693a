// iteration.h: finding the repeating training iteration in a launch stream without markers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "policy/trace.h"

namespace gswap::policy {

struct PeriodOptions {
  std::size_t min_period = 4;      // shortest iteration considered, in symbols
  std::size_t max_period = 65536;  // longest
  double min_match = 0.9;          // fraction of aligned symbols that must agree (tolerates noise)
  std::size_t min_repeats = 2;     // whole periods that must be seen
};

struct PeriodResult {
  std::size_t period = 0;  // iteration length, in symbols
  std::size_t phase = 0;   // index of the first symbol of the last complete iteration
  double match = 0;        // fraction of aligned symbols that agreed
};

// `symbols` is one value per event: a hash of the kernel identity, or of an allocation's size for
// allocation events. Returns the period, or nothing when no period meets the options.
std::optional<PeriodResult> detect_iteration_period(std::span<const std::uint64_t> symbols,
                                                    const PeriodOptions& options = {});

// The iteration a trace's planners and simulator work on: with iteration marks, the launches of
// the last one that selects any (its first_seq to last_seq) and the regions live during it, which
// keep their allocation and free positions (allocated before it: live at its start); otherwise
// (no mark, or none selecting a launch) the trace as it is. `none_selects`, when given, is set
// to whether the trace has marks and none of them selects a launch.
Trace last_marked_iteration(const Trace& trace, bool* none_selects = nullptr);

}  // namespace gswap::policy
