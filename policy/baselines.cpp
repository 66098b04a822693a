// baselines.cpp: passive LRU, vDNN-style swapping, recompute-only, and the DELTA online policy.
#include "policy/baselines.h"

#include <algorithm>
#include <limits>
#include <queue>
#include <set>
#include <utility>
#include <vector>

#include "policy/capuchin.h"
#include "policy/recompute_check.h"
#include "policy/segment_tree.h"

namespace gswap::policy {

Plan plan_lru(const Analysis& a, std::uint64_t budget) {
  Plan p;
  p.policy = "lru";
  if (std::string why = impossible_budget_reason(a, budget); !why.empty()) {
    p.feasible = false;
    p.reason = why;
  }
  return p;
}

Plan plan_vdnn(const Analysis& a, std::uint64_t budget) {
  Plan p = plan_lru(a, budget);
  p.policy = "vdnn";
  if (!p.feasible || a.peak_bytes <= budget) return p;
  const std::size_t turn = a.peak_launch;
  const Trace& t = *a.trace;
  for (std::size_t r = 0; r < t.regions.size(); ++r) {
    if (!a.evictable(r) || a.live_at_start[r]) continue;  // activations, not weights
    const auto& acc = a.accesses[r];
    auto after = std::upper_bound(acc.begin(), acc.end(), turn);
    if (after == acc.begin() || after == acc.end()) continue;
    PlanEntry e;
    e.region = t.regions[r].id;
    e.evict_after = *std::prev(after);
    e.back_access = *after;
    e.trigger = std::max(e.evict_after + 1, e.back_access - 1);
    e.swap_in_us = static_cast<double>(t.regions[r].bytes) / (t.device.h2d_bytes_per_s / 1e6);
    if (e.back_access > e.evict_after + 1) p.entries.push_back(e);
  }
  return p;
}

Plan plan_recompute_only(const Analysis& a, std::uint64_t budget) {
  CapuchinOptions o;
  o.allow_swap = false;
  return plan_capuchin(a, budget, o);
}

namespace {

// The resident regions DELTA may release, visited highest bytes x staleness first. A max-heap of
// scores would not do: a score grows with the time since the region's last use, so the order
// changes as the replay goes on. Instead a segment tree over region indices keeps, per node, the
// largest bytes, the earliest last-use end and the largest index of its candidates;
// bytes x (now - end) of those bounds every score below the node, so a best-first walk meets the
// regions in exactly the order a sort of all scores gives (score descending, then index
// descending) while opening few nodes. Floating-point rounding is monotone, so the bound computed
// for a node is never below a score computed for one of its regions.
class VictimTree {
 public:
  explicit VictimTree(std::size_t n) {
    while (size_ < n) size_ <<= 1;
    bytes_.assign(2 * size_, 0);
    end_.assign(2 * size_, 0);
    top_.assign(2 * size_, kNone);
  }
  void set(std::size_t r, double bytes, double end_us) {
    std::size_t k = size_ + r;
    bytes_[k] = bytes, end_[k] = end_us, top_[k] = r;
    pull(k);
  }
  void clear(std::size_t r) {
    std::size_t k = size_ + r;
    top_[k] = kNone;
    pull(k);
  }
  // Calls visit(r) for each candidate in order until it returns false.
  template <class Visit>
  void walk(double now, Visit visit) const {
    struct Item {
      double bound;
      std::size_t top, node;
      bool operator<(const Item& o) const {
        return bound != o.bound ? bound < o.bound : top < o.top;
      }
    };
    std::priority_queue<Item> q;
    auto push = [&](std::size_t k) {
      if (top_[k] != kNone) q.push({score(bytes_[k], end_[k], now), top_[k], k});
    };
    push(1);
    while (!q.empty()) {
      const std::size_t k = q.top().node;
      q.pop();
      if (k >= size_) {
        if (!visit(top_[k])) return;
        continue;
      }
      push(2 * k);
      push(2 * k + 1);
    }
  }
  // The score DELTA releases by: bytes x staleness (the reciprocal of its 1/(bytes x staleness)).
  static double score(double bytes, double end_us, double now) {
    return bytes * std::max(1e-3, now - end_us);
  }

