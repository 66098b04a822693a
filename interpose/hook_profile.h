// hook_profile.h: GSWAP_HOOK_PROFILE, the calls made through libgswap's exported driver entry
// points and the time spent in them, reported at exit.
//
// Off by default; off, a wrapper pays one relaxed load and a branch. On (set at cuInit, so calls
// before it are not counted), each wrapper reads the monotonic clock (vDSO) around its hook and
// adds to the hook's two counters. The time is the whole call's: gswap's own work and the
// driver's. Compared with the same figures of a run without gswap (a profiler's API trace), it
// says which calls gswap makes slower and by how much.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gswap::interpose::hook_profile {

constexpr std::size_t kMaxHooks = 256;  // wrappers.cpp checks hooks.def fits

struct Counter {
  std::atomic<std::uint64_t> calls{0}, ns{0};
};

extern std::atomic<bool> g_on;
extern Counter g_counters[kMaxHooks];

inline bool on() {
  return g_on.load(std::memory_order_relaxed);
}
inline void add(std::size_t hook, std::uint64_t ns) {
  g_counters[hook].calls.fetch_add(1, std::memory_order_relaxed);
  g_counters[hook].ns.fetch_add(ns, std::memory_order_relaxed);
}

void enable(bool on);

// In a child after fork: off, counters cleared (the child counts from its own cuInit).
void after_fork_child();

// The report, several lines: the total, then the hooks that took the most time (at most `top`),
// each with its calls, total and mean time. Empty (0) when profiling is off or nothing was
// counted. Returns the length written (at most size - 1).
std::size_t format_report(char* out, std::size_t size, std::size_t top);

// Writes the report to standard error in one write.
void report();

}  // namespace gswap::interpose::hook_profile
