// segment_tree.h: range-add / range-max over launch positions, the planners' planned-memory
// curve. find_last_above answers "where, in a window, would this restore exceed the budget?" in
// O(log n), which keeps a 20,000-launch plan well inside its time target.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace gswap::policy {

class MaxSegmentTree {
 public:
  explicit MaxSegmentTree(const std::vector<std::int64_t>& v) : n_(v.size()) {
    size_ = 1;
    while (size_ < n_) size_ <<= 1;
    mx_.assign(2 * size_, kNeg);
    lz_.assign(2 * size_, 0);
    for (std::size_t i = 0; i < n_; ++i) mx_[size_ + i] = v[i];
    for (std::size_t i = size_ - 1; i >= 1; --i) mx_[i] = std::max(mx_[2 * i], mx_[2 * i + 1]);
  }
  // Both walk bottom-up over the O(log n) nodes that cover [l, r] exactly, with no recursion.
  void add(std::size_t l, std::size_t r, std::int64_t d) {  // inclusive
    if (l > r || l >= n_) return;
    std::size_t lo = l + size_, hi = std::min(r, n_ - 1) + size_ + 1;
    const std::size_t first = lo, last = hi - 1;
    for (; lo < hi; lo >>= 1, hi >>= 1) {
      if (lo & 1) apply(lo++, d);
      if (hi & 1) apply(--hi, d);
    }
    pull(first);
    pull(last);
  }
  // A node's value is its subtree's maximum less its ancestors' pending adds. Every node taken
  // from the left so far lies under node lo - 1 once lo has moved up a level, every node taken
  // from the right under node hi, so each side adds its own ancestors' pending adds as it climbs.
  std::int64_t max(std::size_t l, std::size_t r) const {
    if (l > r || l >= n_) return kNeg;
    std::size_t lo = l + size_, hi = std::min(r, n_ - 1) + size_ + 1;
    std::int64_t left = kNeg, right = kNeg;
    bool has_left = false, has_right = false;
    while (lo < hi) {
      if (lo & 1) left = has_left ? std::max(left, mx_[lo]) : mx_[lo], has_left = true, ++lo;
      if (hi & 1) --hi, right = has_right ? std::max(right, mx_[hi]) : mx_[hi], has_right = true;
      lo >>= 1, hi >>= 1;
      if (has_left) left += lz_[lo - 1];
      if (has_right) right += lz_[hi];
    }
    if (!has_left) return climb(hi, right);
    if (!has_right) return climb(lo - 1, left);
    std::size_t pl = lo - 1, pr = hi;
    while (pl != pr) pl >>= 1, pr >>= 1, left += lz_[pl], right += lz_[pr];
    return climb(pl, std::max(left, right));
  }
  std::int64_t max_all() const { return n_ ? mx_[1] : kNeg; }
  // Largest index in [l, r] whose value exceeds x, or npos.
  std::size_t find_last_above(std::size_t l, std::size_t r, std::int64_t x) const {
    if (l > r || l >= n_) return npos;
    return find_last(1, 0, size_ - 1, l, std::min(r, n_ - 1), x, 0);
  }
  // Smallest index in [l, r] whose value exceeds x, or npos.
  std::size_t find_first_above(std::size_t l, std::size_t r, std::int64_t x) const {
    if (l > r || l >= n_) return npos;
    return find_first(1, 0, size_ - 1, l, std::min(r, n_ - 1), x, 0);
  }
  static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

 private:
  static constexpr std::int64_t kNeg = std::numeric_limits<std::int64_t>::min() / 4;
  void apply(std::size_t node, std::int64_t d) {
    mx_[node] += d;
    if (node < size_) lz_[node] += d;
  }
  void pull(std::size_t node) {
    while (node > 1) node >>= 1, mx_[node] = std::max(mx_[2 * node], mx_[2 * node + 1]) + lz_[node];
  }
  // v, a maximum over nodes under `node` with the pending adds of node itself and below counted,
  // plus those of node's proper ancestors.
  std::int64_t climb(std::size_t node, std::int64_t v) const {
    while (node > 1) node >>= 1, v += lz_[node];
    return v;
  }
  std::size_t find_last(std::size_t node, std::size_t nl, std::size_t nr, std::size_t l,
                        std::size_t r, std::int64_t x, std::int64_t acc) const {
    if (r < nl || nr < l || mx_[node] + acc <= x) return npos;
    if (nl == nr) return nl;
    std::size_t mid = (nl + nr) / 2;
    std::int64_t inner = acc + lz_[node];
    std::size_t got = find_last(2 * node + 1, mid + 1, nr, l, r, x, inner);
    if (got != npos) return got;
    return find_last(2 * node, nl, mid, l, r, x, inner);
  }
  std::size_t find_first(std::size_t node, std::size_t nl, std::size_t nr, std::size_t l,
                         std::size_t r, std::int64_t x, std::int64_t acc) const {
    if (r < nl || nr < l || mx_[node] + acc <= x) return npos;
    if (nl == nr) return nl;
    std::size_t mid = (nl + nr) / 2;
    std::int64_t inner = acc + lz_[node];
    std::size_t got = find_first(2 * node, nl, mid, l, r, x, inner);
    if (got != npos) return got;
    return find_first(2 * node + 1, mid + 1, nr, l, r, x, inner);
  }
  std::size_t n_, size_;
  std::vector<std::int64_t> mx_, lz_;
};

}  // namespace gswap::policy
