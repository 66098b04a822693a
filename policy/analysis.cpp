// analysis.cpp: derives lifetimes, the live-bytes curve and the ideal timeline from a trace.
#include "policy/analysis.h"

#include <algorithm>
#include <limits>
#include <map>
#include <unordered_map>

namespace gswap::policy {

namespace {

// Analysis::next_instance: each region carried over and freed in the iteration, paired with the
// region of the same size and lifetime allocated soonest at least one iteration (the launches'
// span of seq numbers) after it, among those this iteration allocates and does not free.
void match_next_instances(const Trace& trace, Analysis* a) {
  const std::size_t nr = trace.regions.size();
  a->next_instance.assign(nr, kNoRegion);
  a->prev_instance.assign(nr, kNoRegion);
  if (a->n == 0) return;
  const Seq first = trace.launches.front().seq, last = trace.launches.back().seq;
  const Seq span = last - first + 1;
  // (bytes, lifetime) -> regions allocated in the iteration and freed after it, by alloc_seq.
  std::map<std::pair<std::uint64_t, Seq>, std::vector<std::size_t>> later;
  for (std::size_t r = 0; r < nr; ++r) {
    const Region& reg = trace.regions[r];
    if (reg.free_seq && reg.alloc_seq >= first && *reg.free_seq > last &&
        a->first_live[r] <= a->last_live[r])
      later[{reg.bytes, *reg.free_seq - reg.alloc_seq}].push_back(r);
  }
  if (later.empty()) return;
  auto by_alloc = [&](std::size_t x, std::size_t y) {
    return trace.regions[x].alloc_seq < trace.regions[y].alloc_seq;
  };
  for (auto& [key, v] : later) std::sort(v.begin(), v.end(), by_alloc);
  std::vector<std::size_t> carried;
  for (std::size_t r = 0; r < nr; ++r) {
    const Region& reg = trace.regions[r];
    if (reg.free_seq && reg.alloc_seq < first && *reg.free_seq >= first &&
        *reg.free_seq <= last + 1 && a->live_at_start[r])
      carried.push_back(r);
  }
  std::sort(carried.begin(), carried.end(), by_alloc);
  // Carried regions in allocation order need ever later partners: one cursor per kind.
  std::map<std::pair<std::uint64_t, Seq>, std::size_t> cursor;
  for (std::size_t x : carried) {
    const Region& reg = trace.regions[x];
    const std::pair<std::uint64_t, Seq> key{reg.bytes, *reg.free_seq - reg.alloc_seq};
    auto it = later.find(key);
    if (it == later.end()) continue;
    std::size_t& c = cursor[key];
    // Partners are allocated from `first` on, carried regions before it: no wrap-around.
    while (c < it->second.size() && trace.regions[it->second[c]].alloc_seq - reg.alloc_seq < span)
      ++c;
    if (c == it->second.size()) continue;
    a->next_instance[x] = it->second[c++];
    a->prev_instance[a->next_instance[x]] = x;
  }
}

}  // namespace

Analysis analyze(const Trace& trace) {
  Analysis a;
  a.trace = &trace;
  a.n = trace.launches.size();
  const std::size_t nr = trace.regions.size();
  a.index.reserve(nr);
  for (std::size_t r = 0; r < nr; ++r) a.index.emplace(trace.regions[r].id, r);
  a.accesses.assign(nr, {});
  a.touched.assign(a.n, {});
  std::vector<std::size_t> stamp(nr, static_cast<std::size_t>(-1));
  for (std::size_t i = 0; i < a.n; ++i) {
    for (RegionId id : trace.launches[i].regions) {
      auto it = a.index.find(id);
      if (it == a.index.end() || stamp[it->second] == i) continue;
      stamp[it->second] = i;
      a.touched[i].push_back(it->second);
      a.accesses[it->second].push_back(i);
    }
  }
  auto pos_of_seq = [&](Seq s) {  // first launch with seq >= s
    auto it = std::lower_bound(trace.launches.begin(), trace.launches.end(), s,
                               [](const Launch& l, Seq v) { return l.seq < v; });
    return static_cast<std::size_t>(it - trace.launches.begin());
  };
  a.first_live.assign(nr, 0);
  a.last_live.assign(nr, 0);
  a.live_at_start.assign(nr, false);
  a.live_at_end.assign(nr, false);
  std::vector<std::int64_t> diff(a.n + 1, 0);
  for (std::size_t r = 0; r < nr; ++r) {
    const Region& reg = trace.regions[r];
    // Live over the launches [first, end): from the first launch at or after its allocation up
    // to the launch at free_seq, before which it is freed (so a region freed before the first
    // launch is never live).
    std::size_t first = pos_of_seq(reg.alloc_seq);
    std::size_t end = reg.free_seq ? pos_of_seq(*reg.free_seq) : a.n;
    if (!a.accesses[r].empty()) {  // a region is allocated at least while it is used
      first = std::min(first, a.accesses[r].front());
      end = std::max(end, a.accesses[r].back() + 1);
    }
    if (a.n == 0 || first >= a.n || end <= first) {
      a.first_live[r] = 1;
      a.last_live[r] = 0;  // never live: an empty range
      continue;
    }
    const std::size_t last = end - 1;
    a.first_live[r] = first;
    a.last_live[r] = last;
    a.live_at_start[r] = first == 0;
    a.live_at_end[r] = !reg.free_seq.has_value();
    diff[first] += static_cast<std::int64_t>(reg.bytes);
    diff[last + 1] -= static_cast<std::int64_t>(reg.bytes);
  }
  match_next_instances(trace, &a);
  a.is_source.assign(nr, false);
  a.sources.assign(nr, {});
  constexpr std::size_t kNever = std::numeric_limits<std::size_t>::max();
  a.sources_from.assign(nr, kNever);  // empty until a recomputation says otherwise
  a.sources_to.assign(nr, 0);
  for (std::size_t r = 0; r < nr; ++r) {
    const Region& reg = trace.regions[r];
    if (!reg.recompute) continue;
    std::size_t from = 0, to = kNever;
    for (RegionId src : reg.recompute->sources) {
      const auto it = a.index.find(src);
      a.sources[r].push_back(it == a.index.end() ? kNoRegion : it->second);
      if (it != a.index.end() && src != reg.id) a.is_source[it->second] = true;
      if (it == a.index.end() || it->second == r) {
        from = kNever, to = 0;  // never: a source that is not another region of the trace
      } else {
        from = std::max(from, a.first_live[it->second]);
        to = std::min(to, a.last_live[it->second]);
      }
    }
    a.sources_from[r] = from;
    a.sources_to[r] = to;
  }
  std::vector<std::int64_t> small_diff(a.n + 1, 0);  // live regions that are never evicted
  for (std::size_t r = 0; r < nr; ++r)
    if (a.first_live[r] <= a.last_live[r] &&
        trace.regions[r].bytes < trace.device.min_evictable_bytes) {
      small_diff[a.first_live[r]] += static_cast<std::int64_t>(trace.regions[r].bytes);
      small_diff[a.last_live[r] + 1] -= static_cast<std::int64_t>(trace.regions[r].bytes);
    }
  // Evictable regions that no entry can move off: before their first use, or all along when
  // unused. (Carried-over regions that live on leave through wrap entries, or are idle.)
  std::vector<std::int64_t> fresh_diff(a.n + 1, 0);
  for (std::size_t r = 0; r < nr; ++r) {
    if (a.first_live[r] > a.last_live[r] ||
        trace.regions[r].bytes < trace.device.min_evictable_bytes)
      continue;
    const auto& acc = a.accesses[r];
    // Carried over and never freed: a wrap entry evicts it, or it is idle (on the host); one the
    // iteration frees (an activation the iteration's start cut in two) leaves through an entry
    // that evicts its next instance for good (next_instance), else only after a use.
    const std::size_t next = a.next_instance[r];
    if (a.live_at_start[r] &&
        (a.live_at_end[r] || (next != kNoRegion && !a.accesses[next].empty())))
      continue;
    if (!acc.empty() && acc.front() == a.first_live[r]) continue;
    const std::size_t to = acc.empty() ? a.last_live[r] : acc.front() - 1;
    fresh_diff[a.first_live[r]] += static_cast<std::int64_t>(trace.regions[r].bytes);
    fresh_diff[to + 1] -= static_cast<std::int64_t>(trace.regions[r].bytes);
  }
  std::vector<std::vector<std::size_t>> allocated_at(a.n);  // regions allocated in the iteration
  for (std::size_t r = 0; r < nr; ++r)
    if (a.first_live[r] <= a.last_live[r] && !a.live_at_start[r])
      allocated_at[a.first_live[r]].push_back(r);
  a.live_bytes.assign(a.n, 0);
  a.working_set.assign(a.n, 0);
  a.min_resident.assign(a.n, 0);
  a.unplannable.assign(a.n, 0);
  std::int64_t cur = 0, small = 0, fresh = 0;
  for (std::size_t i = 0; i < a.n; ++i) {
    cur += diff[i];
    small += small_diff[i];
    fresh += fresh_diff[i];
    a.live_bytes[i] = static_cast<std::uint64_t>(cur);
    if (a.live_bytes[i] > a.peak_bytes) a.peak_bytes = a.live_bytes[i], a.peak_launch = i;
    for (std::size_t r : a.touched[i]) a.working_set[i] += trace.regions[r].bytes;
    if (a.working_set[i] > a.max_working_set) {
      a.max_working_set = a.working_set[i];
      a.max_working_set_launch = i;
    }
    std::uint64_t small_touched = 0;
    for (std::size_t r : a.touched[i])
      if (trace.regions[r].bytes < trace.device.min_evictable_bytes)
        small_touched += trace.regions[r].bytes;
    a.min_resident[i] = a.working_set[i] + static_cast<std::uint64_t>(small) - small_touched;
    if (a.min_resident[i] > a.max_min_resident) {
      a.max_min_resident = a.min_resident[i];
      a.max_min_resident_launch = i;
    }
    for (std::size_t r : allocated_at[i]) {
      const std::uint64_t bytes = trace.regions[r].bytes;
      const std::uint64_t beside = static_cast<std::uint64_t>(small) -
                                   (bytes < trace.device.min_evictable_bytes ? bytes : 0);
      if (bytes + beside > a.max_alloc_need) {
        a.max_alloc_need = bytes + beside;
        a.max_alloc_need_region = r;
      }
    }
    a.unplannable[i] = static_cast<std::uint64_t>(fresh);
    if (a.min_resident[i] + a.unplannable[i] > a.max_min_planned) {
      a.max_min_planned = a.min_resident[i] + a.unplannable[i];
      a.max_min_planned_launch = i;
    }
  }
  a.start_us.assign(a.n, 0);
  a.end_us.assign(a.n, 0);
  std::unordered_map<std::uint32_t, double> stream_end;
  double prev_start = 0;
  for (std::size_t i = 0; i < a.n; ++i) {
    const Launch& l = trace.launches[i];
    double s = std::max(prev_start, stream_end[l.stream]);
    a.start_us[i] = s;
    a.end_us[i] = s + l.dur_us;
    stream_end[l.stream] = a.end_us[i];
    prev_start = s;
    a.ideal_step_us = std::max(a.ideal_step_us, a.end_us[i]);
  }
  a.stream_index.assign(a.n, 0);
  std::unordered_map<std::uint32_t, std::uint32_t> dense;
  for (std::size_t i = 0; i < a.n; ++i)
    a.stream_index[i] =
        dense.try_emplace(trace.launches[i].stream, static_cast<std::uint32_t>(dense.size()))
            .first->second;
  a.streams = dense.size();
  a.next_on_stream.assign(a.n, a.n);
  std::unordered_map<std::uint32_t, std::size_t> later;  // per stream: its first launch after j
  for (std::size_t j = a.n; j-- > 0;) {
    auto [it, fresh] = later.try_emplace(trace.launches[j].stream, a.n);
    a.next_on_stream[j] = it->second;
    it->second = j;
  }
  return a;
}

bool Analysis::sources_allocated_together(std::size_t r, std::size_t from, std::size_t b) const {
  return std::max(from, sources_from[r]) <= std::min(b, sources_to[r]);
}

bool Analysis::recomputable_at(std::size_t r, std::size_t b) const {
  return sources_allocated_together(r, b, b);
}

bool Analysis::recomputable_within(std::size_t r, std::size_t from, std::size_t b) const {
  return sources_allocated_together(r, is_source[r] ? from : b, b);
}

bool Analysis::recomputable_from_start(std::size_t r) const {
  return sources_allocated_together(r, 0, 0);  // allocated at launch 0: carried over
}

bool Analysis::starts_recomputable(std::size_t r) const {
  return recomputable_from_start(r) &&
         (accesses[r].empty() || recomputable_at(r, accesses[r].front()));
}

std::size_t Analysis::first_start_at_or_after(double t) const {
  return static_cast<std::size_t>(std::lower_bound(start_us.begin(), start_us.end(), t) -
                                  start_us.begin());
}

std::size_t Analysis::first_start_at_or_after(double t, std::size_t from) const {
  if (from >= n || start_us[from] >= t) return from;
  std::size_t below = from, above = n;  // start_us[below] < t, start_us[above] >= t
  for (std::size_t step = 1; below + step < n; step *= 2) {
    if (start_us[below + step] >= t) {
      above = below + step;
      break;
    }
    below += step;
  }
  const auto begin = start_us.begin();
  return static_cast<std::size_t>(std::lower_bound(begin + static_cast<std::ptrdiff_t>(below) + 1,
                                                   begin + static_cast<std::ptrdiff_t>(above), t) -
                                  begin);
}

std::size_t Analysis::last_start_at_or_before(double t, std::size_t to) const {
  if (start_us[to] <= t) return to;
  std::size_t above = to, below = 0;  // start_us[above] > t; start_us[below] <= t, or below is 0
  for (std::size_t step = 1; step < above; step *= 2) {
    if (start_us[above - step] <= t) {
      below = above - step;
      break;
    }
    above -= step;
  }
  const auto begin = start_us.begin();
  const auto it = std::upper_bound(begin + static_cast<std::ptrdiff_t>(below),
                                   begin + static_cast<std::ptrdiff_t>(above), t);
  return it == begin ? 0 : static_cast<std::size_t>(it - begin) - 1;
}

namespace {
// "2 MiB" for whole mebibytes, else bytes.
std::string size_text(std::uint64_t bytes) {
  if (bytes && bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

std::string launch_name(const Analysis& a, std::size_t i) {
  const Launch& l = a.trace->launches[i];
  return "launch " + std::to_string(i) + " (seq " + std::to_string(l.seq) + ", kernel " + l.kernel +
         ")";
}

}  // namespace

std::string unplannable_budget_reason(const Analysis& a, std::uint64_t budget) {
  if (a.max_min_planned <= budget) return {};
  const std::size_t i = a.max_min_planned_launch;
  return launch_name(a, i) + " needs " + std::to_string(a.min_resident[i]) +
         " bytes resident while " + std::to_string(a.unplannable[i]) +
         " bytes of regions allocated before it (in this iteration or the one before) and not "
         "used yet (or not used at all) are live beside it: " +
         std::to_string(a.min_resident[i] + a.unplannable[i]) + " bytes, more than the budget of " +
         std::to_string(budget) +
         " bytes; a plan evicts a region only after an access, so the simulator evicts those "
         "on demand";
}

std::string impossible_budget_reason(const Analysis& a, std::uint64_t budget) {
  if (a.max_working_set > budget)
    return launch_name(a, a.max_working_set_launch) + " touches " +
           std::to_string(a.max_working_set) + " bytes, more than the budget of " +
           std::to_string(budget) + " bytes";
  if (a.max_min_resident <= budget) {
    if (a.max_alloc_need <= budget) return {};
    const std::size_t r = a.max_alloc_need_region;
    const std::uint64_t bytes = a.trace->regions[r].bytes;
    std::string text = "region " + std::to_string(a.trace->regions[r].id) + " (" +
                       std::to_string(bytes) + " bytes), allocated before " +
                       launch_name(a, a.first_live[r]) + ", needs its bytes at once";
    if (a.max_alloc_need > bytes)
      text += " beside " + std::to_string(a.max_alloc_need - bytes) + " bytes of regions under " +
              size_text(a.trace->device.min_evictable_bytes) + " (never evicted)";
    return text + ": " + std::to_string(a.max_alloc_need) + " bytes, more than the budget of " +
           std::to_string(budget) + " bytes";
  }
  const std::size_t i = a.max_min_resident_launch;
  return launch_name(a, i) + " touches " + std::to_string(a.working_set[i]) + " bytes while " +
         std::to_string(a.min_resident[i] - a.working_set[i]) + " bytes of regions under " +
         size_text(a.trace->device.min_evictable_bytes) +
         " (never evicted) are live beside it: " + std::to_string(a.min_resident[i]) +
         " bytes, more than the budget of " + std::to_string(budget) + " bytes";
}

}  // namespace gswap::policy
