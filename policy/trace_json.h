// trace_json.h: reading and writing the versioned JSON trace format ("gswap-trace", version 1).
// This is the I/O edge of policy/; the planners never see JSON.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "policy/trace.h"

namespace gswap::policy {

inline constexpr const char* kTraceFormat = "gswap-trace";
inline constexpr int kTraceVersion = 1;

// The most a region may hold (1 PiB), and all regions together (1 EiB): sums of live bytes then
// never overflow, whatever a trace says.
inline constexpr std::uint64_t kMaxRegionBytes = std::uint64_t{1} << 50;
inline constexpr std::uint64_t kMaxTotalRegionBytes = std::uint64_t{1} << 60;

// Parses a trace. On error returns false and sets *error to a message that starts with the JSON
// path of the offending field, e.g. "launches[3].regions[1]: unknown region 99". Besides types and
// ranges it checks that sizes stay within the limits above and that every launch touches regions
// only while they are allocated (alloc_seq <= seq < free_seq).
bool parse_trace_json(std::string_view text, Trace* out, std::string* error);

// Serialises a trace; parse_trace_json(write_trace_json(t)) gives back t.
std::string write_trace_json(const Trace& trace);

}  // namespace gswap::policy
