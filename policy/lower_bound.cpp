// lower_bound.cpp: the bound of README.md "Lower bound". For every launch i whose live bytes L_i
// exceed the budget B, at least E_i = L_i - B bytes of regions live at i but not touched by i are
// off the device while i runs. Each such region leaves either for free, by recomputation, or by
// swapping:
//   free       — not yet written in this iteration, or recomputable and never read again, or
//                recomputable and next read on another stream (whose time this bound ignores);
//                "recomputable" where it can come back recomputed by that read: every source
//                another region allocated then, or at some launch since i for a source of
//                another region's recomputation (Analysis::recomputable_within; else a valid run
//                swapped it out);
//   recompute  — recomputable, next read on i's stream: costs at least its cost_us on that stream
//                after i (a source of another's recomputation in a trace with several streams
//                may be recomputed with it on another stream: free);
//   swap       — costs copy-out before i starts if it holds data written earlier in the
//                iteration (classes A and C below), copy-in after i ends if it is read later
//                (classes B and C):
//                  A: written before i, not read after; B: carried from the previous iteration,
//                  read after i; C: written before and read after. B's bytes leave either by a
//                  wrap (copied out after their last access, within the step) or before i (a
//                  copy-out that may start at once).
// With X = max(0, E_i - free), recomputing alpha bytes (cheapest cost per byte first, R(alpha))
// and swapping y = X - alpha bytes needs copy-out >= max(0, y - |B|) and copy-in >= max(0, y - |A|)
// on serial engines, so
//   step >= max(C_before, Out(out)) + dur_i + max(C_after + R(alpha), in/bw_h2d + T_min)
// minimised over alpha, where Out(v) is the earliest a serial engine can finish v bytes of
// copy-outs that may start only after their last access before i (ideal end), and T_min is the
// least compute left on its stream after the next access of a region read after i. Letting a
// region count in several pools only lowers the bound. The minimum over alpha is bounded from
// below on a grid using monotonicity (copy terms fall and R rises with alpha), so the result
// stays a true lower bound. A recomputation also needs room for the region and its sources where
// it runs (RecomputeRoom): an item whose recomputation makes any run at least v long either is
// recomputed (step >= v) or is swapped, so the step is at least the smaller of v and the bound
// at i without it.
#include "policy/lower_bound.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <tuple>
#include <unordered_map>

namespace gswap::policy {
namespace {

// Copies of given sizes on one serial engine, each no earlier than its release date. end(v) is
// the earliest that any v bytes of them can be done: the earliest-released bytes, in release
// order, the last copy split (exchange argument; splitting only relaxes).
class ReleaseSchedule {
 public:
  void reset(std::vector<std::pair<double, double>>& jobs, double bytes_per_us) {
    std::sort(jobs.begin(), jobs.end());
    jobs_ = &jobs;
    bw_ = bytes_per_us;
    done_.assign(jobs.size(), 0);
    cum_.assign(jobs.size(), 0);
    double done = 0, cum = 0;
    for (std::size_t k = 0; k < jobs.size(); ++k) {
      done = std::max(done, jobs[k].first) + jobs[k].second / bw_;
      cum += jobs[k].second;
      done_[k] = done, cum_[k] = cum;
    }
  }
  double end(double bytes) const {
    if (bytes <= 0) return 0;
    if (jobs_->empty()) return bytes / bw_;
    auto it = std::lower_bound(cum_.begin(), cum_.end(), bytes);
    if (it == cum_.end()) return done_.back();  // more than there is: what there is
    const std::size_t k = static_cast<std::size_t>(it - cum_.begin());
    const double before = k ? done_[k - 1] : 0, bytes_before = k ? cum_[k - 1] : 0;
    return std::max(before, (*jobs_)[k].first) + (bytes - bytes_before) / bw_;
  }

