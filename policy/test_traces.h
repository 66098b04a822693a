// test_traces.h: small hand-built and random traces shared by the policy unit tests.
#pragma once

#include <random>

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

}  // namespace gswap::policy::testing
