// capuchin.cpp: the Capuchin hybrid planner.
//
// Memory is tracked as the planned live-bytes curve over launch positions (a segment tree). An
// eviction lowers the curve where the region is off the device: from the first launch that
// starts after its swap-out has finished (or after the evicting access, for a drop) up to the
// launch before its restore begins. Copy engines are modelled as lists of busy intervals, so two
// swaps in one direction never overlap, which is what makes "fully hidden" an honest claim.
// Timing uses the ideal timeline; the simulator then measures the real effect.
#include "policy/capuchin.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <queue>
#include <set>

#include "policy/recompute_check.h"
#include "policy/segment_tree.h"
#include "policy/simulator.h"

namespace gswap::policy {
namespace {

constexpr double kEps = 1e-9;
constexpr std::size_t kMaxLineage = 16;  // sources visited while substituting dropped ones
// A swap whose round trip takes more than 1 / kShortGapFactor times its gap's compute is left to
// repair (eval_swap). Half: over the corpus the greedy plans are 4% closer to the bound than
// with none (geometric mean), and the searched plans the same within 0.1%; with 1 the greedy
// plans gain 8% but searched swap-only VGG-16 at 90% of its peak lands in a worse basin.
constexpr double kShortGapFactor = 0.5;

// One copy engine's schedule: disjoint busy intervals sorted by start, kept in blocks of at
// most kBlock intervals. Each block caches the largest gap between its own consecutive
// intervals, so a search for the first gap of a given length skips whole blocks of a saturated
// engine instead of walking thousands of small gaps (which made planning quadratic).
class Engine {
 public:
  // Earliest start >= t of a free interval of length len.
  double earliest(double t, double len) const {
    std::size_t b = block_of(t);
    while (b < blocks_.size()) {
      const Block& blk = blocks_[b];
      if (blk.iv.front().first >= t + len - kEps) return t;
      auto it = std::lower_bound(blk.iv.begin(), blk.iv.end(), std::make_pair(t, t));
      if (it != blk.iv.begin() && std::prev(it)->second > t) --it;
      for (; it != blk.iv.end(); ++it) {
        if (it->first >= t + len - kEps) return t;
        t = std::max(t, it->second);
      }
      // Skip the blocks with no gap of len (before or inside them) in O(log blocks).
      const std::size_t next = first_gap_at_least(b + 1, len - kEps);
      if (next >= blocks_.size()) return std::max(t, blocks_.back().iv.back().second);
      t = std::max(t, blocks_[next - 1].iv.back().second);
      b = next;
    }
    return t;
  }
  // Touching intervals are merged, so a saturated engine is one interval, not thousands.
  void insert(double s, double len) {
    std::pair<double, double> p{s, s + len};
    if (blocks_.empty()) {
      blocks_.push_back({{p}, 0});
      rebuild();
      return;
    }
    const std::size_t count = blocks_.size();
    std::size_t b = block_of(s);
    auto& iv = blocks_[b].iv;
    auto it = iv.insert(std::lower_bound(iv.begin(), iv.end(), p), p);
    if (it != iv.begin() && std::prev(it)->second >= it->first - kEps) {
      std::prev(it)->second = std::max(std::prev(it)->second, it->second);
      it = iv.erase(it) - 1;
    }
    while (std::next(it) != iv.end() && std::next(it)->first <= it->second + kEps) {
      it->second = std::max(it->second, std::next(it)->second);
      iv.erase(std::next(it));
    }
    // Merge across the boundary with the next blocks.
    while (b + 1 < blocks_.size() && blocks_[b + 1].iv.front().first <= iv.back().second + kEps) {
      auto& nx = blocks_[b + 1].iv;
      iv.back().second = std::max(iv.back().second, nx.front().second);
      nx.erase(nx.begin());
      if (nx.empty()) {
        blocks_.erase(blocks_.begin() + static_cast<std::ptrdiff_t>(b + 1));
      } else {
        refresh(b + 1);
        break;
      }
    }
    if (iv.size() > 2 * kBlock) {
      Block tail{std::vector<std::pair<double, double>>(iv.begin() + kBlock, iv.end()), 0};
      iv.resize(kBlock);
      blocks_.insert(blocks_.begin() + static_cast<std::ptrdiff_t>(b + 1), std::move(tail));
      refresh(b + 1);
    }
    refresh(b);
    if (blocks_.size() != count) {
      rebuild();
    } else {
      update(b);
      if (b + 1 < blocks_.size()) update(b + 1);
    }
  }

