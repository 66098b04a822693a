// recompute_check.cpp: recompute entries checked against every time their region is needed.
#include "policy/recompute_check.h"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "policy/simulator.h"

namespace gswap::policy {
namespace {

class Checker {
 public:
  Checker(const Analysis& a, Plan& plan) : a_(a), t_(*a.trace), plan_(plan) {}

  std::size_t run() {
    const std::size_t n = a_.n;
    drops_.assign(t_.regions.size(), {});
    visited_.assign(t_.regions.size(), 0);
    in_progress_.assign(t_.regions.size(), false);
    drop_.resize(plan_.entries.size());
    for (std::size_t k = 0; k < plan_.entries.size(); ++k) drop_[k] = dropped(k);
    std::vector<std::pair<std::size_t, std::size_t>> needs;  // (region, launch)
    for (std::size_t k = 0; k < plan_.entries.size(); ++k) {
      const PlanEntry& e = plan_.entries[k];
      if (!drop_[k]) continue;
      const std::size_t r = a_.index.at(e.region);
      const std::size_t lo = first_launch_evicted(e, n);
      if (lo >= n) continue;
      // The simulator recomputes the region at its next access (the entry's back-access, in a
      // plan that names it right).
      const auto& acc = a_.accesses[r];
      if (auto next = std::lower_bound(acc.begin(), acc.end(), lo); next != acc.end()) {
        drops_[r].push_back({lo, *next, k, 0});
        needs.emplace_back(r, *next);
        continue;
      }
      // Dropped for the rest of the iteration.
      const std::size_t end = a_.live_at_end[r] ? n - 1 : a_.last_live[r];
      if (lo <= end) drops_[r].push_back({lo, end, k, 0});
      // The next iteration then starts with the instance this one carried over dropped, where
      // the simulator can recompute it (Analysis::starts_recomputable; elsewhere the simulator's
      // drop keeps a copy).
      const std::size_t prev = a_.prev_instance[r];
      if ((!acc.empty() && e.evict_after < acc.back()) || lo > end || prev == kNoRegion ||
          t_.regions[prev].bytes < t_.device.min_evictable_bytes || !a_.starts_recomputable(prev))
        continue;
      if (a_.accesses[prev].empty()) {  // still a source of others' recomputations
        drops_[prev].push_back({0, a_.last_live[prev], k, 0});
        continue;
      }
      const std::size_t f = a_.accesses[prev].front();
      drops_[prev].push_back({0, f, k, 0});
      needs.emplace_back(prev, f);
    }
    for (auto& v : drops_) {  // by start, each with the latest end so far (covering())
      std::sort(v.begin(), v.end(), [](const Drop& x, const Drop& y) { return x.lo < y.lo; });
      for (std::size_t j = 0; j < v.size(); ++j)
        v[j].max_hi = std::max(v[j].hi, j ? v[j - 1].max_hi : 0);
    }
    std::sort(needs.begin(), needs.end());  // by region: neighbours in memory, far fewer misses
    for (auto [r, b] : needs) {
      ++need_;
      produce(r, b, 0);
    }
    return changed_;
  }

 private:
  struct Drop {
    std::size_t lo, hi;  // off the device, dropped, for launches lo..hi (inclusive)
    std::size_t k;       // the plan entry that drops it
    std::size_t max_hi;  // the largest hi of this drop and those before it (sorted by lo)
  };

  // Whether entry k drops its region in the simulator (rather than swapping it).
  bool dropped(std::size_t k) const {
    const PlanEntry& e = plan_.entries[k];
    auto it = a_.index.find(e.region);
    if (e.kind != EvictKind::kRecompute || it == a_.index.end()) return false;
    const Region& reg = t_.regions[it->second];
    return reg.recompute && reg.bytes >= t_.device.min_evictable_bytes;
  }

  // Calls f(k) for each entry k still dropping region r over launch t, until f returns false. A
  // binary search and a walk back while earlier drops may still reach t: a region read every
  // other launch and dropped after each read has one drop per read, and a scan of them all for
  // every need made the check quadratic.
  template <class F>
  void covering(std::size_t r, std::size_t t, F f) const {
    const auto& v = drops_[r];
    auto j = std::upper_bound(v.begin(), v.end(), t,
                              [](std::size_t x, const Drop& d) { return x < d.lo; });
    while (j != v.begin()) {
      --j;
      if (j->max_hi < t) return;
      if (j->hi >= t && drop_[j->k] && !f(j->k)) return;
    }
  }

  bool dropped_at(std::size_t r, std::size_t t) const {
    bool found = false;
    covering(r, t, [&](std::size_t) { return !(found = true); });
    return found;
  }

  // Makes region r available at launch t: where a drop would have to recompute it there and one of
  // its sources is not allocated, or is part of a cycle, the drops that cover t become swaps.
  // Returns false only for a region whose recomputation at t is already being checked (a cycle).
  // Every call of one need has the same t, so a region visited for that need is done.
  bool produce(std::size_t r, std::size_t t, int depth) {
    if (visited_[r] == need_) return !in_progress_[r];
    if (!dropped_at(r, t)) return true;
    visited_[r] = need_;
    in_progress_[r] = true;
    bool ok = depth < kMaxRecomputeDepth;
    for (RegionId src : t_.regions[r].recompute->sources) {
      if (!ok) break;
      auto it = a_.index.find(src);
      ok = it != a_.index.end() && it->second != r && a_.first_live[it->second] <= t &&
           a_.last_live[it->second] >= t && produce(it->second, t, depth + 1);
    }
    if (!ok) {
      std::vector<std::size_t> ks;  // not changed while covering() walks them
      covering(r, t, [&](std::size_t k) { return ks.push_back(k), true; });
      for (std::size_t k : ks) make_swap(k);
    }
    in_progress_[r] = false;
    return true;
  }

  void make_swap(std::size_t k) {
    PlanEntry& e = plan_.entries[k];
    e.kind = EvictKind::kSwap;
    e.swap_in_us = static_cast<double>(t_.regions[a_.index.at(e.region)].bytes) /
                   (t_.device.h2d_bytes_per_s / 1e6);
    drop_[k] = false;
    ++changed_;
  }

  const Analysis& a_;
  const Trace& t_;
  Plan& plan_;
  std::vector<std::vector<Drop>> drops_;
  std::vector<bool> drop_;            // per plan entry: dropped(k), kept as entries become swaps
  std::vector<std::size_t> visited_;  // per region: the last need (1-based) that visited it
  std::vector<bool> in_progress_;     // per region: its recomputation is being checked
  std::size_t need_ = 0;
  std::size_t changed_ = 0;
};

}  // namespace

std::size_t make_recomputations_executable(const Analysis& a, Plan& plan) {
  return Checker(a, plan).run();
}

}  // namespace gswap::policy