 private:
  const std::vector<std::pair<double, double>>* jobs_ = nullptr;
  double bw_ = 1;
  std::vector<double> done_, cum_;
};

// Whether region r, carried over, may start the iteration dropped and come back recomputed for
// its first access: its previous instance may be dropped for good (it has a next instance), and
// the simulator starts it dropped only if every source is carried over too (and still there at
// that access, which this does not ask: a looser test only lowers the bound). A drop of a region
// that cannot come back recomputed (Analysis::recomputable_within) is an access violation when it
// is read again, so in a valid run such a region off the device was swapped out (README
// "Recomputation needs its sources").
bool recomputed_at_start(const Analysis& a, std::size_t r) {
  return a.next_instance[r] != kNoRegion && !a.accesses[r].empty() && a.recomputable_from_start(r);
}

// A stretch of launches [first, last] that a region may spend off the device, and which copies
// leaving for it costs (its bytes each): a copy-in, and a copy-out in either of two assignments of
// a wrap episode's one copy-out (to its piece after the last access, or before the first).
struct Piece {
  std::size_t first, last;
  double bytes;
  bool pays_in, pays_out_trailing, pays_out_leading;
};

// The least bytes of the pieces `paid_for` marks that, with every other piece (free), leave off
// the device at least need[i] bytes at every launch i (fractions of a piece allowed); `pieces`
// sorted by first launch. Sweeping launches in order and covering what is still missing at each
// from the pieces under it that reach furthest is optimal: an optimal choice that agrees up to
// launch i and takes less of that piece covers i with pieces ending no later, and moving that
// amount onto it keeps every launch covered (those before i were covered already) at the same cost.
double least_cover(std::size_t n, const std::vector<double>& need, const std::vector<Piece>& pieces,
                   bool Piece::*paid_for) {
  std::vector<double> free_delta(n + 1, 0);
  for (const Piece& p : pieces)
    if (!(p.*paid_for)) free_delta[p.first] += p.bytes, free_delta[p.last + 1] -= p.bytes;
  std::priority_queue<std::pair<std::size_t, double>> open;  // (last, bytes left), furthest first
  std::priority_queue<std::pair<std::size_t, double>, std::vector<std::pair<std::size_t, double>>,
                      std::greater<>>
      taken;  // (last, bytes), soonest to end first
  double free_now = 0, taken_now = 0, paid = 0;
  std::size_t k = 0;
  for (std::size_t i = 0; i < n; ++i) {
    free_now += free_delta[i];
    for (; k < pieces.size() && pieces[k].first <= i; ++k)
      if (pieces[k].*paid_for) open.emplace(pieces[k].last, pieces[k].bytes);
    while (!taken.empty() && taken.top().first < i) taken_now -= taken.top().second, taken.pop();
    double missing = need[i] - free_now - taken_now;
    while (missing > 0 && !open.empty()) {
      auto [last, left] = open.top();
      open.pop();
      if (last < i) continue;  // over before this launch
      const double take = std::min(left, missing);
      paid += take, taken_now += take, missing -= take;
      taken.emplace(last, take);
      if (left > take) open.emplace(last, left - take);
    }
  }
  return paid;
}

// README "Traffic over the whole iteration": the copy-in and copy-out bytes that covering every
// launch's excess needs, over each engine's bandwidth, plus the program's own copies on it.
double covering_bound(const Analysis& a, std::uint64_t budget) {
  const Trace& t = *a.trace;
  const std::size_t n = a.n;
  std::vector<double> need(n, 0);
  for (std::size_t i = 0; i < n; ++i)
    need[i] = std::max(0.0, static_cast<double>(a.live_bytes[i]) - static_cast<double>(budget));
  std::vector<Piece> pieces;
  // A region carried over and freed in the iteration, and its next instance allocated in it
  // (Analysis::next_instance), are one region across the boundary: one copy-out (the next
  // instance's, after its last access) makes the first off at the start.
  std::vector<bool> is_next(t.regions.size(), false);
  for (std::size_t r = 0; r < t.regions.size(); ++r)
    if (a.next_instance[r] != kNoRegion) is_next[a.next_instance[r]] = true;
  for (std::size_t r = 0; r < t.regions.size(); ++r) {
    // A region too small to evict never leaves the device: it covers nothing.
    if (a.first_live[r] > a.last_live[r] || t.regions[r].bytes < t.device.min_evictable_bytes)
      continue;
    const double b = static_cast<double>(t.regions[r].bytes);
    const bool rc = t.regions[r].recompute.has_value();
    const bool carried = a.live_at_start[r];
    const auto& acc = a.accesses[r];
    const std::size_t lo = a.first_live[r], hi = a.last_live[r];
    auto add = [&](std::size_t first, std::size_t last, bool pays_in, bool pays_out_t,
                   bool pays_out_l) {
      if (first <= last) pieces.push_back({first, last, b, pays_in, pays_out_t, pays_out_l});
    };
    if (acc.empty()) {
      add(lo, hi, false, false, false);  // never used: nothing to copy
      continue;
    }
    // Before the first access: free unless carried over (then restored before that access, and
    // copied out by a wrap entry after the last one, or its previous instance's after its own).
    // Such a one may also come back recomputed, with no copy-in and no copy-out: dropped for good
    // before the iteration, or resident at the start and dropped before its sources' launches.
    const bool recomputed_back =
        recomputed_at_start(a, r) || a.recomputable_within(r, lo, acc.front());
    if (acc.front() > lo)
      add(lo, acc.front() - 1, carried && !recomputed_back, false, carried && !recomputed_back);
    for (std::size_t k = 0; k + 1 < acc.size(); ++k) {
      if (acc[k + 1] == acc[k] + 1) continue;
      const bool paid = !a.recomputable_within(r, acc[k] + 1, acc[k + 1]);  // else dropped
      add(acc[k] + 1, acc[k + 1] - 1, paid, paid, paid);
    }
    // After the last access: a copy-out (none for a recomputable region, which may be dropped).
    // (A next instance's copy-out is its carried-over instance's, counted for that one's first
    // piece.)
    if (acc.back() < hi) add(acc.back() + 1, hi, false, !rc, !rc && !carried && !is_next[r]);
  }
  std::sort(pieces.begin(), pieces.end(),
            [](const Piece& x, const Piece& y) { return x.first < y.first; });
  double own_in_us = 0, own_out_us = 0;
  for (const Launch& l : t.launches) {
    if (l.link == CopyLink::kToDevice) own_in_us += l.dur_us;
    if (l.link == CopyLink::kToHost) own_out_us += l.dur_us;
  }
  const double bw_in = t.device.h2d_bytes_per_s / 1e6, bw_out = t.device.d2h_bytes_per_s / 1e6;
  double bound = 0;
  if (bw_in > 0)
    bound = std::max(bound, least_cover(n, need, pieces, &Piece::pays_in) / bw_in + own_in_us);
  if (bw_out > 0) {
    const double out = std::max(least_cover(n, need, pieces, &Piece::pays_out_trailing),
                                least_cover(n, need, pieces, &Piece::pays_out_leading));
    bound = std::max(bound, out / bw_out + own_out_us);
  }
  return bound;
}

// A region of B, off at an instant t0 (a launch's start, or a recomputation), that started the
// iteration on the host: its copy-out runs after its last access L (README "A wrap's copy-out
// waits for a delayed access" and "... for the restores before it").
struct WrapAfter {
  std::size_t last;  // L: its last access, or its next instance's
  double after;      // least time from t0 to L's end (issue and stream order)
  double bytes;
  double later;  // bytes of B and C read after t0 whose next access comes after L
  double own;    // its own bytes when its first access, restored, comes no later than L
};

// Sets each wrap's `later` from `reads` (regions of B and C: next access, bytes). Sorts `reads`,
// its bytes made prefix sums.
void set_later(std::vector<std::pair<std::size_t, double>>& reads, std::vector<WrapAfter>& wraps) {
  std::sort(reads.begin(), reads.end());
  double read_bytes = 0;
  for (auto& [next, bytes] : reads) read_bytes += bytes, bytes = read_bytes;
  for (WrapAfter& w : wraps) {
    const auto upto =
        std::upper_bound(reads.begin(), reads.end(), w.last,
                         [](std::size_t last, const auto& r) { return last < r.first; });
    w.later = read_bytes - (upto == reads.begin() ? 0 : std::prev(upto)->second);
  }
}

// The wraps' copy-outs as jobs released from t0: L ends no earlier than `after`, nor than the
// copy-ins it waits for plus its own duration. Those are all but `later` of the `in` bytes
// brought back one after another from `in_from` (after t0), and its own bytes, whose copy-in
// may start at t0. With none, L need wait for no copy-in.
void delayed_jobs(const std::vector<WrapAfter>& wraps, double in, double in_from, double bw_in,
                  const Trace& t, std::vector<std::pair<double, double>>& jobs) {
  jobs.clear();
  for (const WrapAfter& w : wraps) {
    const double before_l = std::max(0.0, in - w.later);
    double ready = 0;  // from t0
    if (bw_in > 0 && before_l > 0) ready = in_from + before_l / bw_in;
    if (bw_in > 0 && w.own > 0) ready = std::max(ready, w.own / bw_in);
    jobs.emplace_back(ready > 0 ? std::max(w.after, ready + t.launches[w.last].dur_us) : w.after,
                      w.bytes);
  }
}

// The least over [lo, hi] of a quantity bounded from below on each cell [u, v] by value(u, v):
// kCells even cells, then the cell of least value cut into four, up to kCuts times (the least
// lies where the terms cross, and an even cell there undercuts it by its width). Every cell's
// value bounds its part, so the least over the cells is a bound after every cut. The cutting
// stops once the least is above `enough`, a value the caller needs no more than. `cells`: scratch.
template <class Value>
double least_over_cells(double lo, double hi, double enough, Value&& value,
                        std::vector<std::tuple<double, double, double>>& cells) {
  constexpr int kCells = 16, kCuts = 16;
  cells.clear();
  for (int c = 0; c < kCells; ++c) {
    const double u = lo + (hi - lo) * c / kCells;
    const double v = c + 1 == kCells ? hi : lo + (hi - lo) * (c + 1) / kCells;
    cells.emplace_back(value(u, v), u, v);
  }
  for (int k = 0; k < kCuts; ++k) {
    const auto low = std::min_element(cells.begin(), cells.end());
    const auto [least, u, v] = *low;
    if (v - u < 1 || least > enough) break;
    cells.erase(low);
    for (int c = 0; c < 4; ++c) {
      const double a = u + (v - u) * c / 4, b = c == 3 ? v : u + (v - u) * (c + 1) / 4;
      cells.emplace_back(value(a, b), a, b);
    }
  }
  return std::get<0>(*std::min_element(cells.begin(), cells.end()));
}

// README "A wrap's copy-outs wait for the others' restores". Wrapped regions restored before their
// last access L, grouped by L: of any set of them, those read by L_k or earlier are all back before
// L_k starts, and those whose L is L_k or later are copied out after it, so the two engines need
// at least their bytes plus the most bytes of one group between them. least(w) bounds that from
// below over every set of at least w bytes: w plus the least M such that the largest subset of
// each group within M sums to w or more (a group with too many distinct subset sums counts as
// divisible, which only lowers M).
class WrapGroups {
 public:
  void reset(const std::vector<WrapAfter>& wraps, const Trace& t) {
    // (L, bytes) of the wraps restored before L; the rest wait for no copy-in of theirs.
    restored_.clear();
    unrestored_ = 0;
    min_dur_ = std::numeric_limits<double>::infinity();
    for (const WrapAfter& w : wraps) {
      if (w.own > 0) {
        restored_.emplace_back(w.last, w.bytes);
        min_dur_ = std::min(min_dur_, t.launches[w.last].dur_us);
      } else {
        unrestored_ += w.bytes;
      }
    }
    if (restored_.empty()) min_dur_ = 0;
    if (!std::is_sorted(restored_.begin(), restored_.end()))
      std::sort(restored_.begin(), restored_.end());
    // Groups of the same sizes (the layers of a model) share one kind, counted; found by a hash
    // of the sizes (on a collision with other sizes, a kind of its own).
    kinds_used_ = 0;
    kind_of_hash_.clear();
    divisible_.clear();
    for (std::size_t k = 0; k < restored_.size();) {
      std::size_t end = k;
      std::uint64_t hash = 1469598103934665603ull;
      for (; end < restored_.size() && restored_[end].first == restored_[k].first; ++end)
        hash = (hash ^ static_cast<std::uint64_t>(restored_[end].second)) * 1099511628211ull;
      const auto [it, fresh] = kind_of_hash_.try_emplace(hash, kinds_used_);
      Kind* kind = fresh || !same_sizes(kinds_[it->second], k, end) ? &new_kind(k, end)
                                                                    : &kinds_[it->second];
      ++kind->count;
      k = end;
    }
    // Breakpoints of F(M), the bytes of the largest subsets within M: the exact groups' subset
    // sums (F of those is constant between them) and the divisible groups' sizes.
    events_.clear();
    for (std::size_t q = 0; q < kinds_used_; ++q) {
      const Kind& kind = kinds_[q];
      if (kind.divisible) {
        divisible_.insert(divisible_.end(), kind.count, kind.whole);
        continue;
      }
      for (std::size_t j = 1; j < kind.sums.size(); ++j)
        events_.emplace_back(kind.sums[j],
                             static_cast<double>(kind.count) * (kind.sums[j] - kind.sums[j - 1]));
    }
    std::sort(events_.begin(), events_.end());
    std::sort(divisible_.begin(), divisible_.end());
    divisible_prefix_.assign(divisible_.size() + 1, 0);
    for (std::size_t k = 0; k < divisible_.size(); ++k)
      divisible_prefix_[k + 1] = divisible_prefix_[k] + divisible_[k];
    level_.clear();
    exact_at_.clear();
    double exact = 0;
    std::size_t d = 0;
    for (std::size_t k = 0; k <= events_.size(); ++k) {
      const double v =
          k < events_.size() ? events_[k].first : std::numeric_limits<double>::infinity();
      // Divisible sizes below v, as breakpoints with the exact groups' F so far.
      for (; d < divisible_.size() && divisible_[d] < v; ++d)
        level_.push_back(divisible_[d]), exact_at_.push_back(exact);
      if (k == events_.size()) break;
      exact += events_[k].second;
      if (!level_.empty() && level_.back() == v)
        exact_at_.back() = exact;
      else
        level_.push_back(v), exact_at_.push_back(exact);
    }
  }