 private:
  static constexpr std::size_t kBlock = 64;
  struct Block {
    std::vector<std::pair<double, double>> iv;
    double max_gap = 0;  // largest gap between consecutive intervals of this block
  };
  // The block whose first interval starts at or before t (block 0 when none does).
  std::size_t block_of(double t) const {
    auto it = std::upper_bound(blocks_.begin(), blocks_.end(), t,
                               [](double v, const Block& b) { return v < b.iv.front().first; });
    return it == blocks_.begin() ? 0 : static_cast<std::size_t>(it - blocks_.begin()) - 1;
  }
  void refresh(std::size_t b) {
    Block& blk = blocks_[b];
    blk.max_gap = 0;
    for (std::size_t k = 1; k < blk.iv.size(); ++k)
      blk.max_gap = std::max(blk.max_gap, blk.iv[k].first - blk.iv[k - 1].second);
  }
  // Largest gap before or inside block b.
  double gap_of(std::size_t b) const {
    const double before =
        b == 0 ? 0 : blocks_[b].iv.front().first - blocks_[b - 1].iv.back().second;
    return std::max(before, blocks_[b].max_gap);
  }
  void rebuild() {
    size_ = 1;
    while (size_ < blocks_.size()) size_ <<= 1;
    tree_.assign(2 * size_, -1);
    for (std::size_t b = 0; b < blocks_.size(); ++b) tree_[size_ + b] = gap_of(b);
    for (std::size_t k = size_ - 1; k >= 1; --k)
      tree_[k] = std::max(tree_[2 * k], tree_[2 * k + 1]);
  }
  void update(std::size_t b) {
    std::size_t k = size_ + b;
    tree_[k] = gap_of(b);
    for (k /= 2; k >= 1; k /= 2) tree_[k] = std::max(tree_[2 * k], tree_[2 * k + 1]);
  }
  // First block >= from whose gap_of is at least len (blocks_.size() when none).
  std::size_t first_gap_at_least(std::size_t from, double len) const {
    if (from >= blocks_.size()) return blocks_.size();
    return first(1, 0, size_ - 1, from, len);
  }
  std::size_t first(std::size_t k, std::size_t lo, std::size_t hi, std::size_t from,
                    double len) const {
    if (hi < from || tree_[k] < len) return blocks_.size();
    if (lo == hi) return lo < blocks_.size() ? lo : blocks_.size();
    const std::size_t mid = (lo + hi) / 2;
    const std::size_t got = first(2 * k, lo, mid, from, len);
    return got != blocks_.size() ? got : first(2 * k + 1, mid + 1, hi, from, len);
  }
  std::vector<Block> blocks_;
  std::vector<double> tree_;  // max of gap_of over block ranges
  std::size_t size_ = 1;
};

// A phase-3 choice: its cost per byte and its rank in repair's order. Ties go to the lower rank,
// as a scan in that order keeping only strictly cheaper choices would have it.
struct RepairChoice {
  double cost = 0;
  std::size_t rank = kNoLaunch;
  bool beaten_by(double c, std::size_t r) const {
    return rank == kNoLaunch || c < cost || (c == cost && r < rank);
  }
};

// Phase 3's upgrades: chosen swaps that free their region from launch f, once their copy-out is
// done, and whose relief may be extended back to the launch after their access. At a launch i
// with access < i < f, one costs its copy-out's end minus i's start, per byte. A saturated copy
// engine leaves thousands open at once, so they are kept by size class, each sorted by the
// copy-out's end: within a class the cost grows with it, and the class's largest size bounds
// every later member's cost from below, which ends the scan after the few that can still win.
class LateReliefs {
 public:
  void add(std::size_t rank, double out_end, std::uint64_t bytes, std::size_t f) {
    Class& c = classes_[class_of(bytes)];
    c.members.insert({out_end, rank, f, bytes});
    c.max_bytes = std::max(c.max_bytes, static_cast<double>(bytes));
  }
  void remove(std::size_t rank, double out_end, std::uint64_t bytes) {
    auto it = classes_.find(class_of(bytes));
    it->second.members.erase({out_end, rank, 0, 0});
    if (it->second.members.empty()) classes_.erase(it);
  }
  // Lowers *best to the cheapest member open at launch i (starting at start_us), if cheaper.
  // Members no longer open (f <= i) leave as they are met; i never moves back.
  void cheapest(std::size_t i, double start_us, RepairChoice* best) {
    for (auto cl = classes_.begin(); cl != classes_.end();) {
      auto& members = cl->second.members;
      for (auto it = members.begin(); it != members.end();) {
        if (it->f <= i) {
          it = members.erase(it);
          continue;
        }
        const double wait = std::max(0.0, it->out_end - start_us);
        if (best->rank != kNoLaunch && wait / cl->second.max_bytes > best->cost) break;
        const double cost = wait / static_cast<double>(it->bytes);
        if (best->beaten_by(cost, it->rank)) *best = {cost, it->rank};
        ++it;
      }
      cl = members.empty() ? classes_.erase(cl) : std::next(cl);
    }
  }

 private:
  struct Member {
    double out_end;
    std::size_t rank, f;
    std::uint64_t bytes;
    bool operator<(const Member& o) const {
      return out_end != o.out_end ? out_end < o.out_end : rank < o.rank;
    }
  };
  struct Class {
    std::set<Member> members;
    double max_bytes = 0;  // of every member ever added: a bound, never lowered
  };
  // Eight classes per power of two, so members of a class differ in size by under 13%.
  static unsigned class_of(std::uint64_t bytes) {
    const int w = std::bit_width(bytes);
    return w <= 4 ? static_cast<unsigned>(w)
                  : static_cast<unsigned>(w << 3) | static_cast<unsigned>((bytes >> (w - 4)) & 7);
  }
  std::map<unsigned, Class> classes_;
};

// Candidates are visited in the order of their keys, at random in memory: on a 200,000-launch
// iteration the planner waited on the cache for the next one more than for anything else.
// Fetching the next one while the current one is evaluated took 5-10% off its time there.
template <typename T>
void prefetch(const T& x) {
  __builtin_prefetch(&x);
}
constexpr std::size_t kPrefetchAhead = 4;

// The curve is in signed bytes. A budget of 2^63 bytes or more fits every launch; converted as it
// is, it would wrap negative and evict everything.
std::int64_t signed_budget(std::uint64_t budget) {
  constexpr auto kMax = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  return static_cast<std::int64_t>(std::min(budget, kMax));
}

struct Chosen {
  std::size_t e, back;  // off the device after access e, back from launch `back` on (the
                        // trigger of a swap, the back-access of a recompute)
  EvictKind kind;
  bool wrap;
};

struct ChosenRecompute {
  std::size_t r, e, b;
  double cost;                       // including substituted sources
  std::vector<std::size_t> sources;  // effective sources after substitution
};

struct Cand {
  std::size_t r, e, b;
  bool wrap;
  bool tail = false;  // after the last access until the region is freed (b = kNoLaunch)
  // The region's size, kept here: the heaps probe candidates at random, and a second lookup, in
  // the trace's regions, doubled the cache misses.
  std::uint64_t bytes = 0;
};

struct SwapEval {
  std::size_t f, t;  // off the device over [f, t-1] (wrapping past the end when wrap)
  double out_start, in_start, exposure;
};

struct RecomputeEval {
  double cost;  // own + substituted sources + repeated recomputation for dependents
  std::vector<std::size_t> sources;
  std::int64_t temp_bytes = 0;     // substituted intermediates that exist at b while recomputing
  std::vector<std::size_t> chain;  // those intermediates
};

class Planner {
 public:
  Planner(const Analysis& a, std::uint64_t budget, const CapuchinOptions& o)
      : a_(a),
        t_(*a.trace),
        budget_(signed_budget(budget)),
        o_(o),
        cur_(std::vector<std::int64_t>(a.live_bytes.begin(), a.live_bytes.end())),
        chosen_(t_.regions.size()),
        readers_(t_.regions.size()),
        starts_dropped_(t_.regions.size(), false) {
    bw_out_ = t_.device.d2h_bytes_per_s / 1e6;
    bw_in_ = t_.device.h2d_bytes_per_s / 1e6;
    for (const Launch& l : t_.launches) multi_stream_ |= l.stream != t_.launches[0].stream;
    // Idle regions stay on the host under pressure (Analysis::parked): they take no memory.
    for (std::size_t r = 0; r < t_.regions.size(); ++r)
      if (a_.parked(r, static_cast<std::uint64_t>(budget_)))
        cur_.add(a_.first_live[r], a_.last_live[r], -static_cast<std::int64_t>(bytes(r)));
  }

