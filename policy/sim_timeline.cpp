// sim_timeline.cpp: simulator events as timeline tracks and memory curves (see sim_timeline.h).
#include "policy/sim_timeline.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace gswap::policy {
namespace {

// The memory deltas in time order (stable: simultaneous changes keep the order they happened in).
std::vector<SimEvents::Memory> sorted_memory(const SimEvents& ev) {
  std::vector<SimEvents::Memory> m = ev.memory;
  std::stable_sort(m.begin(), m.end(), [](const SimEvents::Memory& x, const SimEvents::Memory& y) {
    return x.time_us < y.time_us;
  });
  return m;
}

std::uint64_t clamp_bytes(std::int64_t v) {
  return v < 0 ? 0 : static_cast<std::uint64_t>(v);
}

}  // namespace

chrome::Timeline simulated_timeline(const Analysis& a, const Plan& plan, const SimEvents& ev,
                                    std::uint64_t budget) {
  const Trace& t = *a.trace;
  chrome::Timeline out;
  out.producer = "simulator";
  out.other = {{"budget_bytes", budget}, {"policy", plan.policy}};
  for (const Launch& l : t.launches) out.streams.push_back(l.stream);
  for (std::size_t i = 0; i < ev.launches.size() && i < t.launches.size(); ++i) {
    const Launch& l = t.launches[i];
    const SimEvents::Launch& s = ev.launches[i];
    out.kernels.push_back({l.stream, l.kernel, l.seq, s.start_us, s.end_us - s.start_us});
    if (s.stall_us > 0) {
      chrome::DeviceWait w;
      w.start_us = s.start_us - s.stall_us;
      w.dur_us = s.stall_us;
      w.kernel = l.kernel;
      if (s.waited_for != kNoLaunch) {
        w.region = t.regions[s.waited_for].id;
        w.what = fmt::format("region {}", *w.region);
      } else {
        w.what = "memory";
      }
      out.device_waits.push_back(std::move(w));
    }
  }
  for (const SimEvents::Copy& c : ev.copies) {
    chrome::Copy x;
    x.to_device = c.to_device;
    x.region = t.regions[c.region].id;
    x.bytes = t.regions[c.region].bytes;
    x.start_us = c.start_us;
    x.end_us = c.end_us;
    x.planned = c.entry != kNoLaunch;
    if (c.to_device && x.planned) x.late = c.late;
    out.copies.push_back(std::move(x));
  }
  for (const SimEvents::Recompute& r : ev.recomputes)
    out.recomputes.push_back(
        {t.regions[r.region].id, "", t.regions[r.region].bytes, r.start_us, r.end_us, false});
  std::int64_t resident = static_cast<std::int64_t>(ev.resident_at_start);
  std::int64_t host = static_cast<std::int64_t>(ev.host_at_start);
  out.counters.push_back({0, clamp_bytes(resident), budget, clamp_bytes(host)});
  for (const SimEvents::Memory& m : sorted_memory(ev)) {
    resident += m.device_delta;
    host += m.host_delta;
    chrome::Counters c{std::max(0.0, m.time_us), clamp_bytes(resident), budget, clamp_bytes(host)};
    if (out.counters.back().ts_us == c.ts_us)
      out.counters.back() = c;  // one sample per instant: the state after every change then
    else
      out.counters.push_back(c);
  }
  out.iterations.push_back(0);
  return out;
}

MemoryCurves memory_curves(const Analysis& a, const SimEvents& ev, double duration_us) {
  MemoryCurves c;
  c.duration_us = duration_us;
  for (std::size_t i = 0; i < a.n && i < ev.launches.size(); ++i) {
    const double ts = i == 0 ? 0 : ev.launches[i].start_us;
    if (!c.live.empty() && c.live.back().first == ts)
      c.live.back().second = std::max(c.live.back().second, a.live_bytes[i]);
    else
      c.live.emplace_back(ts, a.live_bytes[i]);
    c.peak_live = std::max(c.peak_live, a.live_bytes[i]);
  }
  std::int64_t resident = static_cast<std::int64_t>(ev.resident_at_start);
  c.resident.emplace_back(0, clamp_bytes(resident));
  for (const SimEvents::Memory& m : sorted_memory(ev)) {
    if (m.device_delta == 0) continue;
    resident += m.device_delta;
    const double ts = std::max(0.0, m.time_us);
    if (c.resident.back().first == ts)
      c.resident.back().second = clamp_bytes(resident);
    else
      c.resident.emplace_back(ts, clamp_bytes(resident));
  }
  for (const auto& p : c.resident) c.peak_resident = std::max(c.peak_resident, p.second);
  return c;
}

SwapTraffic swap_traffic(const Analysis& a, const SimEvents& ev, double duration_us,
                         std::size_t buckets) {
  SwapTraffic s;
  buckets = std::max<std::size_t>(1, buckets);
  s.bucket_us = duration_us > 0 ? duration_us / static_cast<double>(buckets) : 1;
  s.out_bytes.assign(buckets, 0);
  s.in_bytes.assign(buckets, 0);
  // The bucket holding time t, the last one for t at or past the end (or not finite): converting
  // a double beyond size_t's range would be undefined.
  const double nb = static_cast<double>(buckets);
  auto bucket_of = [&](double t) {
    const double k = std::max(0.0, t) / s.bucket_us;
    return k < nb ? static_cast<std::size_t>(k) : buckets - 1;
  };
  for (const SimEvents::Copy& c : ev.copies) {
    const double bytes = static_cast<double>(a.trace->regions[c.region].bytes);
    std::vector<double>& to = c.to_device ? s.in_bytes : s.out_bytes;
    const double len = c.end_us - c.start_us;
    if (len <= 0) {
      to[bucket_of(c.start_us)] += bytes;
      continue;
    }
    // Spread over the buckets the copy overlaps; a copy running past the end counts in the last
    // (so the loop never runs past the buckets, however long the copy).
    const std::size_t first = bucket_of(c.start_us);
    const std::size_t last = bucket_of(c.end_us);
    for (std::size_t k = first; k <= last; ++k) {
      const double lo = std::max(c.start_us, static_cast<double>(k) * s.bucket_us);
      const double hi = k == buckets - 1
                            ? c.end_us
                            : std::min(c.end_us, static_cast<double>(k + 1) * s.bucket_us);
      if (hi <= lo) continue;
      to[k] += bytes * (hi - lo) / len;
    }
  }
  return s;
}

}  // namespace gswap::policy
