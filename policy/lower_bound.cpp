// lower_bound.cpp: the bound of README.md "Lower bound". For every launch i whose live bytes L_i
// exceed the budget B, at least E_i = L_i - B bytes of regions live at i but not touched by i are
// off the device while i runs. Classify those regions at i:
//   free  — recomputable, or not yet written in this iteration: leaving costs no traffic
//           (recomputation is treated as free, which only lowers the bound);
//   A     — written before i, not read after: must be copied out before i starts;
//   B     — not written before i in this iteration (state carried from the last one), read after
//           i: must be copied in after i ends;
//   C     — written before and read after: both.
// With X = max(0, E_i - free), copy-out bytes are at least max(0, X - |B|) and copy-in bytes at
// least max(0, X - |A|), each on its own serial engine, so
//   step >= max(C_before_i, out/bw_d2h) + dur_i + max(C_after_i, in/bw_h2d)
// where C_before/C_after are the compute of i's own stream before and after i.
#include "policy/lower_bound.h"

#include <algorithm>
#include <unordered_map>

namespace gswap::policy {

LowerBound lower_bound(const Analysis& a, std::uint64_t budget) {
  LowerBound lb;
  const Trace& t = *a.trace;
  std::unordered_map<std::uint32_t, double> stream_total;
  for (const Launch& l : t.launches) stream_total[l.stream] += l.dur_us;
  for (auto& [s, c] : stream_total) lb.compute_us = std::max(lb.compute_us, c);
  lb.bound_us = lb.compute_us;
  if (a.peak_bytes <= budget || a.n == 0) return lb;

  // Per-launch bytes of each class, built with difference arrays over every region's gaps.
  const std::size_t n = a.n;
  std::vector<std::int64_t> dfree(n + 1, 0), dA(n + 1, 0), dB(n + 1, 0), dC(n + 1, 0);
  auto add = [&](std::vector<std::int64_t>& d, std::size_t from, std::size_t to, std::int64_t b) {
    if (from > to || from >= n) return;  // inclusive range [from, to]
    d[from] += b;
    d[std::min(to, n - 1) + 1] -= b;
  };
  for (std::size_t r = 0; r < t.regions.size(); ++r) {
    if (a.first_live[r] > a.last_live[r]) continue;
    const auto b = static_cast<std::int64_t>(t.regions[r].bytes);
    const bool recomputable = t.regions[r].recompute.has_value();
    const auto& acc = a.accesses[r];
    const std::size_t lo = a.first_live[r], hi = a.last_live[r];
    if (acc.empty()) {
      add(dfree, lo, hi, b);
      continue;
    }
    // Before the first access: free if fresh this iteration, B if carried over.
    if (acc.front() > lo) {
      auto& d = (recomputable || !a.live_at_start[r]) ? dfree : dB;
      add(d, lo, acc.front() - 1, b);
    }
    for (std::size_t k = 0; k + 1 < acc.size(); ++k) {
      if (acc[k + 1] > acc[k] + 1) add(recomputable ? dfree : dC, acc[k] + 1, acc[k + 1] - 1, b);
    }
    if (acc.back() < hi) add(recomputable ? dfree : dA, acc.back() + 1, hi, b);
  }
  // Same-stream compute before each launch.
  std::unordered_map<std::uint32_t, double> before;
  std::int64_t f = 0, A = 0, B = 0, C = 0;
  const double bw_out = t.device.d2h_bytes_per_s / 1e6, bw_in = t.device.h2d_bytes_per_s / 1e6;
  for (std::size_t i = 0; i < n; ++i) {
    f += dfree[i], A += dA[i], B += dB[i], C += dC[i];
    const Launch& l = t.launches[i];
    double& cb = before[l.stream];
    const double c_before = cb, c_after = stream_total[l.stream] - cb - l.dur_us;
    cb += l.dur_us;
    const std::int64_t excess =
        static_cast<std::int64_t>(a.live_bytes[i]) - static_cast<std::int64_t>(budget);
    if (excess <= 0) continue;
    const std::int64_t x = std::max<std::int64_t>(0, excess - f);
    const double out = static_cast<double>(std::max<std::int64_t>(0, x - B));
    const double in = static_cast<double>(std::max<std::int64_t>(0, x - A));
    const double bound = std::max(c_before, bw_out > 0 ? out / bw_out : 0) + l.dur_us +
                         std::max(c_after, bw_in > 0 ? in / bw_in : 0);
    if (bound > lb.traffic_us) {
      lb.traffic_us = bound;
      lb.tightest_launch = i;
    }
  }
  lb.bound_us = std::max(lb.compute_us, lb.traffic_us);
  return lb;
}

}  // namespace gswap::policy