  Plan run() {
    Plan plan;
    plan.policy = o_.allow_swap ? (o_.allow_recompute ? "capuchin" : "swap-only") : "recompute";
    if (std::string why = impossible_budget_reason(a_, static_cast<std::uint64_t>(budget_));
        !why.empty()) {
      plan.feasible = false;
      plan.reason = why;
      return plan;
    }
    if (cur_.max_all() <= budget_) return plan;
    collect_candidates();

    // Phase 0: a recomputable region that is never read again, freed in the iteration, leaves
    // for free.
    if (o_.allow_recompute)
      for (std::size_t k = 0; k < cands_.size(); ++k) {
        const Cand& c = cands_[k];
        if (c.tail && !a_.live_at_end[c.r] && t_.regions[c.r].recompute &&
            cur_.max(c.e + 1, a_.last_live[c.r]) > budget_ && drop_keeps_recomputations(c))
          apply_drop(k, plan);
      }

    // Phase 1: swaps in FT order while they stay fully hidden.
    if (o_.allow_swap) {
      std::vector<std::pair<double, std::size_t>> by_ft;
      for (std::size_t k = 0; k < cands_.size(); ++k) {
        const Cand& c = cands_[k];
        if (taken_[k]) continue;
        if (c.tail) {
          const double end =
              a_.last_live[c.r] + 1 < a_.n ? a_.start_us[a_.last_live[c.r] + 1] : a_.ideal_step_us;
          by_ft.emplace_back(end - a_.end_us[c.e] - static_cast<double>(c.bytes) / bw_out_, k);
          continue;
        }
        by_ft.emplace_back(swap_timing(a_, c.bytes, c.e, c.b).free_time_us, k);
      }
      std::sort(by_ft.begin(), by_ft.end(), [](auto x, auto y) {
        return x.first != y.first ? x.first > y.first : x.second < y.second;
      });
      for (std::size_t j = 0; j < by_ft.size(); ++j) {
        const auto [ft, k] = by_ft[j];
        if (ft <= 0 || cur_.max_all() <= budget_) break;
        if (cancelled()) return cancelled_plan(plan);
        if (j + kPrefetchAhead < by_ft.size()) prefetch(cands_[by_ft[j + kPrefetchAhead].second]);
        if (taken_[k]) continue;
        auto ev = eval_swap(cands_[k]);
        if (ev && ev->exposure <= kEps) apply_swap(k, *ev, plan);
      }
    }

    // Phase 2: the best remaining swap (least exposed time per byte) against the best
    // recompute (highest MSPS), lazily re-evaluated since both only get worse as plans fill.
    using Item = std::pair<double, std::size_t>;  // (cost per byte, candidate)
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> swaps, recomputes;
    // A candidate's key, and the evaluation it came from (kept for the one a step applies: nothing
    // changes between its probe and its use).
    std::optional<SwapEval> swap_ev;
    RecomputeEval recompute_ev;
    auto key = [&](std::size_t k, bool is_swap) -> std::optional<double> {
      const double by = static_cast<double>(cands_[k].bytes);
      if (is_swap) {
        swap_ev = eval_swap_any(cands_[k]);
        return swap_ev ? std::optional<double>(swap_ev->exposure / by) : std::nullopt;
      }
      return eval_recompute(cands_[k], recompute_ev) ? std::optional<double>(recompute_ev.cost / by)
                                                     : std::nullopt;  // 1 / MSPS
    };
    for (std::size_t k = 0; k < cands_.size(); ++k) {
      if (taken_[k]) continue;
      if (o_.allow_swap)
        if (auto v = key(k, true)) swaps.emplace(*v, k);
      if (o_.allow_recompute && !cands_[k].wrap && !cands_[k].tail &&
          t_.regions[cands_[k].r].recompute)
        if (auto v = key(k, false)) recomputes.emplace(*v, k);
    }
    // Keys only grow as the plan fills (engines get busier, sources get dropped), so a stored key
    // is a lower bound: once the best re-evaluated value is no worse than the next stored key, it
    // is the true best. Re-evaluation is capped per step to keep planning near-linear; the cap
    // only matters when many candidates tie closely.
    constexpr int kMaxProbes = 4;
    std::optional<SwapEval> best_swap;
    RecomputeEval best_recompute;
    auto best = [&](auto& heap, bool is_swap) -> std::optional<Item> {
      std::optional<Item> found;
      std::vector<Item>& back = back_;
      back.clear();
      int probes = 0;
      while (!heap.empty()) {
        auto [stored, k] = heap.top();
        if (found && (stored >= found->first - kEps || probes >= kMaxProbes)) break;
        heap.pop();
        if (!heap.empty()) prefetch(cands_[heap.top().second]);  // most likely the next probe
        if (taken_[k]) continue;
        auto v = key(k, is_swap);
        if (!v) continue;  // no longer relieves anything
        ++probes;
        if (!found || *v < found->first) {
          if (found) back.push_back(*found);
          found = Item{*v, k};
          if (is_swap)
            best_swap = swap_ev;
          else
            best_recompute = recompute_ev;
        } else {
          back.push_back({*v, k});
        }
      }
      for (const Item& it : back) heap.push(it);
      return found;
    };
    while (cur_.max_all() > budget_) {
      if (cancelled()) return cancelled_plan(plan);
      auto r = best(recomputes, false);
      // Stored keys are lower bounds, so a swap heap whose smallest key is already worse than the
      // best recompute cannot win this step and need not be re-evaluated.
      std::optional<Item> s;
      if (!r || swaps.empty() || swaps.top().first <= r->first) s = best(swaps, true);
      if (!s && !r) break;
      if (s && (!r || s->first <= r->first)) {
        if (r) recomputes.push(*r);
        apply_swap(s->second, *best_swap, plan);
      } else {
        if (s) swaps.push(*s);
        apply_recompute(r->second, std::move(best_recompute), plan);
      }
    }
    if (o_.allow_swap) repair(plan);
    if (cancelled()) return cancelled_plan(plan);
    if (cur_.max_all() > budget_) {
      plan.fits = false;
      plan.reason = unplannable_budget_reason(a_, static_cast<std::uint64_t>(budget_));
      if (plan.reason.empty())
        plan.reason = "no further eviction helps; the simulator evicts the rest on demand";
    }
    return plan;
  }

 private:
  std::uint64_t bytes(std::size_t r) const { return t_.regions[r].bytes; }

  bool cancelled() const { return o_.cancel && o_.cancel->load(std::memory_order_relaxed); }
  static Plan cancelled_plan(Plan& plan) {
    plan.entries.clear();
    plan.feasible = plan.fits = false;
    plan.reason = "planning cancelled";
    return std::move(plan);
  }