  // Wrapped bytes that wait for no copy-in of their own.
  double unrestored() const { return unrestored_; }
  // The shortest L of the restored wraps: the copy-outs after L_k start no earlier than L_k's
  // start plus it.
  double min_dur() const { return min_dur_; }

  // The least, over sets of restored wraps of at least w bytes, of their bytes plus their most
  // bytes at one L; for w beyond every restored wrap, the value for all of them.
  double least(double w) const {
    if (w <= 0 || level_.empty()) return 0;
    const auto F = [&](std::size_t k) { return exact_at_[k] + divisible_within(level_[k]); };
    std::size_t lo = 0, hi = level_.size();  // first breakpoint with F >= w
    while (lo < hi) {
      const std::size_t mid = (lo + hi) / 2;
      if (F(mid) >= w)
        hi = mid;
      else
        lo = mid + 1;
    }
    if (lo == level_.size()) return F(lo - 1) + level_.back();
    // Between the breakpoint before and this one only the divisible groups larger than the one
    // before grow F, one byte per byte of M each.
    const double prev = lo ? level_[lo - 1] : 0, f_prev = lo ? F(lo - 1) : 0;
    const auto larger = static_cast<double>(
        divisible_.end() - std::upper_bound(divisible_.begin(), divisible_.end(), prev));
    const double m = larger > 0 ? std::min(level_[lo], prev + (w - f_prev) / larger) : level_[lo];
    return w + m;
  }

