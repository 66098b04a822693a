// hook_profile.cpp: GSWAP_HOOK_PROFILE (see hook_profile.h).
#include "interpose/hook_profile.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "interpose/lookup.h"

namespace gswap::interpose::hook_profile {

std::atomic<bool> g_on{false};
Counter g_counters[kMaxHooks];

void enable(bool on) {
  g_on.store(on, std::memory_order_relaxed);
}

void after_fork_child() {
  enable(false);
  for (Counter& c : g_counters) {
    c.calls.store(0, std::memory_order_relaxed);
    c.ns.store(0, std::memory_order_relaxed);
  }
}

std::size_t format_report(char* out, std::size_t size, std::size_t top) {
  if (size == 0) return 0;
  out[0] = '\0';
  if (!on()) return 0;
  struct Row {
    std::size_t hook;
    std::uint64_t calls, ns;
  };
  Row rows[kMaxHooks];
  std::size_t n = 0;
  std::uint64_t calls = 0, ns = 0;
  for (std::size_t i = 0; i < kNumHooks && i < kMaxHooks; ++i) {
    Row r{i, g_counters[i].calls.load(std::memory_order_relaxed),
          g_counters[i].ns.load(std::memory_order_relaxed)};
    if (r.calls == 0) continue;
    rows[n++] = r;
    calls += r.calls;
    ns += r.ns;
  }
  if (n == 0) return 0;
  std::sort(rows, rows + n, [](const Row& a, const Row& b) {
    return a.ns != b.ns ? a.ns > b.ns : a.hook < b.hook;
  });
  std::size_t len = 0;
  auto put = [&](int w) {
    if (w > 0) len = std::min(size - 1, len + static_cast<std::size_t>(w));
  };
  put(std::snprintf(out, size,
                    "gswap hook profile: %llu driver calls through libgswap since cuInit, %.3f ms "
                    "in them (gswap's work and the driver's); by time:\n",
                    (unsigned long long)calls, ns / 1e6));
  for (std::size_t k = 0; k < n && k < top && len < size - 1; ++k) {
    const Row& r = rows[k];
    put(std::snprintf(out + len, size - len, "  %-28s %10llu calls %12.3f ms %10.0f ns each\n",
                      kHooks[r.hook].symbol, (unsigned long long)r.calls, r.ns / 1e6,
                      static_cast<double>(r.ns) / static_cast<double>(r.calls)));
  }
  return len;
}

void report() {
  char text[4096];
  std::size_t n = format_report(text, sizeof text, 16);
  if (n == 0) return;
  ssize_t w = ::write(2, text, n);
  (void)w;
}

}  // namespace gswap::interpose::hook_profile