  // The swap that relieves memory without stalling if there is one, else the one that frees the
  // region from the launch after its eviction and waits for the copy where the memory is needed.
  std::optional<SwapEval> eval_swap_any(const Cand& c) const {
    return eval_swap(c, Relief::kLateElseEarly);
  }

  // Phase 3: while some launch is still over the budget, relieve the first one with whichever
  // eviction covering it exposes the least time per byte: a new swap freed right after its
  // access, or an already chosen swap whose relief is extended back to the launch after its
  // access (it then waits for its copy-out there). Position by position, so it ends either with
  // a plan that fits or with a launch that nothing can relieve.
  //
  // Repair only lowers the curve, so the first launch over the budget never moves back, and each
  // candidate can relieve it over one fixed range of launches (two for a wrap). Candidates join
  // when that range begins and leave once it is past or they are taken: a step looks only at
  // the ones that can relieve its launch, not at every candidate evicted before it (which made
  // repair quadratic in the iteration's length).
  void repair(Plan& plan) {
    if (cur_.max_all() <= budget_) return;
    const std::size_t n = a_.n;
    std::vector<std::size_t> order(cands_.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    // Wraps first (any of them may cover any launch), then the others by eviction point; ties
    // between equally cheap choices go to the first in this order.
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      const Cand &p = cands_[x], &q = cands_[y];
      return p.wrap != q.wrap ? p.wrap : (p.e != q.e ? p.e < q.e : x < y);
    });
    std::vector<std::size_t> rank(cands_.size());
    for (std::size_t p = 0; p < order.size(); ++p) rank[order[p]] = p;

    std::vector<Span> fresh, late;
    repair_spans(plan, fresh, late);
    std::vector<Span> open;  // fresh spans begun, not yet known to be past or taken
    LateReliefs upgrades;
    std::size_t next_fresh = 0, next_late = 0;
    while (cur_.max_all() > budget_ && !cancelled()) {
      const std::size_t i = cur_.find_first_above(0, n - 1, budget_);
      for (; next_fresh < fresh.size() && fresh[next_fresh].from <= i; ++next_fresh)
        if (fresh[next_fresh].to >= i) open.push_back(fresh[next_fresh]);
      for (; next_late < late.size() && late[next_late].from <= i; ++next_late) {
        const Span& s = late[next_late];
        if (s.to >= i) upgrades.add(rank[s.k], out_end_[s.k], bytes(cands_[s.k].r), s.to + 1);
      }
      RepairChoice best;
      upgrades.cheapest(i, a_.start_us[i], &best);
      const std::optional<SwapEval> ev = cheapest_new_swap(i, rank, open, &best);
      if (best.rank == kNoLaunch) return;
      const std::size_t k = order[best.rank];
      if (taken_[k]) {  // an upgrade
        const Cand& c = cands_[k];
        cur_.add(c.e + 1, std::min(taken_f_[k], n) - 1, -static_cast<std::int64_t>(c.bytes));
        upgrades.remove(best.rank, out_end_[k], c.bytes);
        taken_f_[k] = c.e + 1;
      } else {
        apply_swap(k, *ev, plan);
      }
    }
  }

  struct Span {
    std::size_t from, to, k;  // candidate k may relieve launches [from, to]
  };

  // Repair's candidates by the launches they may relieve, each list sorted by its first launch:
  // `fresh`, the new swaps (a wrap covers two ranges); `late`, the chosen swaps that free their
  // region only once the copy-out is done, from the access up to that launch (the upgrades).
  void repair_spans(const Plan& plan, std::vector<Span>& fresh, std::vector<Span>& late) const {
    const std::size_t n = a_.n;
    for (std::size_t k = 0; k < cands_.size(); ++k) {
      const Cand& c = cands_[k];
      if (c.bytes == 0) continue;  // frees nothing
      if (!taken_[k]) {
        if (!c.wrap) {
          fresh.push_back({c.e + 1, c.tail ? a_.last_live[c.r] : c.b - 1, k});
          continue;
        }
        if (c.b > 0) fresh.push_back({0, c.b - 1, k});
        if (c.e + 1 < n) fresh.push_back({c.e + 1, n - 1, k});
      } else if (entry_of_[k] != kNoLaunch && plan.entries[entry_of_[k]].kind == EvictKind::kSwap &&
                 taken_f_[k] > c.e + 1) {
        late.push_back({c.e + 1, taken_f_[k] - 1, k});
      }
    }
    auto by_from = [](const Span& x, const Span& y) {
      return x.from != y.from ? x.from < y.from : x.k < y.k;
    };
    std::sort(fresh.begin(), fresh.end(), by_from);
    std::sort(late.begin(), late.end(), by_from);
  }

  // Lowers *best to the cheapest new swap in `open` that is off the device at launch i, and
  // returns its evaluation when it did. Spans past i or taken leave `open` as they are met.
  std::optional<SwapEval> cheapest_new_swap(std::size_t i, const std::vector<std::size_t>& rank,
                                            std::vector<Span>& open, RepairChoice* best) const {
    std::optional<SwapEval> found;
    for (std::size_t j = 0; j < open.size();) {
      const std::size_t k = open[j].k;
      if (taken_[k] || open[j].to < i) {
        open[j] = open.back();
        open.pop_back();
        continue;
      }
      ++j;
      const Cand& c = cands_[k];
      auto ev = eval_swap(c, Relief::kEarly);
      if (!ev) continue;
      const bool off_at_i = c.wrap ? (i >= ev->f || i < ev->t) : (ev->f <= i && i < ev->t);
      if (!off_at_i) continue;
      const double cost = ev->exposure / static_cast<double>(c.bytes);
      if (best->beaten_by(cost, rank[k])) {
        *best = {cost, rank[k]};
        found = ev;
      }
    }
    return found;
  }

  void collect_candidates() {
    const std::size_t n = a_.n;
    // Prefix count of launches over budget, to keep only gaps that span the peak period.
    std::vector<std::size_t> over(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i)
      over[i + 1] = over[i] + (static_cast<std::int64_t>(a_.live_bytes[i]) > budget_);
    auto spans = [&](std::size_t lo, std::size_t hi) {  // inclusive
      return lo <= hi && hi < n && over[hi + 1] > over[lo];
    };
    for (std::size_t r = 0; r < t_.regions.size(); ++r) {
      if (!a_.evictable(r)) continue;
      const auto& acc = a_.accesses[r];
      for (std::size_t k = 0; k + 1 < acc.size(); ++k) {
        if (spans(acc[k] + 1, acc[k + 1] - 1)) cands_.push_back({r, acc[k], acc[k + 1], false});
      }
      if (a_.live_at_start[r] && a_.live_at_end[r] &&
          (spans(acc.back() + 1, n - 1) || (acc.front() > 0 && spans(0, acc.front() - 1))))
        cands_.push_back({r, acc.back(), acc.front(), true});
      // Read for the last time, and freed only later (its data is never needed again) or
      // outliving the iteration, allocated in it (Analysis::has_tail).
      if (a_.has_tail(r) && spans(acc.back() + 1, a_.last_live[r]))
        cands_.push_back({r, acc.back(), kNoLaunch, false, true});
    }
    for (Cand& c : cands_) c.bytes = bytes(c.r);
    taken_.assign(cands_.size(), false);
    entry_of_.assign(cands_.size(), kNoLaunch);
    taken_f_.assign(cands_.size(), 0);
    out_end_.assign(cands_.size(), 0);
  }

