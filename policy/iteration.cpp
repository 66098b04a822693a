// iteration.cpp: finds the training-iteration period of a marker-less launch stream.
//
// A period p scores the fraction of positions i with s[i] == s[i+p]. Two traps shape the search:
//  - multiples of the true period score as well as the period itself, so the smallest near-best
//    period wins;
//  - repeated layers (24 identical transformer blocks) give a short sub-period that scores almost
//    as well as the real one, so "near-best" is a tight tolerance on the best score, not a fixed
//    threshold.
// Scoring every period is O(n * P); for long streams the candidates come from the distances
// between recurrences of short symbol windows instead, which contain the true period whenever the
// stream repeats at all.
#include "policy/iteration.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace gswap::policy {
namespace {

// The score a period must be within of the best one to be preferred for being shorter. Noise moves
// scores by about the noise rate for every period alike, so this tolerance only has to absorb
// sampling error, which is small for the stream lengths that reach this code.
constexpr double kTieTolerance = 0.005;
constexpr std::size_t kConfirm = 3;  // symbols that must agree before following a shift

// The fraction of symbols that recur one period later. Dropped or inserted launches shift the
// later copy by one; the alignment follows such a shift when the next symbol confirms it, within
// an eighth of the period, so a few missing launches do not ruin every later comparison. Since
// the alignment can drift, a candidate near the true period ends up measuring the true one:
// `effective` is the offset at which most matches were made.
struct Score {
  double match = 0;
  std::size_t effective = 0;
};

Score score(std::span<const std::uint64_t> s, std::size_t p, double min_match) {
  const std::size_t n = s.size(), slack = p / 8 + 1;
  std::vector<std::size_t> at(2 * slack + 1, 0);  // matches per offset p - slack .. p + slack
  std::size_t o = p, same = 0, total = 0;
  const auto max_misses =
      static_cast<std::size_t>((1.0 - min_match) * static_cast<double>(n - p)) + kConfirm;
  for (std::size_t i = 0; i + o < n; ++i, ++total) {
    if (s[i] == s[i + o]) {
      ++same;
      ++at[o + slack - p];
      continue;
    }
    // Hopeless candidates stop early: most periods tried are wrong, and every miss costs a search.
    if (total - same > max_misses) return Score{};
    // A miss. If the next kConfirm symbols line up at a nearby offset, a launch was dropped or
    // inserted in one of the copies: follow the shift.
    for (int d : {1, -1, 2, -2, 3, -3}) {
      const std::size_t o2 = o + static_cast<std::size_t>(static_cast<long>(d));
      if (o2 + slack < p || o2 > p + slack || o2 == 0 || i + 1 + o2 + kConfirm > n) continue;
      bool ok = true;
      for (std::size_t j = 1; j <= kConfirm && ok; ++j) ok = s[i + j] == s[i + j + o2];
      if (ok) {
        o = o2;
        break;
      }
    }
  }
  Score sc;
  sc.match = total ? static_cast<double>(same) / static_cast<double>(total) : 0.0;
  sc.effective =
      p + static_cast<std::size_t>(std::max_element(at.begin(), at.end()) - at.begin()) - slack;
  return sc;
}

std::vector<std::size_t> candidate_periods(std::span<const std::uint64_t> s, std::size_t lo,
                                           std::size_t hi) {
  std::vector<std::size_t> out;
  const std::size_t n = s.size();
  if ((hi - lo + 1) * n <= 20'000'000) {
    for (std::size_t p = lo; p <= hi; ++p) out.push_back(p);
    return out;
  }
  // Hash every window of kW symbols; a window recurring at distance d proposes period d.
  constexpr std::size_t kW = 8;
  if (n < kW) return out;
  std::vector<std::uint64_t> h(n - kW + 1);
  for (std::size_t i = 0; i + kW <= n; ++i) {
    std::uint64_t x = 1469598103934665603ull;
    for (std::size_t k = 0; k < kW; ++k) x = (x ^ s[i + k]) * 1099511628211ull;
    h[i] = x;
  }
  std::unordered_map<std::uint64_t, std::size_t> last;
  std::unordered_map<std::size_t, std::size_t> votes;
  for (std::size_t i = 0; i < h.size(); ++i) {
    auto [it, fresh] = last.try_emplace(h[i], i);
    if (!fresh) {
      std::size_t d = i - it->second;
      if (d >= lo && d <= hi) ++votes[d];
      it->second = i;
    }
  }
  std::vector<std::pair<std::size_t, std::size_t>> ranked(votes.begin(), votes.end());
  std::sort(ranked.begin(), ranked.end(), [](auto a, auto b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
  // The nearest-recurrence distances are dominated by in-iteration repeats; the true period still
  // collects a vote from every window that is unique within the iteration, so it ranks high.
  for (std::size_t i = 0; i < ranked.size() && i < 256; ++i) out.push_back(ranked[i].first);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::optional<PeriodResult> detect_iteration_period(std::span<const std::uint64_t> symbols,
                                                    const PeriodOptions& options) {
  const std::size_t n = symbols.size();
  const std::size_t repeats = std::max<std::size_t>(options.min_repeats, 2);
  const std::size_t lo = std::max<std::size_t>(options.min_period, 1);
  const std::size_t hi = std::min(options.max_period, n / repeats);
  if (hi < lo) return std::nullopt;

  std::vector<std::pair<std::size_t, double>> scored;  // (effective period, match)
  double best = 0;
  for (std::size_t p : candidate_periods(symbols, lo, hi)) {
    Score sc = score(symbols, p, options.min_match);
    if (sc.match >= options.min_match && sc.effective >= lo && sc.effective <= hi) {
      scored.emplace_back(sc.effective, sc.match);
      best = std::max(best, sc.match);
    }
  }
  if (scored.empty()) return std::nullopt;
  // Shortest period first; for one period, the best score first (several candidates can drift to
  // the same effective period, and the one that needed no shift scores highest).
  std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first < b.first : a.second > b.second;
  });
  for (auto [p, m] : scored) {
    if (m + kTieTolerance >= best) {
      // Offset 0 is taken as an iteration boundary (the stream starts with a step), so the last
      // complete iteration begins at the largest multiple of p that leaves room for p symbols.
      std::size_t phase = ((n - p) / p) * p;
      return PeriodResult{p, phase, m};
    }
  }
  return std::nullopt;
}

Trace last_marked_iteration(const Trace& trace, bool* none_selects) {
  if (none_selects) *none_selects = false;
  if (trace.iterations.empty()) return trace;
  Trace out;
  out.device = trace.device;
  // Launches in increasing seq (as a trace file must list them) are found by binary search, so
  // that marks selecting nothing cost no scan each.
  const auto& ls = trace.launches;
  const bool sorted = std::is_sorted(
      ls.begin(), ls.end(), [](const Launch& x, const Launch& y) { return x.seq < y.seq; });
  // The last mark that selects launches: one opened as the recording stopped may select none.
  IterationMark m{};
  for (auto it = trace.iterations.rbegin(); it != trace.iterations.rend() && out.launches.empty();
       ++it) {
    m = *it;
    if (sorted) {
      auto first = std::lower_bound(ls.begin(), ls.end(), m.first_seq,
                                    [](const Launch& l, std::uint64_t s) { return l.seq < s; });
      for (; first != ls.end() && first->seq <= m.last_seq; ++first) out.launches.push_back(*first);
    } else {
      for (const Launch& l : ls)
        if (l.seq >= m.first_seq && l.seq <= m.last_seq) out.launches.push_back(l);
    }
  }
  if (out.launches.empty()) {
    if (none_selects) *none_selects = true;
    return trace;
  }
  for (const Region& r : trace.regions)
    if (r.alloc_seq <= m.last_seq && (!r.free_seq || *r.free_seq > m.first_seq))
      out.regions.push_back(r);
  out.iterations = {m};
  return out;
}

}  // namespace gswap::policy
