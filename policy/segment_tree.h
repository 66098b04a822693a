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
  void add(std::size_t l, std::size_t r, std::int64_t d) {  // inclusive
    if (l > r || l >= n_) return;
    add(1, 0, size_ - 1, l, std::min(r, n_ - 1), d);
  }
  std::int64_t max(std::size_t l, std::size_t r) const {
    if (l > r || l >= n_) return kNeg;
    return max(1, 0, size_ - 1, l, std::min(r, n_ - 1));
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
  void add(std::size_t node, std::size_t nl, std::size_t nr, std::size_t l, std::size_t r,
           std::int64_t d) {
    if (r < nl || nr < l) return;
    if (l <= nl && nr <= r) {
      mx_[node] += d;
      lz_[node] += d;
      return;
    }
    std::size_t mid = (nl + nr) / 2;
    add(2 * node, nl, mid, l, r, d);
    add(2 * node + 1, mid + 1, nr, l, r, d);
    mx_[node] = std::max(mx_[2 * node], mx_[2 * node + 1]) + lz_[node];
  }
  std::int64_t max(std::size_t node, std::size_t nl, std::size_t nr, std::size_t l,
                   std::size_t r) const {
    if (r < nl || nr < l) return kNeg;
    if (l <= nl && nr <= r) return mx_[node];
    std::size_t mid = (nl + nr) / 2;
    return std::max(max(2 * node, nl, mid, l, r), max(2 * node + 1, mid + 1, nr, l, r)) + lz_[node];
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