  // Is region s off the device by a plan choice at launch p (a recompute there would need it)?
  const Chosen* evicted_at(std::size_t s, std::size_t p) const {
    for (const Chosen& c : chosen_[s]) {
      if (!c.wrap && c.e < p && (c.back == kNoLaunch || p < c.back)) return &c;
      if (c.wrap && (p > c.e || p < c.back)) return &c;
    }
    return nullptr;
  }

  // Off the device over [f, t-1]: from the launch after the eviction (`early`) or from the first
  // launch that starts after the copy-out has finished on the ideal timeline, up to the launch
  // before the restore is issued. Memory is accounted by position only: where a launch needs
  // the memory before the copy-out is done, the simulator (and the library) wait for the copy,
  // which is priced as exposed time here, never by evicting something else.
  enum class Relief { kLate, kEarly, kLateElseEarly };
  std::optional<SwapEval> eval_swap(const Cand& c, Relief relief = Relief::kLate) const {
    const std::size_t n = a_.n;
    const std::int64_t b = static_cast<std::int64_t>(c.bytes);
    const double so = static_cast<double>(b) / bw_out_, si = static_cast<double>(b) / bw_in_;
    SwapEval ev{};
    ev.out_start = d2h_.earliest(a_.end_us[c.e], so);
    const double out_end = ev.out_start + so;
    const std::size_t f_time = a_.first_start_at_or_after(out_end, c.e + 1);
    ev.f = relief == Relief::kEarly ? c.e + 1 : f_time;
    // Does the swap relieve a launch over the budget when off from f? With kLateElseEarly, the
    // late relief is tried first and the early one only when it relieves nothing.
    auto relieves = [&](std::size_t t, auto covered) {
      if (covered(ev.f) > budget_) return true;
      if (relief != Relief::kLateElseEarly || ev.f == c.e + 1) return false;
      ev.f = c.e + 1;
      return (c.wrap || t > ev.f) && covered(ev.f) > budget_;
    };
    if (c.tail) {  // never read again: off until it is freed, no restore
      for (std::size_t qi : readers_[c.r])
        if (recomputes_[qi].b > c.e) return std::nullopt;
      ev.t = a_.last_live[c.r] + 1;
      auto covered = [&](std::size_t f) {
        return ev.t > f ? cur_.max(f, ev.t - 1) : std::numeric_limits<std::int64_t>::min();
      };
      if (!relieves(ev.t, covered)) return std::nullopt;
      ev.exposure = out_stall(ev.f, ev.t, f_time, out_end);
      return ev;
    }
    // A swap whose copies, out and back in on idle links, take more than twice the compute of
    // the gap it frees cannot hide: it moves a stall, and a region read often (a GEMM workspace
    // read by every GEMM) offers hundreds of such gaps, each paying the round trip. Phases 1 and
    // 2 leave them to repair (Relief::kEarly), which takes one only where nothing else relieves a
    // launch. On a 48-layer transformer at 30% of its peak the greedy plan swapped the 32 MiB
    // cuBLAS workspace between GEMMs 241 times and ran 31.8 times the ideal step, behind no plan
    // at all (25.6); now 10.0.
    if (!c.wrap && relief != Relief::kEarly &&
        a_.start_us[c.b] - a_.end_us[c.e] < kShortGapFactor * (so + si))
      return std::nullopt;
    std::size_t t = a_.last_start_at_or_before(a_.start_us[c.b] - si, c.b);
    if (!c.wrap) t = std::min(std::max(t, f_time), c.b);
    // Never start a restore inside the peak window: from the trigger on, the region is back in
    // the planned curve (which still counts it there), so that part must already fit.
    if (t < c.b) {
      std::size_t k = cur_.find_last_above(t, c.b - 1, budget_);
      if (k != MaxSegmentTree::npos) t = k + 1;
    }
    ev.t = t;
    // A swap must not take away a source that a chosen recomputation reads while it is off the
    // device (before its trigger); once the restore has started, the recomputation waits for it.
    for (std::size_t qi : readers_[c.r]) {
      const ChosenRecompute& q = recomputes_[qi];
      if (c.wrap ? (q.b > c.e || q.b < t) : (c.e < q.b && q.b < t)) return std::nullopt;
    }
    auto covered = [&](std::size_t f) {
      constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::min();
      if (c.wrap)
        return std::max(f < n ? cur_.max(f, n - 1) : kNone, t > 0 ? cur_.max(0, t - 1) : kNone);
      return t > f ? cur_.max(f, t - 1) : kNone;
    };
    if (!relieves(t, covered)) return std::nullopt;  // relieves no launch over budget
    ev.in_start = c.wrap ? h2d_.earliest(a_.start_us[t], si)
                         : h2d_.earliest(std::max(a_.start_us[t], out_end), si);
    ev.exposure = std::max(0.0, ev.in_start + si - a_.start_us[c.b]);
    if (!c.wrap) ev.exposure += out_stall(ev.f, t, f_time, out_end);
    // A wrapping swap-out runs after the iteration's last access; what it adds past the end of
    // the step is exposed too.
    if (c.wrap) ev.exposure += std::max(0.0, out_end - a_.ideal_step_us);
    return ev;
  }

  // The wait for a copy-out ending at `out_end` at the first launch in [f, t-1] (before f_time,
  // the first launch the copy is done for) that needs the memory.
  double out_stall(std::size_t f, std::size_t t, std::size_t f_time, double out_end) const {
    if (f >= f_time || t <= f) return 0;
    const std::size_t k = cur_.find_first_above(f, std::min(t, f_time) - 1, budget_);
    return k == MaxSegmentTree::npos ? 0 : std::max(0.0, out_end - a_.start_us[k]);
  }

