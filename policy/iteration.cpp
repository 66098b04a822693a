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

double score(std::span<const std::uint64_t> s, std::size_t p) {
  std::size_t n = s.size() - p, same = 0;
  for (std::size_t i = 0; i < n; ++i) same += s[i] == s[i + p];
  return n ? static_cast<double>(same) / static_cast<double>(n) : 0.0;
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

  std::vector<std::pair<std::size_t, double>> scored;
  double best = 0;
  for (std::size_t p : candidate_periods(symbols, lo, hi)) {
    double m = score(symbols, p);
    if (m >= options.min_match) {
      scored.emplace_back(p, m);
      best = std::max(best, m);
    }
  }
  if (scored.empty()) return std::nullopt;
  for (auto [p, m] : scored) {  // ascending p
    if (m + kTieTolerance >= best) {
      // Offset 0 is taken as an iteration boundary (the stream starts with a step), so the last
      // complete iteration begins at the largest multiple of p that leaves room for p symbols.
      std::size_t phase = ((n - p) / p) * p;
      return PeriodResult{p, phase, m};
    }
  }
  return std::nullopt;
}

}  // namespace gswap::policy
