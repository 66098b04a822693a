// capuchin.h: the Capuchin hybrid planner (swap first while hidden, then swap vs. recompute by
// MSPS with Algorithm 2's source substitution) and its 5% feedback rule. The design brief's
// "Policy, precisely" section is the specification; README.md explains the choices made here.
#pragma once

#include <atomic>

#include <cstdint>
#include <functional>
#include <span>

#include "policy/analysis.h"
#include "policy/plan.h"

namespace gswap::policy {

struct CapuchinOptions {
  bool allow_swap = true;
  bool allow_recompute = true;
  // Checked as the planner chooses evictions; once set, planning stops with an infeasible plan
  // whose reason says it was cancelled (gswapd: the client left, or the daemon stops).
  const std::atomic<bool>* cancel = nullptr;
};

// One swap candidate's Capuchin arithmetic on the ideal timeline (exposed for tests).
struct SwapTiming {
  double swap_out_us = 0, swap_in_us = 0;  // SwapTime per direction
  double swap_out_end_us = 0;              // t_e + SwapTime(d2h)
  double swap_in_start_us = 0;             // t_b - SwapTime(h2d), the ideal SwapInStart
  double free_time_us = 0;                 // FT = SwapInStart - SwapOutEnd
  std::size_t in_trigger = 0;              // latest launch starting no later than SwapInStart
};
// Eviction after access e, back-access b (b <= e: the gap wraps into the next iteration).
SwapTiming swap_timing(const Analysis& a, std::uint64_t bytes, std::size_t e, std::size_t b);

Plan plan_capuchin(const Analysis& a, std::uint64_t budget, const CapuchinOptions& options = {});

// The feedback rule: every swap entry whose swap-in was still in flight at its back-access
// (lateness_us[k] > 0, as SimResult::lateness_us reports) starts 5% of its SwapTime earlier next
// iteration: its trigger moves back to the latest launch starting no later than the old trigger's
// start minus 0.05 * swap_in_us, never before the eviction.
Plan apply_feedback(const Analysis& a, const Plan& plan, std::span<const double> lateness_us);

// The feedback rule where the simulator agrees with it (what gswapd applies to measured
// lateness). The late entries' triggers move as apply_feedback says, all together when the moved
// plan simulates (at `budget`) no slower than `plan` and with no more demand evictions; else one
// entry at a time on the same test, in entry order, until `out_of_time` says stop (entries not
// tried then are neither moved nor refused). A prefetch
// started where it cannot fit beside what the next launches allocate is evicted again by them
// before its back-access: the lateness it saves costs a copy each way and a stall.
struct CheckedFeedback {
  Plan plan;
  std::size_t moved = 0;    // entries whose trigger moved earlier
  std::size_t refused = 0;  // late entries left where they are: nowhere earlier, or costlier
  std::vector<bool> refused_entry;  // per entry of plan
};
CheckedFeedback apply_feedback_checked(const Analysis& a, const Plan& plan,
                                       std::span<const double> lateness_us, std::uint64_t budget,
                                       const std::function<bool()>& out_of_time);

}  // namespace gswap::policy