  // Whether a drop of region r after its access e has released r's memory when launch b starts,
  // so that b, reading r, recomputes it. The simulator releases a drop once every launch that
  // used r has ended, and a read while the drop is pending keeps r instead, resident from then
  // on where the plan counts it off. On one stream every such launch ends before b starts; on
  // several, the planner's timeline is the ideal one: they must end there before b starts.
  bool released_before(std::size_t r, std::size_t e, std::size_t b) const {
    if (!multi_stream_) return true;
    const std::uint32_t stream = t_.launches[b].stream;
    const auto& acc = a_.accesses[r];
    // The recomputation for b may run as soon as launch b - 1 has started. A launch k on another
    // stream has ended by then only if a later launch on k's stream is issued before b - 1 (it
    // starts after k ends, and b - 1 no earlier than it): whatever the stalls, not only on the
    // ideal timeline (which a stall of 1 us defeated).
    return std::all_of(acc.begin(), std::upper_bound(acc.begin(), acc.end(), e),
                       [&](std::size_t k) {
                         return t_.launches[k].stream == stream || a_.next_on_stream[k] + 1 <= b;
                       });
  }

  // Fills ev (its lists cleared first, their memory kept: this runs for every heap probe) and
  // says whether the recomputation is possible.
  bool eval_recompute(const Cand& c, RecomputeEval& ev) const {
    if (c.wrap || c.b <= c.e + 1) return false;  // gaps of one region never overlap
    if (cur_.max(c.e + 1, c.b - 1) <= budget_) return false;
    ev.sources.clear();
    ev.chain.clear();
    ev.temp_bytes = 0;
    // Algorithm 2: a source that is itself dropped at b is replaced by its own sources, and its
    // cost is paid again.
    const Region& reg = t_.regions[c.r];
    ev.cost = reg.recompute->cost_us;
    std::vector<std::size_t>& work = work_;  // scratch: this runs for every heap probe
    work.assign(a_.sources[c.r].begin(), a_.sources[c.r].end());
    std::size_t guard = 0;
    while (!work.empty()) {
      // Long chains of dropped sources are never worth recomputing (each link is paid again),
      // and a cyclic lineage cannot be recomputed at all.
      if (++guard > kMaxLineage) return false;
      const std::size_t s = work.back();
      work.pop_back();
      if (s == kNoRegion) return false;  // a source the trace does not know
      if (s == c.r || a_.first_live[s] > c.b || a_.last_live[s] < c.b) return false;
      // An idle region parked on the host (no launch touches it) would have to come back on
      // demand, evicting something the plan does not count.
      if (a_.accesses[s].empty() && a_.parked(s, static_cast<std::uint64_t>(budget_))) return false;
      if (const Chosen* ch = evicted_at(s, c.b)) {
        if (ch->kind == EvictKind::kSwap || !t_.regions[s].recompute ||
            !released_before(s, ch->e, c.b))
          return false;
        ev.cost += t_.regions[s].recompute->cost_us;
        ev.temp_bytes += static_cast<std::int64_t>(bytes(s));
        ev.chain.push_back(s);
        work.insert(work.end(), a_.sources[s].begin(), a_.sources[s].end());
        continue;
      }
      if (std::find(ev.sources.begin(), ev.sources.end(), s) == ev.sources.end())
        ev.sources.push_back(s);
    }
    if (!fits_beside_sources(c.b, ev.sources)) return false;
    // Repeated recomputation: chosen targets that read this region while it is dropped will
    // recompute it again.
    std::size_t dependents = 0;
    for (std::size_t qi : readers_[c.r]) {
      const std::size_t qb = recomputes_[qi].b;
      if (!(c.e < qb && qb < c.b)) continue;
      if (!released_before(c.r, c.e, qb)) return false;
      ++dependents;
      // They will recompute this region at their own back-access, through the same chain: its
      // sources must be there then too, not yet freed and not off the device.
      for (const auto* v : {&ev.sources, &ev.chain})
        for (std::size_t s : *v)
          if (a_.first_live[s] > qb || a_.last_live[s] < qb) return false;
      for (std::size_t s : ev.sources)
        if (evicted_at(s, qb)) return false;
      // The chain was worked out at c.b: a member swapped out at qb is a source it cannot read.
      for (std::size_t s : ev.chain)
        if (const Chosen* ch = evicted_at(s, qb); ch && ch->kind == EvictKind::kSwap) return false;
      // And beside the sources of their own that they read.
      std::vector<std::size_t>& reads = reads_;
      reads.assign(ev.sources.begin(), ev.sources.end());
      for (std::size_t s : recomputes_[qi].sources)
        if (s != c.r && std::find(reads.begin(), reads.end(), s) == reads.end()) reads.push_back(s);
      if (!fits_beside_sources(qb, reads)) return false;
    }
    ev.cost += reg.recompute->cost_us * static_cast<double>(dependents);
    ev.cost = std::max(ev.cost, 1e-3);
    return true;
  }

  // Whether a recomputation at launch b fits: what b touches and the regions too small to evict
  // (Analysis::min_resident), and beside them the regions it reads (`reads`, each once). Those
  // stay on the device while b runs, so where they cannot fit beside it, neither the simulator
  // nor the library can recompute there: room for the region would have to come from a source
  // it is recomputed from.
  bool fits_beside_sources(std::size_t b, const std::vector<std::size_t>& reads) const {
    std::int64_t need = static_cast<std::int64_t>(a_.min_resident[b]);
    for (std::size_t s : reads)  // sources are live at b: small ones are in min_resident
      if (bytes(s) >= t_.device.min_evictable_bytes) need += static_cast<std::int64_t>(bytes(s));
    if (need <= budget_) return true;
    // Sources that b touches itself are in min_resident already (looked up only here: this runs
    // for every heap probe).
    const std::vector<std::size_t>& touched = a_.touched[b];
    for (std::size_t s : reads)
      if (bytes(s) >= t_.device.min_evictable_bytes &&
          std::find(touched.begin(), touched.end(), s) != touched.end())
        need -= static_cast<std::int64_t>(bytes(s));
    return need <= budget_;
  }

