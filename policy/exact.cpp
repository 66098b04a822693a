// exact.cpp: builds the MILP of exact.h and solves it with CBC through its C interface.
//
// Variables: S_i (start of launch i), Step; per gap g of an evictable region (between two
// accesses, across the iteration boundary, or after the last access until the free): xs_g
// (swap) and xr_g (recompute, or a free drop of dead recomputable data), the copy-out interval
// [outS_g, outE_g], the restore start inS_g, the engines' running ends F_g (copy-outs in
// eviction order) and H_g (restores in back-access order); and z_{g,i} = "off the device at
// launch i" for every launch i inside the gap whose live bytes exceed the budget (elsewhere being
// off helps nothing). Constraints are listed in README.md "Exact optimum".
#include "policy/exact.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include <Cbc_C_Interface.h>

namespace gswap::policy {
namespace {

struct Gap {
  std::size_t r = 0, e = 0, b = 0;  // b = kNoLaunch: tail; b <= e: wraps
  bool wrap = false, tail = false, can_swap = false, can_recompute = false;
  int xs = -1, xr = -1, outS = -1, outE = -1, inS = -1, F = -1, H = -1;
  std::vector<std::pair<std::size_t, int>> z;  // (launch, column)
};

Gap make_gap(std::size_t r, std::size_t e, std::size_t b) {
  Gap g;
  g.r = r, g.e = e, g.b = b;
  return g;
}

class Model {
 public:
  Model() : m_(Cbc_newModel()) {}
  ~Model() { Cbc_deleteModel(m_); }
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  int col(double lb, double ub, double obj, bool integer) {
    Cbc_addCol(m_, "", lb, ub, obj, integer ? 1 : 0, 0, nullptr, nullptr);
    if (integer) ++binaries_;
    return cols_++;
  }
  // sum coef * col (sense) rhs, sense 'G', 'L' or 'E'.
  void row(std::vector<std::pair<int, double>> terms, char sense, double rhs) {
    std::vector<int> c;
    std::vector<double> v;
    for (auto [k, x] : terms) c.push_back(k), v.push_back(x);
    Cbc_addRow(m_, "", static_cast<int>(c.size()), c.data(), v.data(), sense, rhs);
    ++rows_;
  }
  Cbc_Model* get() { return m_; }
  std::size_t binaries() const { return binaries_; }
  std::size_t rows() const { return rows_; }