 private:
  static constexpr std::size_t kMaxSums = 256;
  // Groups of one list of sizes (ascending): their subset sums (ascending, from 0), or, past
  // kMaxSums of them, divisible.
  struct Kind {
    std::vector<double> sizes, sums;
    double whole = 0;
    bool divisible = false;
    std::size_t count = 0;
  };
  bool same_sizes(const Kind& kind, std::size_t from, std::size_t to) const {
    if (kind.sizes.size() != to - from) return false;
    for (std::size_t k = from; k < to; ++k)
      if (kind.sizes[k - from] != restored_[k].second) return false;
    return true;
  }
  Kind& new_kind(std::size_t from, std::size_t to) {
    if (kinds_used_ == kinds_.size()) kinds_.emplace_back();
    Kind& kind = kinds_[kinds_used_++];
    kind.sizes.clear();
    kind.sums.assign(1, 0.0);
    kind.whole = 0;
    kind.divisible = false;
    kind.count = 0;
    for (std::size_t k = from; k < to; ++k) {
      const double b = restored_[k].second;
      kind.sizes.push_back(b);
      kind.whole += b;
      if (kind.divisible) continue;
      const std::size_t m = kind.sums.size();
      for (std::size_t q = 0; q < m; ++q) kind.sums.push_back(kind.sums[q] + b);
      std::sort(kind.sums.begin(), kind.sums.end());
      kind.sums.erase(std::unique(kind.sums.begin(), kind.sums.end()), kind.sums.end());
      kind.divisible = kind.sums.size() > kMaxSums;
    }
    return kind;
  }
  // The bytes of the divisible groups within M.
  double divisible_within(double m) const {
    const auto k = static_cast<std::size_t>(
        std::upper_bound(divisible_.begin(), divisible_.end(), m) - divisible_.begin());
    return divisible_prefix_[k] + m * static_cast<double>(divisible_.size() - k);
  }
  double unrestored_ = 0, min_dur_ = 0;
  std::vector<std::pair<std::size_t, double>> restored_;
  std::vector<Kind> kinds_;
  std::size_t kinds_used_ = 0;
  std::unordered_map<std::uint64_t, std::size_t> kind_of_hash_;
  std::vector<std::pair<double, double>> events_;  // (subset sum, F's rise there)
  std::vector<double> divisible_, divisible_prefix_, level_, exact_at_;
};

// README "A recomputation needs room". For a recomputable region r off the device at launch i,
// at(r, i) is a lower bound on the step of any valid run that brings r back recomputed by its
// next access b, at some launch j, i < j <= b (at b alone unless r is a source of another
// region's recomputation, which may recompute it earlier as an intermediate). That recomputation
// starts before j, after the launch before j on its stream has ended, with r and its sources
// resident: at least live(j) - budget bytes of the rest are off the device then. Written data off
// then (classes A and C at j) has been copied out before, and what is read again (B and C) comes
// back after.
class RecomputeRoom {
 public:
  RecomputeRoom() = default;  // none: empty()
  // `suffix`, `prefix`: compute from each launch to the end of the step on its stream, the
  // launch included, and before it on its stream. Past `max_values` (region, launch) values it
  // computes none (empty()).
  RecomputeRoom(const Analysis& a, std::uint64_t budget, const std::vector<double>& suffix,
                const std::vector<double>& prefix, double max_values) {
    const Trace& t = *a.trace;
    const std::size_t nr = t.regions.size(), n = a.n;
    const double bw_out = t.device.d2h_bytes_per_s / 1e6, bw_in = t.device.h2d_bytes_per_s / 1e6;
    if (bw_out <= 0 || bw_in <= 0) return;
    std::vector<std::size_t> rc;
    double values = 0;
    for (std::size_t r = 0; r < nr; ++r)
      if (t.regions[r].recompute && !a.accesses[r].empty() && a.first_live[r] <= a.last_live[r]) {
        rc.push_back(r);
        values += static_cast<double>(a.accesses[r].back() - a.first_live[r] + 1);
      }
    if (rc.empty() || values > max_values) return;
    offset_.assign(nr, 0);
    first_.assign(nr, 0);
    std::size_t total = 0;
    for (std::size_t r : rc) {
      offset_[r] = total;
      first_[r] = a.first_live[r];
      total += a.accesses[r].back() - a.first_live[r] + 1;
    }
    pt_.assign(total, 0);
    // What region r is at launch j, before j runs: free to be off (never used, not yet written,
    // or recomputable, whose recomputation's cost is not counted here), B (carried over, first
    // used at or after j: off, it started the iteration on the host or left early, and comes
    // back by that use), A (used before j, not after: off, it was copied out) or C (used before
    // and after: both).
    enum Kind { kFree, kB, kA, kC };
    auto kind = [&](std::size_t r, std::size_t j) {
      const auto& acc = a.accesses[r];
      if (acc.empty() || t.regions[r].recompute) return kFree;
      const auto next = std::lower_bound(acc.begin(), acc.end(), j);
      if (next == acc.begin()) return a.live_at_start[r] ? kB : kFree;
      return next == acc.end() ? kA : kC;
    };
    std::vector<std::pair<double, double>> outs;  // A and C: (ideal end of the last use, bytes)
    ReleaseSchedule out_sched;
    // B may also be off because it left before the recomputation (a copy-out free to start at
    // once: `outs_early`, with A and C), or because it started the iteration on the host, copied
    // out after its last access L (`wraps`: released at L's ideal end; `wraps_after`: at L's
    // least end measured from the recomputation, see below). Bytes whose copy-out waits for
    // nothing count as free there (`wrap_free`, `wrap_after_free`).
    std::vector<std::pair<double, double>> outs_early, wraps, wrap_after_jobs;
    std::vector<WrapAfter> wraps_after;                 // t0: the recomputation
    std::vector<std::pair<std::size_t, double>> reads;  // B and C: (next use, bytes)
    ReleaseSchedule early_sched, wrap_sched, wrap_after_sched;
    double wrap_free = 0, wrap_after_free = 0;
    struct Split {
      std::size_t at;  // index into pt_
      double in, y, w_hi, rest, c_before;
    };
    std::vector<Split> splits;
    std::vector<std::tuple<double, double, double>> cells;
    std::vector<std::size_t> seen;
    for (std::size_t j = 0; j < n; ++j) {
      const double c_before = prefix[j];
      const double excess = static_cast<double>(a.live_bytes[j]) - static_cast<double>(budget);
      double pool[4] = {0, 0, 0, 0};  // bytes per Kind
      double tail_min = 0;            // least compute left after the next use of one of B and C
      if (excess > 0) {
        outs.clear();
        wraps.clear();
        wraps_after.clear();
        reads.clear();
        wrap_free = wrap_after_free = 0;
        double early = 0;
        bool any_in = false;
        for (std::size_t r = 0; r < nr; ++r) {
          if (a.first_live[r] > j || a.last_live[r] < j) continue;
          const double b = static_cast<double>(t.regions[r].bytes);
          const Kind k = kind(r, j);
          pool[k] += b;
          if (k == kFree) continue;
          const auto& acc = a.accesses[r];
          const auto next = std::lower_bound(acc.begin(), acc.end(), j);
          if (k == kA || k == kC) outs.emplace_back(a.end_us[*std::prev(next)], b);
          if (k == kB || k == kC) {
            tail_min = any_in ? std::min(tail_min, suffix[*next]) : suffix[*next];
            any_in = true;
            reads.emplace_back(*next, b);
          }
          if (k == kB) {
            early += b;
            // Its copy-out after the last access of this region, or of its next instance if the
            // iteration frees it (one never accessed leaves nothing to wait for).
            const std::size_t inst = a.next_instance[r] != kNoRegion ? a.next_instance[r] : r;
            if (a.accesses[inst].empty()) {
              wrap_free += b;
              wrap_after_free += b;
              continue;
            }
            const std::size_t last = a.accesses[inst].back();
            wraps.emplace_back(a.end_us[last], b);
            if (last < j) {
              wrap_after_free += b;  // ended before j: the recomputation does not delay it
              continue;
            }
            // L starts no earlier than j, which starts after the recomputation (issue order),
            // and on j's stream only after every launch from j up to it has run.
            const double after = t.launches[last].stream == t.launches[j].stream
                                     ? suffix[j] - suffix[last] + t.launches[last].dur_us
                                     : t.launches[last].dur_us;
            wraps_after.push_back({last, after, b, 0, acc.front() <= last ? b : 0});
          }
        }
        out_sched.reset(outs, bw_out);
        outs_early = outs;
        if (early > 0) outs_early.emplace_back(0.0, early);
        early_sched.reset(outs_early, bw_out);
        wrap_sched.reset(wraps, bw_out);
        set_later(reads, wraps_after);
      }
      splits.clear();
      for (std::size_t r : rc) {
        if (a.first_live[r] > j || a.accesses[r].back() < j) continue;
        const Region& reg = t.regions[r];
        double& pt = pt_[offset_[r] + j - first_[r]];
        pt = c_before + reg.recompute->cost_us + suffix[j];
        // r and its sources stay resident: out of the pools. A source not allocated at j: no
        // valid run recomputes r there.
        double kept[4] = {static_cast<double>(reg.bytes), 0, 0, 0};
        bool runs = true;
        seen.assign(1, r);
        for (RegionId src : reg.recompute->sources) {
          const auto it = a.index.find(src);
          if (it == a.index.end() || a.first_live[it->second] > j || a.last_live[it->second] < j) {
            runs = false;
            break;
          }
          const std::size_t s = it->second;
          if (std::find(seen.begin(), seen.end(), s) != seen.end()) continue;
          seen.push_back(s);
          kept[kind(s, j)] += static_cast<double>(t.regions[s].bytes);
        }
        if (!runs) {
          pt = kNever;
          continue;
        }
        if (excess <= 0) continue;
        const double a_off = pool[kA] - kept[kA], b = pool[kB] - kept[kB];
        const double y = excess - (pool[kFree] - kept[kFree]);  // bytes of A, B and C off
        if (y > a_off + b + pool[kC] - kept[kC]) {
          pt = kNever;  // not even with all of them off
          continue;
        }
        if (y <= 0) continue;
        // Copied out before it starts: all but B's (the schedule still holds the sources' own
        // copy-outs, which only lowers the bound); copied in after it starts: all but A's.
        const double start = std::max(c_before, out_sched.end(y - b));
        const double in = std::max(0.0, y - a_off);
        const double rest =
            std::max(reg.recompute->cost_us + suffix[j], in > 0 ? in / bw_in + tail_min : 0.0);
        pt = start + rest;
        // Of the bytes of B off then, w started the iteration on the host, and the others left
        // before it (copy-outs released at 0, with A's and C's): the recomputation starts no
        // earlier than Early(y - w), and the step ends no earlier than the copy-outs of the w
        // wrapped bytes, after their last accesses (`splits`, below, in order of `in` per launch).
        if (const double w_hi = std::min(y, b); w_hi > 0)
          splits.push_back({offset_[r] + j - first_[r], in, y, w_hi, rest, c_before});
      }
      // Those copy-outs end no earlier than on the ideal timeline, nor, from the recomputation
      // on, than their least time `after`, nor the copy-ins that must precede them: those of all
      // but `later` of the `in` bytes brought back after the recomputation starts, and their own
      // (README "A recomputation needs room"). Early only falls as w grows, the copy-outs only
      // rise: on each of 16 even cells [u, v] of w, the step is at least the value with
      // Early(y - v) and the copy-outs of u. The delayed copy-outs' schedule depends on `in`; it is
      // built for `in` rounded down to 1/256 of the excess (earlier releases only lower the bound).
      std::sort(splits.begin(), splits.end(),
                [](const Split& x, const Split& y) { return x.in < y.in; });
      const double quantum = std::max(1.0, excess / 256);
      double built_for = -1;
      for (const Split& sp : splits) {
        const double in = std::floor(sp.in / quantum) * quantum;
        if (in != built_for) {
          built_for = in;
          delayed_jobs(wraps_after, in, 0.0, bw_in, t, wrap_after_jobs);
          wrap_after_sched.reset(wrap_after_jobs, bw_out);
        }
        auto cell_value = [&](double u, double v) {
          const double early_start = std::max(sp.c_before, early_sched.end(sp.y - v));
          return std::max({early_start + sp.rest, wrap_sched.end(u - wrap_free),
                           early_start + wrap_after_sched.end(u - wrap_after_free)});
        };
        // Even cells only (`enough` below every value): cut as the launch terms' are, they
        // raised one of the 250 feasible cells of the corpus and held-out traces, by 0.5%.
        constexpr double kEvenCellsOnly = -std::numeric_limits<double>::infinity();
        pt_[sp.at] =
            std::max(pt_[sp.at], least_over_cells(0, sp.w_hi, kEvenCellsOnly, cell_value, cells));
      }
    }
    // at(r, i): the least over the launches its recomputation may run at, up to the next access.
    for (std::size_t r : rc) {
      const auto& acc = a.accesses[r];
      double* v = &pt_[offset_[r]];
      for (std::size_t j = acc.back(); j > first_[r]; --j) {
        if (std::binary_search(acc.begin(), acc.end(), j - 1)) continue;  // a gap ends there
        const std::size_t k = j - 1 - first_[r];
        v[k] = a.is_source[r] ? std::min(v[k], v[k + 1]) : v[k + 1];
      }
    }
  }