  void apply_swap(std::size_t k, const SwapEval& ev, Plan& plan) {
    const Cand& c = cands_[k];
    const std::uint64_t b = c.bytes;
    const double so = static_cast<double>(b) / bw_out_, si = static_cast<double>(b) / bw_in_;
    const std::int64_t d = -static_cast<std::int64_t>(b);
    if (c.wrap) {
      if (ev.f < a_.n) cur_.add(ev.f, a_.n - 1, d);
      if (ev.t > 0) cur_.add(0, ev.t - 1, d);
    } else {
      cur_.add(ev.f, ev.t - 1, d);
    }
    d2h_.insert(ev.out_start, so);
    if (!c.tail) h2d_.insert(ev.in_start, si);
    chosen_[c.r].push_back({c.e, c.tail ? kNoLaunch : ev.t, EvictKind::kSwap, c.wrap});
    taken_[k] = true;
    taken_f_[k] = ev.f;
    out_end_[k] = ev.out_start + so;
    entry_of_[k] = plan.entries.size();
    PlanEntry e;
    e.region = t_.regions[c.r].id;
    e.kind = EvictKind::kSwap;
    e.evict_after = c.e;
    e.trigger = c.tail ? kNoLaunch : ev.t;
    e.back_access = c.b;
    e.swap_in_us = c.tail ? 0 : si;
    plan.entries.push_back(e);
  }

  // Whether dropping c's region after its last read leaves every recomputation able to run with
  // the memory the plan counts. No chosen recomputation may read it while it is gone. And where
  // it is the next instance of a region carried over, that region starts the next iteration
  // dropped and is recomputed at its first use (the simulator's steady state): its sources must
  // be on the device there, none of them dropped or swapped itself (a chain whose intermediates
  // the plan would not count). The greedy planner dropped both a region and the next instance
  // of one recomputed from it, and the simulator evicted on demand for the intermediate.
  bool drop_keeps_recomputations(const Cand& c) const {
    for (std::size_t qi : readers_[c.r])
      if (recomputes_[qi].b > c.e) return false;
    const std::size_t p = a_.prev_instance[c.r];
    if (p == kNoRegion) return true;
    // p then starts the iteration dropped, until its first use (for good when it has none): a
    // chosen recomputation reading it before then would recompute it first, through sources the
    // plan does not count. (A region carried over that no launch touches, itself the source of
    // one recomputed at its first use: the greedy plan dropped the next instances of both, said
    // it fit, and the simulator brought the untouched region's own source back on demand.)
    const std::size_t first = a_.accesses[p].empty() ? kNoLaunch : a_.accesses[p].front();
    for (std::size_t qi : readers_[p])
      if (recomputes_[qi].b <= first) return false;
    if (first == kNoLaunch) return true;
    // One that cannot start the iteration dropped makes the simulator keep a copy of this one
    // instead (a copy-out, and a restore at that first use): no drop for free.
    if (!a_.starts_recomputable(p)) return false;
    for (std::size_t s : a_.sources[p])
      if (s == kNoRegion || s == p || evicted_at(s, first) || starts_dropped_[s] ||
          a_.parked(s, static_cast<std::uint64_t>(budget_)))
        return false;
    return true;
  }

  // A recomputable region dropped after its last read: nothing brings it back. Where it is the
  // next instance of a region carried over, that region is recomputed at its first use in the
  // next iteration: a recomputation reading its sources there, which no later eviction may take.
  void apply_drop(std::size_t k, Plan& plan) {
    const Cand& c = cands_[k];
    if (const std::size_t p = a_.prev_instance[c.r]; p != kNoRegion) starts_dropped_[p] = true;
    if (const std::size_t p = a_.prev_instance[c.r];
        p != kNoRegion && !a_.accesses[p].empty() && t_.regions[p].recompute) {
      const std::size_t first = a_.accesses[p].front();
      std::vector<std::size_t> sources(a_.sources[p].begin(), a_.sources[p].end());
      for (std::size_t s : sources) readers_[s].push_back(recomputes_.size());
      recomputes_.push_back({p, 0, first, t_.regions[p].recompute->cost_us, std::move(sources)});
    }
    cur_.add(c.e + 1, a_.last_live[c.r], -static_cast<std::int64_t>(c.bytes));
    chosen_[c.r].push_back({c.e, kNoLaunch, EvictKind::kRecompute, false});
    taken_[k] = true;
    PlanEntry e;
    e.region = t_.regions[c.r].id;
    e.kind = EvictKind::kRecompute;
    e.evict_after = c.e;
    plan.entries.push_back(e);
  }

  void apply_recompute(std::size_t k, RecomputeEval ev, Plan& plan) {
    const Cand& c = cands_[k];
    cur_.add(c.e + 1, c.b - 1, -static_cast<std::int64_t>(c.bytes));
    if (ev.temp_bytes > 0) cur_.add(c.b, c.b, ev.temp_bytes);
    chosen_[c.r].push_back({c.e, c.b, EvictKind::kRecompute, false});
    // Earlier targets that read this region inside its gap now read its sources instead.
    std::vector<std::size_t>& rd = readers_[c.r];
    for (std::size_t j = 0; j < rd.size();) {
      ChosenRecompute& q = recomputes_[rd[j]];
      if (!(c.e < q.b && q.b < c.b)) {
        ++j;
        continue;
      }
      if (auto it = std::find(q.sources.begin(), q.sources.end(), c.r); it != q.sources.end())
        q.sources.erase(it);
      // The chain's members, worked out at c.b, may be on the device at q.b, read there as
      // sources: they count as q's, so no later swap takes them then.
      for (const auto* v : {&ev.chain, &ev.sources})
        for (std::size_t s : *v)
          if (std::find(q.sources.begin(), q.sources.end(), s) == q.sources.end()) {
            q.sources.push_back(s);
            readers_[s].push_back(rd[j]);
          }
      q.cost += t_.regions[c.r].recompute->cost_us;
      // q now recomputes this region first, through the same chain: the region then exists
      // next to q's target at q.b, and while the chain runs (before q's target exists) its
      // intermediates do.
      cur_.add(
          q.b, q.b,
          static_cast<std::int64_t>(c.bytes) +
              std::max<std::int64_t>(0, ev.temp_bytes - static_cast<std::int64_t>(bytes(q.r))));
      rd[j] = rd.back();
      rd.pop_back();
    }
    for (std::size_t s : ev.sources) readers_[s].push_back(recomputes_.size());
    recomputes_.push_back({c.r, c.e, c.b, ev.cost, std::move(ev.sources)});
    taken_[k] = true;
    PlanEntry e;
    e.region = t_.regions[c.r].id;
    e.kind = EvictKind::kRecompute;
    e.evict_after = c.e;
    e.trigger = c.b;
    e.back_access = c.b;
    plan.entries.push_back(e);
  }