 private:
  static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
  void pull(std::size_t k) {
    for (k >>= 1; k >= 1; k >>= 1) {
      const std::size_t l = 2 * k, r = 2 * k + 1;
      if (top_[l] == kNone || top_[r] == kNone) {
        const std::size_t c = top_[l] == kNone ? r : l;
        bytes_[k] = bytes_[c], end_[k] = end_[c], top_[k] = top_[c];
      } else {
        bytes_[k] = std::max(bytes_[l], bytes_[r]);
        end_[k] = std::min(end_[l], end_[r]);
        top_[k] = std::max(top_[l], top_[r]);
      }
    }
  }
  std::size_t size_ = 1;
  std::vector<double> bytes_, end_;
  std::vector<std::size_t> top_;
};

}  // namespace

Plan plan_delta(const Analysis& a, std::uint64_t budget) {
  Plan p = plan_lru(a, budget);
  p.policy = "delta";
  if (!p.feasible || a.peak_bytes <= budget) return p;
  const Trace& t = *a.trace;
  const std::size_t nr = t.regions.size(), n = a.n;
  const double bw_out = t.device.d2h_bytes_per_s / 1e6;
  const std::uint64_t release_at = budget / 4 * 3;

  enum class S : std::uint8_t { kAbsent, kResident, kOff };
  std::vector<S> st(nr, S::kAbsent);
  std::vector<std::size_t> last_access(nr, kNoLaunch), entry_of(nr, kNoLaunch);
  std::vector<std::size_t> next_idx(nr, 0);  // index into accesses of the next access
  std::uint64_t used = 0;
  for (std::size_t r = 0; r < nr; ++r)
    if (a.live_at_start[r] && a.first_live[r] <= a.last_live[r])
      st[r] = S::kResident, used += t.regions[r].bytes;
  auto next_use = [&](std::size_t r) {
    return next_idx[r] < a.accesses[r].size() ? a.accesses[r][next_idx[r]] : kNoLaunch;
  };
  // Release candidates: resident, evictable regions that were used (kept in step with st and
  // last_access by refresh), and offloaded swaps waiting to come back, by next use.
  VictimTree candidates(nr);
  auto refresh = [&](std::size_t r) {
    if (st[r] == S::kResident && a.evictable(r) && last_access[r] != kNoLaunch)
      candidates.set(r, static_cast<double>(t.regions[r].bytes), a.end_us[last_access[r]]);
    else
      candidates.clear(r);
  };
  std::set<std::pair<std::size_t, std::size_t>> waiting;  // (next use, region)
  std::vector<std::size_t> waiting_key(nr, kNoLaunch);
  auto stop_waiting = [&](std::size_t r) {
    if (waiting_key[r] != kNoLaunch) waiting.erase({waiting_key[r], r});
    waiting_key[r] = kNoLaunch;
  };
  auto release = [&](std::size_t i, std::uint64_t target, std::size_t protect_launch) {
    // Victims: highest bytes x staleness first (lowest 1/(bytes x staleness)).
    const double now = i < n ? a.start_us[i] : a.ideal_step_us;
    candidates.walk(now, [&](std::size_t r) {
      if (protect_launch < n &&
          std::find(a.touched[protect_launch].begin(), a.touched[protect_launch].end(), r) !=
              a.touched[protect_launch].end())
        return true;
      if (used <= target) return false;
      const Region& reg = t.regions[r];
      PlanEntry e;
      e.region = reg.id;
      e.evict_after = last_access[r];
      // At the iteration's end (i == n) there is no launch to issue it before: it follows its last
      // access, as a position past the iteration would mean anyway (evicts_at), and plans keep to
      // positions within the iteration (the plan format refuses others).
      e.evict_at = i < n ? i : kNoLaunch;
      e.back_access = next_use(r);
      e.swap_in_us = static_cast<double>(reg.bytes) / (t.device.h2d_bytes_per_s / 1e6);
      bool recompute = reg.recompute &&
                       reg.recompute->cost_us <= static_cast<double>(reg.bytes) / bw_out &&
                       e.back_access != kNoLaunch;
      if (recompute)  // the sources must still exist when it is needed again
        for (RegionId src : reg.recompute->sources) {
          auto it = a.index.find(src);
          if (it == a.index.end() || a.first_live[it->second] > e.back_access ||
              a.last_live[it->second] < e.back_access)
            recompute = false;
        }
      e.kind = recompute ? EvictKind::kRecompute : EvictKind::kSwap;
      e.trigger = recompute ? e.back_access : kNoLaunch;
      entry_of[r] = p.entries.size();
      p.entries.push_back(e);
      st[r] = S::kOff;
      used -= reg.bytes;
      candidates.clear(r);
      // While it is off, nothing touches it, so its next use stays the key it waits under.
      if (!recompute && e.back_access != kNoLaunch) {
        waiting_key[r] = e.back_access;
        waiting.insert({e.back_access, r});
      }
      return true;
    });
  };
  std::vector<std::vector<std::size_t>> allocs(n), frees(n);
  for (std::size_t r = 0; r < nr; ++r) {
    if (a.first_live[r] > a.last_live[r]) continue;
    if (!a.live_at_start[r]) allocs[a.first_live[r]].push_back(r);
    if (!a.live_at_end[r]) frees[a.last_live[r]].push_back(r);
  }
  for (std::size_t i = 0; i < n; ++i) {
    // Arrivals: allocations, then on-demand restores of what this launch needs.
    for (std::size_t r : allocs[i])
      if (st[r] == S::kAbsent) st[r] = S::kResident, used += t.regions[r].bytes, refresh(r);
    for (std::size_t r : a.touched[i]) {
      if (st[r] == S::kResident) continue;
      if (st[r] == S::kOff && entry_of[r] != kNoLaunch &&
          p.entries[entry_of[r]].kind == EvictKind::kSwap)
        p.entries[entry_of[r]].trigger = kNoLaunch;  // restored on demand
      stop_waiting(r);
      st[r] = S::kResident;
      used += t.regions[r].bytes;
      refresh(r);
    }
    if (used > budget) release(i, budget, i);
    for (std::size_t r : a.touched[i]) {
      last_access[r] = i;
      ++next_idx[r];
      refresh(r);
    }
    for (std::size_t r : frees[i]) {
      if (st[r] == S::kResident) used -= t.regions[r].bytes;
      stop_waiting(r);
      st[r] = S::kAbsent;
      refresh(r);
    }
    if (used > release_at) release(i + 1, release_at, i + 1);
    // Prefetch: offloaded regions in next-use order while under the release threshold.
    if (i + 1 < n) {
      for (auto it = waiting.begin(); it != waiting.end();) {
        const std::size_t r = it->second;
        if (used + t.regions[r].bytes > release_at) break;
        p.entries[entry_of[r]].trigger = i + 1;
        st[r] = S::kResident;
        used += t.regions[r].bytes;
        waiting_key[r] = kNoLaunch;
        it = waiting.erase(it);
        refresh(r);
      }
    }
  }
  // Each drop checked its sources at its own back-access, not at a dependent's recomputation.
  make_recomputations_executable(a, p);
  return p;
}

}  // namespace gswap::policy