 private:
  Cbc_Model* m_;
  int cols_ = 0;
  std::size_t binaries_ = 0, rows_ = 0;
};

}  // namespace

ExactResult solve_exact(const Analysis& a, std::uint64_t budget, const ExactOptions& o) {
  ExactResult res;
  const Trace& t = *a.trace;
  const std::size_t n = a.n;
  if (n == 0) return res.reason = "empty trace", res;
  if (n > o.max_launches) return res.reason = "iteration too long for the exact model", res;
  if (std::string why = impossible_budget_reason(a, budget); !why.empty())
    return res.reason = why, res;
  const double bw_out = t.device.d2h_bytes_per_s / 1e6, bw_in = t.device.h2d_bytes_per_s / 1e6;
  if (bw_out <= 0 || bw_in <= 0) return res.reason = "the trace has no link bandwidth", res;

  std::vector<bool> over(n);
  // A region freed before a launch while its last access still runs on another stream holds its
  // memory until that access ends (the simulator's stream-ordered free): at each launch from its
  // free up to the next launch on that access's stream, which may start before the access ends.
  struct Held {
    std::size_t r, access, launch;
    int w = -1;  // 1: the launch starts before the access ends, and the memory counts
  };
  std::vector<Held> held;
  std::vector<std::uint64_t> held_bytes(n, 0);  // the most that may be held at each launch
  for (std::size_t r = 0; r < t.regions.size(); ++r) {
    const auto& acc = a.accesses[r];
    if (acc.empty() || a.live_at_end[r] || a.first_live[r] > a.last_live[r]) continue;
    const std::size_t l = acc.back(), freed = a.last_live[r] + 1;
    for (std::size_t i = freed; i < n && t.launches[i].stream != t.launches[l].stream; ++i) {
      held.push_back({r, l, i});
      held_bytes[i] += t.regions[r].bytes;
    }
  }
  for (std::size_t i = 0; i < n; ++i) over[i] = a.live_bytes[i] + held_bytes[i] > budget;
  std::vector<std::size_t> prev_same(n, kNoLaunch);  // previous launch on the same stream
  {
    std::map<std::uint32_t, std::size_t> last;
    for (std::size_t i = 0; i < n; ++i) {
      auto it = last.find(t.launches[i].stream);
      if (it != last.end()) prev_same[i] = it->second;
      last[t.launches[i].stream] = i;
    }
  }
  // Gaps.
  std::vector<Gap> gaps;
  for (std::size_t r = 0; r < t.regions.size(); ++r) {
    if (!a.evictable(r)) continue;
    const auto& acc = a.accesses[r];
    for (std::size_t k = 0; k + 1 < acc.size(); ++k)
      if (acc[k + 1] > acc[k] + 1) gaps.push_back(make_gap(r, acc[k], acc[k + 1]));
    if (a.live_at_start[r] && a.live_at_end[r]) {
      gaps.push_back(make_gap(r, acc.back(), acc.front()));
      gaps.back().wrap = true;
    }
    if (!a.live_at_end[r] && acc.back() < a.last_live[r]) {
      gaps.push_back(make_gap(r, acc.back(), kNoLaunch));
      gaps.back().tail = true;
    }
  }
  auto covers = [&](const Gap& g, std::size_t i) {
    if (g.wrap) return i > g.e || i < g.b;
    if (g.tail) return g.e < i && i <= a.last_live[g.r];
    return g.e < i && i < g.b;
  };
  double M = a.ideal_step_us;
  for (Gap& g : gaps) {
    const Region& reg = t.regions[g.r];
    g.can_swap = true;
    if (o.allow_recompute && reg.recompute && !g.wrap) {
      g.can_recompute = g.tail || a.recomputable_at(g.r, g.b);
      if (g.can_recompute && !g.tail) M += reg.recompute->cost_us;
    }
    M += static_cast<double>(reg.bytes) / bw_out + static_cast<double>(reg.bytes) / bw_in;
  }
  M = 2 * M + 1;

  Model m;
  const double mib = 1 << 20;
  std::vector<int> S(n);
  for (std::size_t i = 0; i < n; ++i) S[i] = m.col(0, M, 0, false);
  const int step = m.col(0, M, 1, false);
  for (Held& h : held) {
    h.w = m.col(0, 1, 0, true);
    // w = 0: the launch starts once the access has ended, and the memory is back.
    m.row({{S[h.launch], 1}, {S[h.access], -1}, {h.w, M}}, 'G', t.launches[h.access].dur_us);
  }
  for (Gap& g : gaps) {
    bool useful = false;
    for (std::size_t i = 0; i < n; ++i)
      if (over[i] && covers(g, i)) useful = true;
    if (!useful) g.can_swap = g.can_recompute = false;
    if (g.can_swap) g.xs = m.col(0, 1, 0, true);
    if (g.can_recompute) g.xr = m.col(0, 1, 0, true);
    if (!g.can_swap && !g.can_recompute) continue;
    for (std::size_t i = 0; i < n; ++i)
      if (over[i] && covers(g, i)) g.z.push_back({i, m.col(0, 1, 0, true)});
    g.outS = m.col(0, M, 0, false);
    g.outE = m.col(0, M, 0, false);
    g.F = m.col(0, M, 0, false);
    if (g.can_swap && !g.tail) {
      g.inS = m.col(0, M, 0, false);
      g.H = m.col(0, M, 0, false);
    }
  }
  // Compute: issue order, stream order, recomputation before its back-access, step.
  std::vector<std::vector<std::pair<int, double>>> rc_at(n);
  for (const Gap& g : gaps)
    if (g.xr >= 0 && !g.tail) rc_at[g.b].push_back({g.xr, t.regions[g.r].recompute->cost_us});
  for (std::size_t i = 0; i < n; ++i) {
    const double dur = t.launches[i].dur_us;
    auto with_rc = [&](std::vector<std::pair<int, double>> terms) {
      for (auto [c, cost] : rc_at[i]) terms.push_back({c, -cost});
      return terms;
    };
    if (i > 0) m.row(with_rc({{S[i], 1}, {S[i - 1], -1}}), 'G', 0);
    if (prev_same[i] != kNoLaunch)
      m.row(with_rc({{S[i], 1}, {S[prev_same[i]], -1}}), 'G', t.launches[prev_same[i]].dur_us);
    m.row({{step, 1}, {S[i], -1}}, 'G', dur);
  }
  auto ready = [&](std::size_t i, int col, double sign_m, int z) {
    // col >= t0_{i} where t0_i = max(S_{i-1}, end of the previous launch on i's stream), when z.
    if (i > 0) m.row({{col, 1}, {S[i - 1], -1}, {z, -M}}, 'G', -M);
    if (prev_same[i] != kNoLaunch)
      m.row({{col, 1}, {S[prev_same[i]], -1}, {z, -M}}, 'G', t.launches[prev_same[i]].dur_us - M);
    (void)sign_m;
  };
  for (Gap& g : gaps) {
    if (g.xs < 0 && g.xr < 0) continue;
    const Region& reg = t.regions[g.r];
    const double lo = static_cast<double>(reg.bytes) / bw_out;
    const double li = static_cast<double>(reg.bytes) / bw_in;
    std::vector<std::pair<int, double>> any;
    if (g.xs >= 0) any.push_back({g.xs, 1});
    if (g.xr >= 0) any.push_back({g.xr, 1});
    if (any.size() == 2) m.row(any, 'L', 1);
    // The copy-out starts after every access up to e has ended; a drop releases then too.
    for (std::size_t acc : a.accesses[g.r])
      if (acc <= g.e) m.row({{g.outS, 1}, {S[acc], -1}}, 'G', t.launches[acc].dur_us);
    if (g.xs >= 0)
      m.row({{g.outE, 1}, {g.outS, -1}, {g.xs, -lo}}, 'G', 0);
    else
      m.row({{g.outE, 1}, {g.outS, -1}}, 'G', 0);
    for (auto [i, z] : g.z) {
      std::vector<std::pair<int, double>> zle = {{z, 1}};
      for (auto [c, v] : any) zle.push_back({c, -v});
      m.row(zle, 'L', 0);
      const bool after_e = !g.wrap || i > g.e;
      if (after_e) m.row({{S[i], 1}, {g.outE, -1}, {z, -M}}, 'G', -M);  // released before i
      const bool before_b = !g.tail && (!g.wrap || i < g.b);
      if (before_b && g.inS >= 0) ready(i + 1 < n ? i + 1 : i, g.inS, M, z);
    }
    if (g.inS >= 0) {
      if (!g.wrap) m.row({{g.inS, 1}, {g.outE, -1}}, 'G', 0);
      m.row({{S[g.b], 1}, {g.inS, -1}, {g.xs, -M}}, 'G', li - M);  // back before b starts
    }
    // A recomputation reads its sources at b: none of them may be off the device there. z = 0
    // only leaves a region uncounted, so each gap of a source around b is ruled out or ordered:
    // a dropped source comes back only at its own back-access (no chains), a swapped one must
    // be back before b starts, and one evicted for good (a tail) cannot be read at all.
    if (g.xr >= 0 && !g.tail)
      for (RegionId src : reg.recompute->sources) {
        const std::size_t s = a.index.at(src);
        for (const Gap& h : gaps) {
          if (h.r != s || !covers(h, g.b)) continue;
          if (h.xr >= 0) m.row({{g.xr, 1}, {h.xr, 1}}, 'L', 1);
          if (h.xs >= 0 && h.inS < 0) m.row({{g.xr, 1}, {h.xs, 1}}, 'L', 1);
          if (h.xs >= 0 && h.inS >= 0) {
            const double back = static_cast<double>(t.regions[h.r].bytes) / bw_in;
            m.row({{S[g.b], 1}, {h.inS, -1}, {g.xr, -M}, {h.xs, -M}}, 'G', back - 2 * M);
          }
          for (auto [i, z] : h.z)
            if (i == g.b) m.row({{g.xr, 1}, {z, 1}}, 'L', 1);
        }
      }
  }
  // Copy engines: copy-outs in eviction order, restores in back-access order.
  std::vector<std::size_t> by_e, by_b;
  for (std::size_t k = 0; k < gaps.size(); ++k) {
    if (gaps[k].xs < 0) continue;
    by_e.push_back(k);
    if (gaps[k].inS >= 0) by_b.push_back(k);
  }
  std::stable_sort(by_e.begin(), by_e.end(),
                   [&](std::size_t x, std::size_t y) { return gaps[x].e < gaps[y].e; });
  std::stable_sort(by_b.begin(), by_b.end(),
                   [&](std::size_t x, std::size_t y) { return gaps[x].b < gaps[y].b; });
  auto chain = [&](const std::vector<std::size_t>& order, bool out) {
    int prev = -1;
    for (std::size_t k : order) {
      Gap& g = gaps[k];
      const double len = static_cast<double>(t.regions[g.r].bytes) / (out ? bw_out : bw_in);
      const int start = out ? g.outS : g.inS, end = out ? g.F : g.H;
      if (prev >= 0) {
        m.row({{start, 1}, {prev, -1}, {g.xs, -M}}, 'G', -M);
        m.row({{end, 1}, {prev, -1}}, 'G', 0);
      }
      m.row({{end, 1}, {start, -1}, {g.xs, -M}}, 'G', len - M);
      prev = end;
    }
    if (prev >= 0) m.row({{step, 1}, {prev, -1}}, 'G', 0);
  };
  chain(by_e, true);
  chain(by_b, false);
  // A restore takes its memory when it starts, and the simulator counts a copy-out in flight
  // as resident: so a region that must be off at the first launch over the budget after the
  // restore is issued (k), and was not yet off at the last launch before it (j), has finished
  // its copy-out before the restore starts. Without this the model lets a restore overlap the
  // copy-out that makes its room, which the simulator cannot run.
  {
    std::vector<std::map<std::size_t, int>> z_of(gaps.size());
    for (std::size_t k = 0; k < gaps.size(); ++k)
      for (auto [i, z] : gaps[k].z) z_of[k][i] = z;
    auto z_at = [&](std::size_t k, std::size_t i) {
      auto it = z_of[k].find(i);
      return it == z_of[k].end() ? -1 : it->second;
    };
    for (std::size_t k = 0; k < gaps.size(); ++k) {
      const Gap& g = gaps[k];
      if (g.inS < 0) continue;
      std::vector<std::pair<std::size_t, int>> before;  // g's z before its back-access, in order
      for (auto [i, z] : g.z)
        if (!g.wrap || i < g.b) before.push_back({i, z});
      for (std::size_t p = 0; p < before.size(); ++p) {
        const auto [j, zj] = before[p];
        const bool last = p + 1 == before.size();
        if (last && !over[g.b]) continue;
        const std::size_t next = last ? g.b : before[p + 1].first;
        const int znext = last ? -1 : before[p + 1].second;
        for (std::size_t h = 0; h < gaps.size(); ++h) {
          const int zh = h == k ? -1 : z_at(h, next);
          if (zh < 0) continue;
          // outE_h - inS_g <= M (2 - z_g,j + z_g,next - z_h,next + z_h,j)
          std::vector<std::pair<int, double>> terms = {
              {gaps[h].outE, 1}, {g.inS, -1}, {zj, M}, {zh, M}};
          if (znext >= 0) terms.push_back({znext, -M});
          if (const int zhj = z_at(h, j); zhj >= 0) terms.push_back({zhj, -M});
          m.row(terms, 'L', 2 * M);
        }
      }
    }
  }
  // Memory: every launch over the budget sheds at least its excess.
  for (std::size_t i = 0; i < n; ++i) {
    if (!over[i]) continue;
    std::vector<std::pair<int, double>> terms;
    for (const Gap& g : gaps)
      for (auto [j, z] : g.z)
        if (j == i) terms.push_back({z, static_cast<double>(t.regions[g.r].bytes) / mib});
    for (const Held& h : held)
      if (h.launch == i) terms.push_back({h.w, -static_cast<double>(t.regions[h.r].bytes) / mib});
    const double excess =
        (static_cast<double>(a.live_bytes[i]) - static_cast<double>(budget)) / mib;
    if (terms.empty()) return res.reason = "launch " + std::to_string(i) + " cannot shed", res;
    m.row(terms, 'G', excess);
  }
  res.binaries = m.binaries();
  res.rows = m.rows();

  Cbc_Model* cbc = m.get();
  Cbc_setObjSense(cbc, 1);
  Cbc_setLogLevel(cbc, 0);
  Cbc_setMaximumSeconds(cbc, o.time_limit_s);
  Cbc_setAllowableFractionGap(cbc, 1e-6);
  Cbc_setParameter(cbc, "threads", "1");
  Cbc_solve(cbc);
  const double* x = Cbc_getColSolution(cbc);
  if (Cbc_isProvenInfeasible(cbc) || !x) return res.reason = "no schedule fits the model", res;
  res.solved = true;
  res.optimal = Cbc_isProvenOptimal(cbc) != 0;
  res.step_us = Cbc_getObjValue(cbc);
  res.bound_us = Cbc_getBestPossibleObjValue(cbc);
  if (res.optimal) res.bound_us = res.step_us;

  // The schedule as a plan: each chosen eviction with the launch its restore is issued before.
  auto t0 = [&](std::size_t i) {
    double v = i > 0 ? x[S[i - 1]] : 0;
    if (prev_same[i] != kNoLaunch)
      v = std::max(v, x[S[prev_same[i]]] + t.launches[prev_same[i]].dur_us);
    return v;
  };
  res.plan.policy = "exact";
  for (const Gap& g : gaps) {
    const bool swap = g.xs >= 0 && x[g.xs] > 0.5, rc = g.xr >= 0 && x[g.xr] > 0.5;
    if (!swap && !rc) continue;
    bool off_somewhere = false;
    std::size_t last_off_before_b = kNoLaunch;
    for (auto [i, z] : g.z) {
      if (x[z] < 0.5) continue;
      off_somewhere = true;
      if (!g.tail && (!g.wrap || i < g.b))
        last_off_before_b = last_off_before_b == kNoLaunch ? i : std::max(last_off_before_b, i);
    }
    if (!off_somewhere) continue;
    PlanEntry e;
    e.region = t.regions[g.r].id;
    e.evict_after = g.e;
    e.back_access = g.b;
    if (rc) {
      e.kind = EvictKind::kRecompute;
      e.trigger = g.b;
    } else if (!g.tail) {
      e.kind = EvictKind::kSwap;
      std::size_t lo =
          last_off_before_b != kNoLaunch ? last_off_before_b + 1 : (g.wrap ? 0 : g.e + 1);
      std::size_t trig = lo;
      for (std::size_t i = lo; i <= g.b; ++i)
        if (t0(i) <= x[g.inS] + 1e-6) trig = i;
      e.trigger = trig;
      e.swap_in_us = static_cast<double>(t.regions[g.r].bytes) / bw_in;
    }
    res.plan.entries.push_back(e);
  }
  return res;
}

}  // namespace gswap::policy
