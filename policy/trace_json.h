// trace_json.h: reading and writing the versioned JSON trace format ("gswap-trace", version 1).
// This is the I/O edge of policy/; the planners never see JSON.
#pragma once

#include <string>
#include <string_view>

#include "policy/trace.h"

namespace gswap::policy {

inline constexpr const char* kTraceFormat = "gswap-trace";
inline constexpr int kTraceVersion = 1;

// Parses a trace. On error returns false and sets *error to a message that starts with the JSON
// path of the offending field, e.g. "launches[3].regions[1]: unknown region 99".
bool parse_trace_json(std::string_view text, Trace* out, std::string* error);

// Serialises a trace; parse_trace_json(write_trace_json(t)) gives back t.
std::string write_trace_json(const Trace& trace);

}  // namespace gswap::policy