namespace gswap::policy {

Plan plan_belady(const Analysis& a, std::uint64_t budget) {
  Plan p = plan_lru(a, budget);
  p.policy = "belady";
  if (!p.feasible || a.peak_bytes <= budget) return p;
  const Trace& t = *a.trace;
  const std::size_t nr = t.regions.size(), n = a.n;
  std::vector<bool> resident(nr, false);
  std::uint64_t used = 0;
  for (std::size_t r = 0; r < nr; ++r)
    if (a.live_at_start[r] && a.first_live[r] <= a.last_live[r])
      resident[r] = true, used += t.regions[r].bytes;
  std::vector<std::vector<std::size_t>> allocs(n), frees(n);
  for (std::size_t r = 0; r < nr; ++r) {
    if (a.first_live[r] > a.last_live[r]) continue;
    if (!a.live_at_start[r]) allocs[a.first_live[r]].push_back(r);
    if (!a.live_at_end[r]) frees[a.last_live[r]].push_back(r);
  }
  // Next access after launch i, with a wrap to the next iteration (n + first access) for
  // regions that outlive it, and "never" (the largest key) for dead ones.
  constexpr std::size_t kDead = std::numeric_limits<std::size_t>::max();
  auto next_use = [&](std::size_t r, std::size_t i) {
    const auto& acc = a.accesses[r];
    auto it = std::upper_bound(acc.begin(), acc.end(), i);
    if (it != acc.end()) return *it;
    return a.live_at_end[r] && !acc.empty() ? n + acc.front() : kDead;
  };
  // Resident evictable regions by (next use, region), each keyed as of its last arrival or
  // access: victims, latest next use first, without a scan of every region at every launch over
  // the budget (which made the plan quadratic: 1.2 s at 20,000 launches).
  std::set<std::pair<std::size_t, std::size_t>> by_next;
  std::vector<std::size_t> key(nr, 0);
  std::vector<bool> keyed(nr, false);
  auto enter = [&](std::size_t r, std::size_t next) {
    if (!a.evictable(r)) return;
    if (keyed[r]) by_next.erase({key[r], r});
    key[r] = next, keyed[r] = true;
    by_next.insert({next, r});
  };
  auto leave = [&](std::size_t r) {
    if (keyed[r]) by_next.erase({key[r], r});
    keyed[r] = false;
  };
  for (std::size_t r = 0; r < nr; ++r)
    if (resident[r] && a.evictable(r)) enter(r, a.accesses[r].front());
  std::vector<std::size_t> touched_at(nr, kNoLaunch);
  std::vector<bool> wrapped(nr, false);  // has its wrap entry already
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t r : allocs[i])
      resident[r] = true, used += t.regions[r].bytes, enter(r, next_use(r, i));
    for (std::size_t r : a.touched[i]) {
      if (!resident[r]) resident[r] = true, used += t.regions[r].bytes;  // restored for i
      touched_at[r] = i;
      enter(r, next_use(r, i));
    }
    for (auto v = by_next.end(); used > budget && v != by_next.begin();) {
      --v;
      const auto [nu, r] = *v;
      if (touched_at[r] == i) continue;
      const auto& acc = a.accesses[r];
      auto it = std::upper_bound(acc.begin(), acc.end(), i);
      const bool wrap = it == acc.begin() || (nu != kDead && nu >= n);
      if (wrap && wrapped[r]) {  // its one wrap entry already keeps it off from here on
        resident[r] = false;
        used -= t.regions[r].bytes;
        v = by_next.erase(v), keyed[r] = false;
        continue;
      }
      if (wrap) wrapped[r] = true;
      PlanEntry e;
      e.region = t.regions[r].id;
      e.swap_in_us = static_cast<double>(t.regions[r].bytes) / (t.device.h2d_bytes_per_s / 1e6);
      if (it == acc.begin()) {  // not yet used this iteration: off since the last one (wrap)
        if (!a.live_at_end[r]) continue;
        e.evict_after = acc.back();
        e.back_access = acc.front();
      } else {
        e.evict_after = *std::prev(it);
        e.back_access = nu == kDead ? kNoLaunch : (nu >= n ? acc.front() : nu);
        if (nu == kDead && t.regions[r].recompute) e.kind = EvictKind::kRecompute;  // dead
      }
      e.trigger = e.back_access;  // placed below
      p.entries.push_back(e);
      resident[r] = false;
      used -= t.regions[r].bytes;
      v = by_next.erase(v), keyed[r] = false;
    }
    for (std::size_t r : frees[i])
      if (resident[r]) resident[r] = false, used -= t.regions[r].bytes, leave(r);
  }
  // Restores as early as memory allows, soonest back-access first: the planned curve is the
  // live bytes less every eviction's off interval; each restore then claims [trigger, b - 1].
  std::vector<std::int64_t> live(a.live_bytes.begin(), a.live_bytes.end());
  MaxSegmentTree cur(live);
  auto off = [&](const PlanEntry& e, std::int64_t d, std::size_t until) {
    off_ranges(a, e, e.evict_after + 1, until,
               [&](std::size_t lo, std::size_t hi) { cur.add(lo, hi - 1, d); });
  };
  for (const PlanEntry& e : p.entries)
    off(e, -static_cast<std::int64_t>(t.regions[a.index.at(e.region)].bytes), e.back_access);
  std::vector<std::size_t> order;
  for (std::size_t k = 0; k < p.entries.size(); ++k)
    if (p.entries[k].kind == EvictKind::kSwap && p.entries[k].back_access != kNoLaunch)
      order.push_back(k);
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return p.entries[x].back_access < p.entries[y].back_access;
  });
  for (std::size_t k : order) {
    PlanEntry& e = p.entries[k];
    const auto b = static_cast<std::int64_t>(t.regions[a.index.at(e.region)].bytes);
    const std::size_t lo = is_wrap(e) ? 0 : e.evict_after + 1;
    std::size_t trig = e.back_access;
    if (e.back_access > lo) {
      const std::size_t last = cur.find_last_above(lo, e.back_access - 1, budget - b);
      trig = last == MaxSegmentTree::npos ? lo : last + 1;
    }
    if (trig < e.back_access) cur.add(trig, e.back_access - 1, b);
    e.trigger = trig;
  }
  // Compared unsigned: a budget of 2^63 bytes or more would wrap negative as a signed one.
  p.fits = cur.max_all() <= 0 || static_cast<std::uint64_t>(cur.max_all()) <= budget;
  if (!p.fits) p.reason = "no eviction left at some launch; the simulator evicts on demand";
  // A dead region's drop may still be needed: by the next iteration's first use of the instance
  // it carried over.
  make_recomputations_executable(a, p);
  return p;
}

}  // namespace gswap::policy
