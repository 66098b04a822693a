// test_traces.h: small hand-built and random traces shared by the policy unit tests.
#pragma once

#include <algorithm>
#include <random>

#include "policy/plan.h"
#include "policy/trace.h"

namespace gswap::policy::testing {

inline constexpr std::uint64_t kMiB = 1ull << 20;

// A single-stream trace of `n` launches of `dur_us` each, with a link of `bytes_per_s`.
inline Trace empty_trace(std::size_t n, double dur_us, double bytes_per_s) {
  Trace t;
  t.device = {80ull << 30, bytes_per_s, bytes_per_s};
  for (std::size_t i = 0; i < n; ++i)
    t.launches.push_back({i, i * dur_us, dur_us, 0, {}, "k" + std::to_string(i)});
  return t;
}

// Adds a region live from launch `alloc` to launch `last` (inclusive) or to the end (last < 0),
// touched by the listed launches.
inline RegionId add_region(Trace& t, std::uint64_t bytes, Seq alloc, long last,
                           std::initializer_list<std::size_t> touches) {
  Region r;
  r.id = t.regions.size() + 1;
  r.bytes = bytes;
  r.alloc_seq = alloc;
  if (last >= 0) r.free_seq = static_cast<Seq>(last + 1);
  t.regions.push_back(r);
  for (std::size_t i : touches) t.launches[i].regions.push_back(r.id);
  return r.id;
}

// A random trace: `n` launches on one or two streams, regions of 2-8 MiB with random lifetimes
// and accesses, some recomputable from earlier regions.
inline Trace random_trace(std::mt19937_64& rng) {
  std::uniform_int_distribution<std::size_t> nl(15, 50);
  const std::size_t n = nl(rng);
  const bool two_streams = rng() % 3 == 0;
  Trace t;
  t.device = {80ull << 30, 2e9 + (rng() % 50) * 1e9, 2e9 + (rng() % 50) * 1e9};
  for (std::size_t i = 0; i < n; ++i) {
    t.launches.push_back({i,
                          0,
                          1.0 + static_cast<double>(rng() % 20),
                          two_streams ? static_cast<std::uint32_t>(rng() % 2) : 0u,
                          {},
                          "k" + std::to_string(rng() % 6)});
  }
  const std::size_t nr = 4 + rng() % 12;
  for (std::size_t k = 0; k < nr; ++k) {
    Region r;
    r.id = k + 1;
    r.bytes = (2 + rng() % 7) * kMiB;
    const bool persistent = rng() % 4 == 0;
    std::size_t a = persistent ? 0 : rng() % n;
    std::size_t b = persistent ? n - 1 : a + rng() % (n - a);
    r.alloc_seq = a;
    if (!persistent) r.free_seq = b + 1;
    const std::size_t touches = 1 + rng() % 5;
    for (std::size_t j = 0; j < touches; ++j) {
      std::size_t i = a + rng() % (b - a + 1);
      t.launches[i].regions.push_back(r.id);
    }
    t.launches[a].regions.push_back(r.id);  // written when allocated
    if (k > 0 && rng() % 2 == 0) {
      Recompute rc;
      rc.cost_us = 1.0 + static_cast<double>(rng() % 30);
      rc.sources.push_back(1 + rng() % k);
      r.recompute = rc;
    }
    t.regions.push_back(r);
  }
  return t;
}

// A random plan, as a user may hand `gswapctl simulate --plan`: up to 11 entries on random
// regions (one time in two on the last `favoured` ones, when there are any), swaps or, on a
// recomputable region one time in three, drops, with evictions, triggers and back-accesses at
// random launches (overlapping, wrapping, anywhere).
inline Plan random_plan(std::mt19937_64& rng, const Trace& t, std::size_t favoured = 0) {
  const std::size_t n = t.launches.size();
  Plan plan;
  for (std::size_t e = rng() % 12; e > 0; --e) {
    PlanEntry pe;
    const std::size_t last = std::min(favoured, t.regions.size());
    const Region& r = last > 0 && rng() % 2 ? t.regions[t.regions.size() - 1 - rng() % last]
                                            : t.regions[rng() % t.regions.size()];
    pe.region = r.id;
    pe.kind = r.recompute && rng() % 3 == 0 ? EvictKind::kRecompute : EvictKind::kSwap;
    pe.evict_after = rng() % n;
    if (rng() % 4 == 0) pe.evict_at = rng() % n;
    if (rng() % 3) pe.trigger = rng() % n;
    if (rng() % 4) pe.back_access = rng() % n;
    pe.swap_in_us = static_cast<double>(rng() % 1000);
    plan.entries.push_back(pe);
  }
  return plan;
}

// random_trace with regions cut in two by the iteration's start (Analysis::next_instance): Y,
// allocated at launch a and freed in the next iteration, and X, the previous iteration's Y (same
// bytes and lifetime, allocated one iteration earlier), freed before launch k and read at random
// before it; recomputable from a region of the trace one time in three.
inline Trace random_trace_across_start(std::mt19937_64& rng) {
  Trace t = random_trace(rng);
  const std::size_t n = t.launches.size();
  for (Launch& l : t.launches) l.seq += n;  // room for the iteration before
  for (Region& r : t.regions) {
    r.alloc_seq += n;
    if (r.free_seq) *r.free_seq += n;
  }
  const std::size_t pairs = 1 + rng() % 3;
  for (std::size_t p = 0; p < pairs; ++p) {
    const std::size_t a = rng() % n, k = 1 + rng() % n;
    Region x, y;
    x.id = static_cast<RegionId>(t.regions.size() + 1);
    y.id = x.id + 1;
    x.bytes = y.bytes = (2 + rng() % 7) * kMiB + p;  // + p: each pair its own kind
    x.alloc_seq = a, x.free_seq = n + k;
    y.alloc_seq = n + a, y.free_seq = 2 * n + k;
    t.launches[a].regions.push_back(y.id);  // written when allocated
    for (std::size_t j = rng() % 3; j > 0; --j)
      t.launches[a + rng() % (n - a)].regions.push_back(y.id);
    for (std::size_t j = rng() % 4; j > 0; --j) t.launches[rng() % k].regions.push_back(x.id);
    if (rng() % 3 == 0) {
      Recompute rc;
      rc.cost_us = 1.0 + static_cast<double>(rng() % 30);
      rc.sources.push_back(1 + rng() % t.regions.size());
      x.recompute = y.recompute = rc;
    }
    t.regions.push_back(x);
    t.regions.push_back(y);
  }
  return t;
}

}  // namespace gswap::policy::testing
