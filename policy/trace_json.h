// trace_json.h: reading and writing the versioned JSON trace format ("gswap-trace", version 1).
// This is the I/O edge of policy/; the planners never see JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "policy/plan.h"
#include "policy/trace.h"

namespace gswap::policy {

inline constexpr const char* kTraceFormat = "gswap-trace";
inline constexpr int kTraceVersion = 1;

// The most a region may hold (1 PiB), and all regions together (1 EiB): sums of live bytes then
// never overflow, whatever a trace says.
inline constexpr std::uint64_t kMaxRegionBytes = std::uint64_t{1} << 50;
inline constexpr std::uint64_t kMaxTotalRegionBytes = std::uint64_t{1} << 60;

// The longest a launch's start_us or dur_us, or a recomputation's cost_us, may be (1e12 us, about
// 11.6 days), and the slowest a copy bandwidth may be (1 byte/s): every time derived from a trace
// (the ideal timeline, a swap's copy, a simulated step) is then a finite number of microseconds.
inline constexpr double kMaxTraceTimeUs = 1e12;
inline constexpr double kMinBytesPerS = 1.0;

// Parses a trace. On error returns false and sets *error to a message that starts with the JSON
// path of the offending field, e.g. "launches[3].regions[1]: unknown region 99". Besides types and
// ranges it checks that sizes, times and bandwidths stay within the limits above and that every
// launch touches regions only while they are allocated (alloc_seq <= seq < free_seq). It never
// throws on bad text: JSON that nlohmann cannot read (a number that overflows a double included)
// gives "$: not valid JSON: ...".
bool parse_trace_json(std::string_view text, Trace* out, std::string* error);

// Serialises a trace; parse_trace_json(write_trace_json(t)) gives back t.
std::string write_trace_json(const Trace& trace);

// A plan ("gswap-plan", version 1: what gswapd follows, `gswapctl trace dump --plan-out`):
//   {"format": "gswap-plan", "version": 1, "policy": "capuchin", "entries": [
//     {"region": 4, "kind": "swap" | "recompute", "evict_after": 12, "evict_at": null,
//      "trigger": 9, "back_access": 13, "swap_in_us": 210.5}, ...]}
// Positions are launch indexes of the trace it was made for, null for kNoLaunch. Parsing checks
// types and, given that trace, that every region is one of its regions and every position one of
// its launches; errors name the JSON path as parse_trace_json's do.
inline constexpr const char* kPlanFormat = "gswap-plan";
inline constexpr int kPlanVersion = 1;
bool parse_plan_json(std::string_view text, const Trace& trace, Plan* out, std::string* error);
std::string write_plan_json(const Plan& plan);

}  // namespace gswap::policy