  const Analysis& a_;
  const Trace& t_;
  std::int64_t budget_;
  CapuchinOptions o_;
  MaxSegmentTree cur_;
  double bw_out_ = 0, bw_in_ = 0;
  Engine d2h_, h2d_;
  std::vector<Cand> cands_;
  std::vector<bool> taken_;
  bool multi_stream_ = false;                         // launches on more than one stream
  mutable std::vector<std::size_t> work_, reads_;     // eval_recompute's scratch
  std::vector<std::pair<double, std::size_t>> back_;  // the heap probe's scratch
  std::vector<std::size_t> entry_of_;                 // per candidate: its plan entry once taken
  std::vector<std::size_t> taken_f_;  // per taken swap: first launch it is off the device
  std::vector<double> out_end_;       // per taken swap: when its copy-out ends (ideal timeline)
  std::vector<std::vector<Chosen>> chosen_;  // per region
  std::vector<ChosenRecompute> recomputes_;
  std::vector<std::vector<std::size_t>> readers_;  // per region: recomputes_ reading it
  std::vector<bool> starts_dropped_;  // per region: its next instance is dropped for good
};

}  // namespace

SwapTiming swap_timing(const Analysis& a, std::uint64_t bytes, std::size_t e, std::size_t b) {
  const Trace& t = *a.trace;
  SwapTiming s;
  s.swap_out_us = static_cast<double>(bytes) / (t.device.d2h_bytes_per_s / 1e6);
  s.swap_in_us = static_cast<double>(bytes) / (t.device.h2d_bytes_per_s / 1e6);
  s.swap_out_end_us = a.end_us[e] + s.swap_out_us;
  const double tb = a.start_us[b] + (b <= e ? a.ideal_step_us : 0);  // wrap: next iteration
  s.swap_in_start_us = tb - s.swap_in_us;
  s.free_time_us = s.swap_in_start_us - s.swap_out_end_us;
  if (b <= e)
    s.in_trigger =
        a.last_start_at_or_before(std::max(0.0, s.swap_in_start_us - a.ideal_step_us), b);
  else
    s.in_trigger = std::max(e + 1, a.last_start_at_or_before(s.swap_in_start_us, b));
  return s;
}

namespace {

// Whether `checked`, `chosen` after make_recomputations_executable, swaps a region that `chosen`
// dropped and that is a source of a region `checked` still drops.
bool swaps_a_source(const Analysis& a, const Plan& chosen, const Plan& checked) {
  const Trace& t = *a.trace;
  std::vector<bool> swapped(t.regions.size(), false);
  for (std::size_t k = 0; k < checked.entries.size(); ++k)
    if (chosen.entries[k].kind == EvictKind::kRecompute &&
        checked.entries[k].kind == EvictKind::kSwap)
      swapped[a.index.at(checked.entries[k].region)] = true;
  for (const PlanEntry& e : checked.entries) {
    if (e.kind != EvictKind::kRecompute) continue;
    for (std::size_t s : a.sources[a.index.at(e.region)])
      if (s != kNoRegion && swapped[s]) return true;
  }
  return false;
}

}  // namespace

Plan plan_capuchin(const Analysis& a, std::uint64_t budget, const CapuchinOptions& options) {
  Plan p = Planner(a, budget, options).run();
  // The greedy choice checks a recomputation's sources at its own back-access only.
  const Plan chosen = p;
  if (make_recomputations_executable(a, p) > 0 && p.fits && swaps_a_source(a, chosen, p)) {
    // A drop made a swap there, of a region another drop is recomputed from: while it is on the
    // host, that recomputation has to bring it back, in memory the plan does not count.
    p.fits = false;
    p.reason = "a recomputation it chose reads a region it then had to swap instead of drop";
  }
  if (p.feasible && !p.fits && options.allow_swap && options.allow_recompute) {
    // Greedy recomputation can corner itself: a chain whose intermediates all exist at one
    // back-access, or sources that no swap may then take away. Swapping alone still fits
    // wherever a fit exists by swapping.
    CapuchinOptions swap_only = options;
    swap_only.allow_recompute = false;
    Plan q = Planner(a, budget, swap_only).run();
    if (q.fits) {
      q.policy = p.policy;
      return q;
    }
  }
  return p;
}

Plan apply_feedback(const Analysis& a, const Plan& plan, std::span<const double> lateness_us) {
  Plan out = plan;
  for (std::size_t k = 0; k < out.entries.size() && k < lateness_us.size(); ++k) {
    PlanEntry& e = out.entries[k];
    if (e.kind != EvictKind::kSwap || lateness_us[k] <= 0 || e.trigger == kNoLaunch ||
        e.trigger >= a.n)
      continue;
    const double target = a.start_us[e.trigger] - 0.05 * e.swap_in_us;
    std::size_t t = a.last_start_at_or_before(target, e.trigger);  // target <= its start
    // Never before the eviction is issued (an on-demand release issues it at evict_at): a
    // prefetch of a region still resident does nothing, and the access then restores it on demand.
    if (!is_wrap(e)) t = std::max(t, first_launch_evicted(e, a.n));
    e.trigger = std::min(t, e.trigger);
  }
  return out;
}

CheckedFeedback apply_feedback_checked(const Analysis& a, const Plan& plan,
                                       std::span<const double> lateness_us, std::uint64_t budget,
                                       const std::function<bool()>& out_of_time) {
  CheckedFeedback r;
  r.plan = plan;
  r.refused_entry.assign(plan.entries.size(), false);
  const Plan all = apply_feedback(a, plan, lateness_us);
  std::vector<std::size_t> moving;
  for (std::size_t k = 0; k < plan.entries.size() && k < all.entries.size(); ++k) {
    if (all.entries[k].trigger != plan.entries[k].trigger) {
      moving.push_back(k);
    } else if (k < lateness_us.size() && lateness_us[k] > 0) {
      r.refused_entry[k] = true;  // late, but with nowhere earlier to go
      ++r.refused;
    }
  }
  if (moving.empty()) return r;
  SimResult base = simulate(a, plan, budget);
  auto no_worse = [&](const SimResult& s) {
    return s.feasible && s.demand_evictions <= base.demand_evictions &&
           s.step_time_us <= base.step_time_us * (1 + 1e-9);
  };
  // An infeasible plan leaves nothing to compare with: the rule applies as it is.
  if (!base.feasible || no_worse(simulate(a, all, budget))) {
    r.plan = all;
    r.moved = moving.size();
    return r;
  }
  for (std::size_t k : moving) {
    if (moving.size() > 1) {
      if (out_of_time()) break;  // the rest are neither moved nor refused: asked again later
      Plan one = r.plan;
      one.entries[k].trigger = all.entries[k].trigger;
      SimResult s = simulate(a, one, budget);
      if (no_worse(s)) {
        r.plan = std::move(one);
        base = s;
        ++r.moved;
        continue;
      }
    }
    r.refused_entry[k] = true;
    ++r.refused;
  }
  return r;
}

}  // namespace gswap::policy
