// timeline_dump.cpp: a client's timeline from what gswapd keeps (see timeline_dump.h).
#include "daemon/timeline_dump.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace gswap::daemon {
namespace {

double us(std::uint64_t ns) {
  return static_cast<double>(ns) / 1e3;
}

}  // namespace

policy::chrome::Timeline client_timeline(const Client& c) {
  namespace chrome = policy::chrome;
  chrome::Timeline t;
  t.producer = "gswapd";
  t.other = {{"pid", c.pid()}, {"exe", c.exe()}};
  const std::deque<LaunchInfo>& launches = c.launches();

  // Kernels, and per region the timed launches that used it (by start), per stream the timed
  // launches in order: what restores are judged by.
  std::set<std::uint32_t> streams;
  std::unordered_map<std::uint64_t, std::vector<std::size_t>> users;
  std::map<std::uint32_t, std::vector<std::size_t>> on_stream;
  for (std::size_t i = 0; i < launches.size(); ++i) {
    const LaunchInfo& l = launches[i];
    // Streams are named where kernels ran, and where the iteration trace dump writes has launches
    // (so a simulation of that trace shows the same tracks); copies outside it have no time.
    const IterationInfo& it = c.iteration();
    if (it.length && l.seq >= it.first_seq && l.seq <= it.last_seq) streams.insert(l.stream);
    if (!l.duration_ns) continue;
    streams.insert(l.stream);
    t.kernels.push_back(
        {l.stream, c.name_of_kernel(l.function_id), l.seq, us(l.start_ns), us(l.duration_ns)});
    for (std::uint64_t r : l.regions) users[r].push_back(i);
    on_stream[l.stream].push_back(i);
    if (l.seq == c.iteration().first_seq) t.iterations.push_back(us(l.start_ns));
  }
  t.streams.assign(streams.begin(), streams.end());
  auto by_start = [&](std::vector<std::size_t>& v) {
    std::sort(v.begin(), v.end(), [&](std::size_t a, std::size_t b) {
      return launches[a].start_ns < launches[b].start_ns;
    });
  };
  for (auto& [r, v] : users) by_start(v);
  for (auto& [s, v] : on_stream) by_start(v);

  for (const SwapRecord& s : c.swaps()) {
    chrome::Copy x;
    x.to_device = s.to_device;
    x.region = s.region;
    x.region_name = c.name_of_region(s.region);
    x.bytes = s.bytes;
    x.start_us = us(s.start_ns);
    x.end_us = us(s.end_ns);
    x.planned = s.planned;
    if (s.to_device) {
      auto it = users.find(s.region);
      if (it != users.end()) {
        const std::vector<std::size_t>& v = it->second;
        auto k = std::lower_bound(
            v.begin(), v.end(), s.start_ns,
            [&](std::size_t i, std::uint64_t t0) { return launches[i].start_ns < t0; });
        // Judged only when the kernel is in a timed stretch (the launch before it was timed too),
        // so no untimed launch could have been the one that waited.
        if (k != v.end() && *k > 0 && launches[*k - 1].duration_ns) {
          const LaunchInfo& use = launches[*k];
          const std::uint64_t tol = std::max<std::uint64_t>(20'000, (s.end_ns - s.start_ns) / 50);
          const std::vector<std::size_t>& st = on_stream[use.stream];
          auto pos = std::lower_bound(st.begin(), st.end(), *k, [&](std::size_t a, std::size_t b) {
            return launches[a].start_ns < launches[b].start_ns;
          });
          std::uint64_t idle_from = s.start_ns;
          if (pos != st.begin()) {
            const LaunchInfo& prev = launches[*std::prev(pos)];
            idle_from = std::max(idle_from, prev.start_ns + prev.duration_ns);
          }
          const bool late = use.start_ns + tol >= s.end_ns && use.start_ns <= s.end_ns + tol &&
                            idle_from + tol < use.start_ns;
          x.late = late;
          if (late)
            t.device_waits.push_back({"region " + std::to_string(s.region), s.region,
                                      c.name_of_kernel(use.function_id), us(idle_from),
                                      us(use.start_ns - idle_from)});
        }
      }
    }
    t.copies.push_back(std::move(x));
  }
  for (const auto& r : c.recomputations())
    t.recomputes.push_back(
        {r.region, c.name_of_region(r.region), r.bytes, us(r.start_ns), us(r.end_ns), r.failed});

  // Host times onto the device axis, with the library's clock pair.
  std::int64_t host_minus_device = 0;
  const bool aligned = c.host_minus_device(&host_minus_device);
  t.other["host_times_aligned"] = aligned;
  if (aligned) {
    auto dev = [&](std::uint64_t host_ns) {
      return static_cast<double>(static_cast<std::int64_t>(host_ns) - host_minus_device) / 1e3;
    };
    for (const HostWait& w : c.host_waits())
      t.host_waits.push_back({w.thread, "", dev(w.start_ns), us(w.ns)});
    // Counters from a little before the oldest event kept: older samples describe nothing shown.
    double first = 0;
    bool any = false;
    for (const auto& k : t.kernels)
      first = any ? std::min(first, k.start_us) : k.start_us, any = true;
    for (const auto& k : t.copies)
      first = any ? std::min(first, k.start_us) : k.start_us, any = true;
    const std::deque<CounterSample>& samples = c.counter_samples();
    for (std::size_t i = 0; i < samples.size(); ++i) {
      const double ts = dev(samples[i].host_ns);
      // The sample in force when the first event happened is kept too.
      if (any && i + 1 < samples.size() && dev(samples[i + 1].host_ns) < first) continue;
      t.counters.push_back({ts, samples[i].resident, samples[i].budget, samples[i].pinned});
    }
  }
  return t;
}

}  // namespace gswap::daemon