  bool empty() const { return pt_.empty(); }
  // r off the device at i, before its last access, and recomputable by its next access.
  double at(std::size_t r, std::size_t i) const { return pt_[offset_[r] + i + 1 - first_[r]]; }

 private:
  static constexpr double kNever = std::numeric_limits<double>::infinity();
  std::vector<std::size_t> offset_, first_;  // per region: where its values start; first_live
  std::vector<double> pt_;
};

}  // namespace

// RecomputeRoom's table, at most (8 bytes each), and the thresholds tried per launch.
constexpr double kMaxRoomValues = 4e6;
constexpr std::size_t kMaxRoomThresholds = 8;
// Where the refinement cannot run at every launch over the budget, the share of max_visits it may
// still spend on the launches with the highest values.
constexpr double kPartialRefinementShare = 1.0 / 16;
// Cells of the alpha grid refined per launch before the shared allowance below is drawn on.
constexpr std::size_t kRefinedCellsPerLaunch = 32;
// Launches between a launch and the next on its stream looked at for regions read only while it
// may still run; past this many, none is counted as needing a copy-in after it.
constexpr std::size_t kMaxLateWindow = 256;

LowerBound lower_bound(const Analysis& a, std::uint64_t budget, double max_visits) {
  LowerBound lb;
  const Trace& t = *a.trace;
  std::unordered_map<std::uint32_t, double> stream_total;
  for (const Launch& l : t.launches) stream_total[l.stream] += l.dur_us;
  for (auto& [s, c] : stream_total) lb.compute_us = std::max(lb.compute_us, c);
  // Issue order holds a stream back behind launches of others: no plan beats the ideal timeline.
  lb.compute_us = std::max(lb.compute_us, a.ideal_step_us);
  lb.bound_us = lb.compute_us;
  if (a.peak_bytes <= budget || a.n == 0) return lb;
  // The first launch after each one that runs on another stream (n where none does).
  std::vector<std::size_t> next_on_other_stream(a.n + 1, a.n);
  for (std::size_t k = a.n; k-- > 1;)
    next_on_other_stream[k - 1] =
        t.launches[k].stream != t.launches[k - 1].stream ? k : next_on_other_stream[k];

  const std::size_t n = a.n;
  std::vector<std::int64_t> dfree(n + 1, 0), dA(n + 1, 0), dB(n + 1, 0), dC(n + 1, 0);
  auto add = [&](std::vector<std::int64_t>& d, std::size_t from, std::size_t to, std::int64_t b) {
    if (from > to || from >= n) return;  // inclusive range [from, to]
    d[from] += b;
    d[std::min(to, n - 1) + 1] -= b;
  };
  std::vector<std::size_t> recomputable;
  std::vector<std::int64_t> drc(n + 1, 0);  // recomputable bytes live (see itemize below)
  // A region too small to evict never leaves the device (no plan entry and no demand eviction
  // moves it): it is in no pool, and the bytes over the budget all come from the others.
  auto stays = [&](std::size_t r) { return t.regions[r].bytes < t.device.min_evictable_bytes; };
  for (std::size_t r = 0; r < t.regions.size(); ++r) {
    if (a.first_live[r] > a.last_live[r] || stays(r)) continue;
    const auto b = static_cast<std::int64_t>(t.regions[r].bytes);
    const bool rc = t.regions[r].recompute.has_value();
    if (rc) {
      recomputable.push_back(r);
      add(drc, a.first_live[r], a.last_live[r], b);
    }
    const auto& acc = a.accesses[r];
    const std::size_t lo = a.first_live[r], hi = a.last_live[r];
    if (acc.empty()) {
      add(dfree, lo, hi, b);
      continue;
    }
    if (acc.front() > lo) add(a.live_at_start[r] ? dB : dfree, lo, acc.front() - 1, b);
    for (std::size_t k = 0; k + 1 < acc.size(); ++k)
      if (acc[k + 1] > acc[k] + 1) add(dC, acc[k] + 1, acc[k + 1] - 1, b);
    if (acc.back() < hi) add(rc ? dfree : dA, acc.back() + 1, hi, b);
  }
  // Compute from each launch to the end of the step on its stream (the launch included), and
  // before it on its stream.
  std::vector<double> suffix(n, 0), prefix(n, 0);
  {
    std::unordered_map<std::uint32_t, double> acc, before;
    for (std::size_t j = n; j-- > 0;) suffix[j] = acc[t.launches[j].stream] += t.launches[j].dur_us;
    for (std::size_t j = 0; j < n; ++j) {
      double& c = before[t.launches[j].stream];
      prefix[j] = c;
      c += t.launches[j].dur_us;
    }
  }
  // The refinement below visits every live region at every launch it runs at. Where running it
  // at every launch over the budget would be slow, it runs at the launches with the highest value
  // without it, as many as a share of max_visits allows (every launch's value, refined or not, is
  // a bound). The tightest launch is nearly always among the first: on a 600-layer ViT-B/16,
  // swap-only at 70% of its peak, the first alone gives 2734.2 ms of the 2734.4 ms that refining
  // all 12,000 launches over the budget gives (in 7 s; 10 ms without the refinement: 2458 ms).
  std::size_t over = 0;
  for (std::size_t i = 0; i < n; ++i) over += a.live_bytes[i] > budget;
  // The refinement and the items cost about 100-200 ns a visit: past max_visits / 16 visits
  // (3.1 million by default, under a second) they take the cheaper paths below, which spend at
  // most as many (a 10,000-launch trace at 5e7 visits took 4 to 10 s).
  const double full_visits = max_visits * kPartialRefinementShare;
  const bool refine_all =
      static_cast<double>(over) * static_cast<double>(t.regions.size()) <= full_visits;
  // Listing the recomputation items visits every recomputable region at every launch over the
  // budget. Where that would be slow, every recomputable region live at a launch and not touched
  // by it leaves for free instead (a cost of 0 only lowers the bound).
  const bool itemize =
      static_cast<double>(over) * static_cast<double>(recomputable.size()) <= full_visits;
  // Fewer points on the alpha grid for long iterations; any grid keeps the bound a bound.
  const int steps = over <= 20'000 ? 256 : 32;
  // Recomputation needs room for the region and its sources (README "A recomputation needs
  // room"): with the refinements, and where its table stays small.
  const RecomputeRoom room = refine_all && itemize
                                 ? RecomputeRoom(a, budget, suffix, prefix, kMaxRoomValues)
                                 : RecomputeRoom();
  // Regions too small to evict, by the launch after which the iteration frees them.
  std::vector<std::vector<std::size_t>> small_freed_after(n);
  for (std::size_t r = 0; r < t.regions.size(); ++r)
    if (stays(r) && !a.live_at_end[r] && a.first_live[r] <= a.last_live[r] && a.last_live[r] < n)
      small_freed_after[a.last_live[r]].push_back(r);
  // Bytes free to leave, of classes A, B and C, and recomputable, live at each launch.
  for (std::size_t i = 1; i < n; ++i) {
    dfree[i] += dfree[i - 1], dA[i] += dA[i - 1], dB[i] += dB[i - 1], dC[i] += dC[i - 1];
    drc[i] += drc[i - 1];
  }
  const std::vector<std::size_t> no_items;
  std::vector<double> cum_bytes, cum_cost;       // prefix sums of the sorted items
  std::vector<std::pair<double, double>> outs;   // (release: ideal end of the last write, bytes)
  std::vector<std::pair<double, double>> wraps;  // B: (ideal end of the last access, bytes)
  // B again, for the copy-outs' release measured from i's start (see the refinement below).
  std::vector<WrapAfter> wraps_after;                 // t0: i's start
  std::vector<std::pair<std::size_t, double>> reads;  // B and C: (next access after i, bytes)
  std::vector<std::pair<double, double>> wrap_after_jobs;
  ReleaseSchedule out_sched, wrap_sched, wrap_after_sched;
  WrapGroups wrap_groups;
  double longest_launch = 0;
  for (const Launch& l : t.launches) longest_launch = std::max(longest_launch, l.dur_us);
  std::vector<std::tuple<double, double, double>> splits;  // least_over_cells scratch
  const double bw_out = t.device.d2h_bytes_per_s / 1e6, bw_in = t.device.h2d_bytes_per_s / 1e6;
  // (cost per byte, bytes, least step of a run that recomputes it: RecomputeRoom::at)
  std::vector<std::tuple<double, double, double>> items, all_items;
  std::vector<std::tuple<double, double, double>> cells;  // alpha grid: (bound, y, rest)
  std::vector<double> thresholds;
  // Cells refined beyond kRefinedCellsPerLaunch at a launch, over the whole bound: each visits the
  // live regions once more, so the allowance is max_visits over the regions.
  double extra_cells_left = max_visits / std::max<double>(1, static_cast<double>(t.regions.size()));
  // Launch i's value, with the refinement or without; `rank`: without the shortcut that skips a
  // launch unable to raise the bound so far (the value then ranks launches for the refinement).
  auto at_launch = [&](std::size_t i, bool refine, bool rank) -> double {
    const std::int64_t f = dfree[i], A = dA[i], B = dB[i], C = dC[i], rc_live = drc[i];
    const Launch& l = t.launches[i];
    const double c_before = prefix[i], c_after = stream_total[l.stream] - c_before - l.dur_us;
    const std::int64_t excess =
        static_cast<std::int64_t>(a.live_bytes[i]) - static_cast<std::int64_t>(budget);
    if (excess <= 0) return 0.0;
    // Copy-ins after i: a region of B or C off when i ends comes back after, for its next access
    // at or after m, the next launch on i's stream, which cannot start before i ends. One whose
    // accesses after i all come before m may be back and read while i runs (on another stream),
    // and off again when i ends: it needs no copy-in after i (`late`). Where m is far or absent,
    // no region is counted as needing one (`no_in`).
    const std::size_t m = a.next_on_stream[i];
    const bool no_in = m >= n || m - i > kMaxLateWindow;
    double late = 0;
    if (!no_in)
      for (std::size_t k = i + 1; k < m; ++k) {
        for (std::size_t r : a.touched[k]) {
          const auto& acc = a.accesses[r];
          if (acc.back() != k || stays(r) || a.first_live[r] > i) continue;
          const auto prev = std::upper_bound(acc.begin(), acc.end(), i);
          if (prev != acc.begin() && *std::prev(prev) == i) continue;  // touched by i
          if (prev == acc.begin() && !a.live_at_start[r]) continue;    // not yet written
          late += static_cast<double>(t.regions[r].bytes);
        }
        // A small region live at i and freed after k gives its memory back when k ends, which
        // may be while i runs: the bytes off when i ends may be fewer by as much.
        for (std::size_t r : small_freed_after[k])
          if (a.first_live[r] <= i) late += static_cast<double>(t.regions[r].bytes);
      }
    auto copied_in = [&](double y) {  // bytes a copy-in brings back after i ends
      return no_in ? 0.0 : std::max(0.0, y - static_cast<double>(A) - late);
    };

    // Recompute items (and recomputable regions that are free to leave at i).
    std::int64_t extra_free = 0;
    items.clear();
    if (!itemize) {
      extra_free = rc_live;
      for (std::size_t r : a.touched[i])
        if (t.regions[r].recompute && !stays(r))
          extra_free -= static_cast<std::int64_t>(t.regions[r].bytes);
    }
    for (std::size_t r : itemize ? recomputable : no_items) {
      if (a.first_live[r] > i || a.last_live[r] < i) continue;
      const auto& acc = a.accesses[r];
      auto next = std::upper_bound(acc.begin(), acc.end(), i);
      if (next == acc.end()) continue;                             // already counted free
      if (next != acc.begin() && *std::prev(next) == i) continue;  // touched by i
      if (next == acc.begin() && !a.live_at_start[r]) continue;    // fresh: already free
      // Only a region that can come back recomputed leaves by recomputation; any other is
      // swapped (classes B and C). One carried over may start the iteration dropped, or be
      // resident then, dropped, and recomputed by its first access like any other.
      if (!(next == acc.begin() && recomputed_at_start(a, r)) &&
          !a.recomputable_within(r, i + 1, *next))
        continue;
      const double bytes = static_cast<double>(t.regions[r].bytes);
      // A source of another region's recomputation may come back earlier, recomputed with it,
      // at a launch after i on another stream: its cost need not fall on i's stream. Where every
      // launch up to its next access runs on i's stream, it does (README, "recompute").
      if (t.launches[*next].stream != l.stream ||
          (a.is_source[r] && next_on_other_stream[i] <= *next)) {
        extra_free += static_cast<std::int64_t>(bytes);
        continue;
      }
      items.emplace_back(t.regions[r].recompute->cost_us / std::max(bytes, 1.0), bytes,
                         room.empty() ? 0.0 : room.at(r, i));
    }
    std::sort(items.begin(), items.end());
    // Refinement: a copy-out can start only once its region's last access before i has ended
    // (no earlier than on the ideal timeline), and a restored region still has the rest of its
    // stream to run after its next access.
    double tail_min = 0;  // least compute after the next access of any region read after i
    outs.clear();
    wraps.clear();
    wraps_after.clear();
    reads.clear();
    double wrap_free = 0, wrap_after_free = 0;  // wrapped bytes that wait for nothing at i
    double restored_bytes = 0;                  // of wraps_after, those restored before L
    if (refine) {
      bool any_in = false;
      // B's bytes that may leave before i: copy-outs released at 0, one job (split at will).
      double early_bytes = 0;
      for (std::size_t r = 0; r < t.regions.size(); ++r) {
        if (a.first_live[r] > i || a.last_live[r] < i || stays(r)) continue;
        const auto& acc = a.accesses[r];
        if (acc.empty()) continue;
        auto next = std::upper_bound(acc.begin(), acc.end(), i);
        if (next != acc.begin() && *std::prev(next) == i) continue;  // touched by i
        const bool has_prev = next != acc.begin(), has_next = next != acc.end();
        const bool rc = t.regions[r].recompute.has_value();
        const bool written = has_prev && (has_next || !rc);              // classes A and C
        const bool read = has_next && (has_prev || a.live_at_start[r]);  // classes B and C
        if (written) outs.emplace_back(a.end_us[*std::prev(next)], t.regions[r].bytes);
        if (!has_prev && read) {
          // Resident at the start, it may also leave before i, its copy-out free to start at
          // once (a demand eviction, or a plan evicting it before its first access).
          early_bytes += static_cast<double>(t.regions[r].bytes);
          // Or it started the iteration on the host, copied out after the last access L of this
          // region, or of its next instance if the iteration frees it (a next instance never
          // accessed leaves no access to wait for: those bytes are free here).
          const std::size_t inst = a.next_instance[r] != kNoRegion ? a.next_instance[r] : r;
          if (a.accesses[inst].empty()) {
            wrap_free += static_cast<double>(t.regions[r].bytes);
            wrap_after_free += static_cast<double>(t.regions[r].bytes);
          } else if (const std::size_t last = a.accesses[inst].back(); last < i) {
            // L ended before i: nothing at i delays it.
            wraps.emplace_back(a.end_us[last], t.regions[r].bytes);
            wrap_after_free += static_cast<double>(t.regions[r].bytes);
          } else {
            // L starts no earlier than i does (issue order), and on i's stream only after every
            // launch from i up to it has run.
            const double after = t.launches[last].stream == l.stream
                                     ? suffix[i] - suffix[last] + t.launches[last].dur_us
                                     : t.launches[last].dur_us;
            wraps.emplace_back(a.end_us[last], t.regions[r].bytes);
            const double b = static_cast<double>(t.regions[r].bytes);
            wraps_after.push_back({last, after, b, 0, acc.front() <= last ? b : 0});
            if (acc.front() <= last) restored_bytes += b;
          }
        }
        if (read && !no_in) {
          // Its copy-in after i ends serves its first access that starts after i ends: its first
          // at or after m at the latest, any from its next on (one before m may run after i).
          const auto back = std::lower_bound(next, acc.end(), m);
          if (back != acc.end()) {
            reads.emplace_back(*back, static_cast<double>(t.regions[r].bytes));
            double left = suffix[*back];
            for (auto k = next; k != back; ++k) left = std::min(left, suffix[*k]);
            tail_min = any_in ? std::min(tail_min, left) : left;
            any_in = true;
          }
        }
      }
      if (early_bytes > 0) outs.emplace_back(0.0, early_bytes);
      // For each wrap, the bytes of B and C whose next access comes after its last access.
      if (wraps_after.empty()) reads.clear();
      set_later(reads, wraps_after);
    }
    out_sched.reset(outs, bw_out > 0 ? bw_out : 1);
    wrap_sched.reset(wraps, bw_out > 0 ? bw_out : 1);

    // The least over alpha of the step at i with `items` as the recomputation items.
    auto solve = [&]() {
      const double X = static_cast<double>(std::max<std::int64_t>(0, excess - f - extra_free));
      double rc_total = 0;
      for (auto& it : items) rc_total += std::get<1>(it);
      const double amax = std::min(X, rc_total);
      cum_bytes.resize(items.size());
      cum_cost.resize(items.size());
      for (std::size_t k = 0; k < items.size(); ++k) {
        const auto& [per_byte, bytes, room_us] = items[k];
        cum_bytes[k] = (k ? cum_bytes[k - 1] : 0) + bytes;
        cum_cost[k] = (k ? cum_cost[k - 1] : 0) + bytes * per_byte;
      }
      auto R = [&](double alpha) {  // cheapest recompute time for alpha bytes
        if (alpha <= 0 || items.empty()) return 0.0;
        const auto k = static_cast<std::size_t>(
            std::lower_bound(cum_bytes.begin(), cum_bytes.end(), alpha) - cum_bytes.begin());
        if (k == items.size()) return cum_cost.back();
        const double b0 = k ? cum_bytes[k - 1] : 0, c0 = k ? cum_cost[k - 1] : 0;
        return c0 + (alpha - b0) * std::get<0>(items[k]);
      };
      // Of the y bytes swapped, yB come from B (no copy-out before i: they started the iteration
      // on the host, so a wrap entry copies them out after their last access in this iteration,
      // which the step includes) and the rest from A and C (copied out before i starts). The
      // before-i term grows with the A/C share and the end-of-iteration term shrinks, so the
      // least of their maximum lies where they cross, found by bisection; max(g1(lo), g2(hi)) on
      // the final bracket is below that least value, so the bound stays a bound.
      // start(i) when yac bytes of A and C are copied out before it; the range of yac for y bytes
      // swapped (at most |B| of them from B, at most |A| + |C| from A and C).
      auto start_i = [&](double yac) {
        return std::max(c_before, bw_out > 0 ? out_sched.end(yac) : 0);
      };
      auto ac_range = [&](double y) {
        const double lo = std::max(0.0, y - static_cast<double>(B));
        return std::pair{lo, std::max(lo, std::min(y, static_cast<double>(A + B + C)))};
      };
      auto traffic = [&](double y, double rest) {
        auto g1 = [&](double yac) { return start_i(yac) + rest; };
        auto g2 = [&](double yac) { return bw_out > 0 ? wrap_sched.end(y - yac - wrap_free) : 0; };
        auto [lo, hi] = ac_range(y);
        if (!refine || wraps.empty() || g1(lo) >= g2(lo)) return g1(lo);
        if (g1(hi) < g2(hi)) return g2(hi);
        for (int k = 0; k < 50 && hi - lo > 1; ++k) {
          const double mid = (lo + hi) / 2;
          (g1(mid) < g2(mid) ? lo : hi) = mid;
        }
        return std::max(g1(lo), g2(hi));
      };
      std::vector<double> grid = {0, amax};
      const std::size_t stride = std::max<std::size_t>(1, items.size() / 1024);
      for (std::size_t k = 0; k < items.size(); k += stride)
        if (cum_bytes[k] < amax) grid.push_back(cum_bytes[k]);
      if (amax > 0)
        for (int k = 1; k < steps; ++k) grid.push_back(amax * k / steps);
      std::sort(grid.begin(), grid.end());
      grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
      // One cell [lo_alpha, hi_alpha] of the grid: (its value, y, the rest after i's start).
      auto cell = [&](double lo_alpha, double hi_alpha) {
        const double y = X - hi_alpha;
        const double in = copied_in(y);
        const double in_us = bw_in > 0 && in > 0 ? in / bw_in + tail_min : 0;
        const double rest = l.dur_us + std::max(c_after + R(lo_alpha), in_us);
        return std::tuple{traffic(y, rest), y, rest};
      };
      // Refinement: a wrap's copy-out waits for its last access, which comes at or after i (one
      // before i is free here, wrap_after_free) and so is delayed by whatever delays i's start:
      // that access ends no earlier than start(i) plus the least time from i's start to its end
      // (wraps_after). It also starts no earlier than the accesses issued before it, which wait for
      // their copy-ins, and those run one after another from i's end: of the `in` bytes of B and C
      // that come back after i, all but `later` are read by then. start(i) grows with the A/C share
      // and the wrap bytes shrink, so the minimum over the split is bounded cell by cell: on [a,
      // b], start(i) >= its value at a and the wrap bytes >= y - b.
      const bool refining = refine && !wraps.empty() && bw_out > 0;
      bool jobs_built = false, groups_built = false;
      double jobs_in = 0;  // the copy-in bytes wrap_after_sched was built for
      // `enough`: the caller needs no value above it (resplitting stops once every cell passes it).
      auto refined_cell = [&](double y, double rest, double enough) {
        const auto [lo, hi] = ac_range(y);
        // Release dates from i's start: the last access also waits for the copy-ins of the
        // regions read before it (README "A wrap's copy-out waits for the restores before it").
        const double in = copied_in(y);
        if (!jobs_built || in != jobs_in) {
          jobs_built = true;
          jobs_in = in;
          // Copy-ins that must end before L starts: all but `later` of the others, which are off
          // until i ends, and its own. It is off when i starts, not necessarily when i ends: its
          // copy-in may start while i runs, in memory a copy-out landing then frees. With none,
          // L may run beside i (on another stream).
          delayed_jobs(wraps_after, in, l.dur_us, bw_in, t, wrap_after_jobs);
          wrap_after_sched.reset(wrap_after_jobs, bw_out);
        }
        // On [ya, yb] of the A/C share, the step is at least the value with start(i) at ya and
        // the wrapped bytes at yb.
        auto split_value = [&](double ya, double yb) {
          const double start = start_i(ya), wrapped = y - yb - wrap_after_free;
          const double v = std::max({start + rest, wrap_sched.end(y - yb - wrap_free),
                                     start + wrap_after_sched.end(wrapped)});
          // The restored wraps' copy-ins and copy-outs on the two engines, from i's start (README
          // "A wrap's copy-outs wait for the others' restores"): at most the wrapped bytes and
          // all the restored ones over the faster engine, and one launch, so built only where
          // that could raise v.
          const double faster = std::max(bw_in, bw_out);
          if (bw_in <= 0 || start + (wrapped + restored_bytes) / faster + longest_launch <= v)
            return v;
          if (!groups_built) {
            groups_built = true;
            wrap_groups.reset(wraps_after, t);
          }
          const double w = wrapped - wrap_groups.unrestored();
          if (w <= 0) return v;
          return std::max(v, start + wrap_groups.least(w) / faster + wrap_groups.min_dur());
        };
        return least_over_cells(lo, hi, enough, split_value, splits);
      };
      // A launch whose value cannot beat the bound so far is not worth every cell: the value is
      // at most that of any one cell (refined, where the refinement runs), so a few cells spread
      // over the grid, one of them no higher than the bound so far, settle it (0: no higher).
      const double so_far = std::max(lb.compute_us, lb.traffic_us);
      constexpr std::size_t kProbes = 8;
      if (!rank && grid.size() > 4 * kProbes)
        for (std::size_t p = 0; p < kProbes; ++p) {
          const std::size_t k = (grid.size() - 2) * p / (kProbes - 1);
          auto [v, y, rest] = cell(grid[k], grid[k + 1]);
          if (refining) v = std::max(v, refined_cell(y, rest, so_far));
          if (v <= so_far) return 0.0;
        }
      double best = 0;
      bool first = true;
      cells.clear();
      auto consider = [&](double lo_alpha, double hi_alpha) {
        cells.push_back(cell(lo_alpha, hi_alpha));
        const double v = std::get<0>(cells.back());
        if (first || v < best) best = v, first = false;
      };
      for (std::size_t k = 0; k + 1 < grid.size(); ++k) consider(grid[k], grid[k + 1]);
      consider(amax, amax);
      // Cells are refined cheapest first, until the next one's unrefined value (a lower bound on
      // its refined one) is no lower than the best refined so far, that best cannot raise the
      // bound, or the cells to refine are used up: kRefinedCellsPerLaunch, then the shared
      // allowance (then the next cell's unrefined value bounds the rest).
      if (refining) {
        std::sort(cells.begin(), cells.end());
        double refined = std::numeric_limits<double>::infinity();
        for (std::size_t k = 0; k < cells.size(); ++k) {
          const auto& [v, y, rest] = cells[k];
          // Stopping once refined <= the bound so far may leave `refined` above the launch's
          // value (a cell left unrefined may refine lower), but no higher than the bound so far,
          // which only a higher value raises.
          if (v >= refined || refined <= lb.traffic_us) break;
          if (k >= kRefinedCellsPerLaunch) {
            if (extra_cells_left < 1) {
              // Cells left unrefined: their unrefined values are lower bounds of their refined
              // ones, and this one's is the least of them.
              refined = std::min(refined, v);
              break;
            }
            extra_cells_left -= 1;
          }
          refined = std::min(refined, std::max(v, refined_cell(y, rest, refined)));
        }
        best = std::max(best, refined);
      }
      return best;
    };
    double best = solve();
    // A region whose recomputation by its next access makes every run at least v long
    // (RecomputeRoom::at): either some such region is recomputed (step >= v), or none is, and the
    // bound with those regions swapped holds. So the step is at least the smaller of v and that
    // bound; thresholds v from the largest down, until the bound without them reaches v.
    if (!room.empty()) {
      thresholds.clear();
      for (const auto& it : items)
        if (std::get<2>(it) > std::max({best, lb.compute_us, lb.traffic_us}))
          thresholds.push_back(std::get<2>(it));
      std::sort(thresholds.begin(), thresholds.end(), std::greater<>());
      thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
      if (!thresholds.empty()) all_items = items;
      for (std::size_t k = 0; k < thresholds.size() && k < kMaxRoomThresholds; ++k) {
        const double v = thresholds[k];
        items.clear();
        for (const auto& it : all_items)
          if (std::get<2>(it) < v) items.push_back(it);
        const double w = solve();
        best = std::max(best, std::min(v, w));
        if (w >= v) break;
      }
    }
    if (best > lb.traffic_us) {
      lb.traffic_us = best;
      lb.tightest_launch = i;
    }
    return best;
  };
  if (refine_all) {
    for (std::size_t i = 0; i < n; ++i) at_launch(i, true, false);
    lb.refined_launches = over;
  } else if (!itemize) {
    // The refinement's terms assume the recomputation items listed (where they are not, every
    // recomputable region is free to leave, and the two were never meant to be combined).
    for (std::size_t i = 0; i < n; ++i) at_launch(i, false, false);
  } else {
    std::vector<std::pair<double, std::size_t>> ranked;  // (value unrefined, launch)
    ranked.reserve(over);
    for (std::size_t i = 0; i < n; ++i)
      if (a.live_bytes[i] > budget) ranked.emplace_back(at_launch(i, false, true), i);
    const double visits = full_visits;
    const auto k = std::min(
        ranked.size(),
        static_cast<std::size_t>(std::max(1.0, visits / std::max<double>(1, t.regions.size()))));
    std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(k), ranked.end(),
                      std::greater<>());
    for (std::size_t j = 0; j < k; ++j) at_launch(ranked[j].second, true, false);
    lb.refined_launches = k;
  }
  lb.covering_us = covering_bound(a, budget);
  lb.bound_us = std::max({lb.compute_us, lb.traffic_us, lb.covering_us});
  return lb;
}

}  // namespace gswap::policy
