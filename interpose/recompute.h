// recompute.h: what a framework registered about recomputing a region (gswap.h,
// gswap_register_recompute), and the rule that keeps a failing callback from losing data.
//
// A region is recomputable when registered byte ranges cover all of it; each range has its
// callback and its sources (the regions it reads, by Region and id: a recycled Region has another
// id). Residency (recompute.cpp) owns these under its mutex:
//   - a planned drop (proto::PlanAction::kRecompute) evicts the region without a copy, through
//     kEvicting, once every stream that used it has passed; it ends in kDropped;
//   - the next access finds it kDropped and recomputes it on the access's own thread and stream:
//     sources first (made resident, recursively recomputed when dropped too: a chain), then the
//     region's memory, then every range's callback on that stream; the region is then kRestoring
//     with its restore event recorded after the callbacks' work, so any other stream waits for it;
//   - the failure rule: until a callback has succeeded once in this process, a drop with it keeps a
//     host copy (the drop copies, as a swap-out does); when the callback fails the copy is put back
//     and the registration ends (the region is swapped from then on). A callback that fails after
//     it was trusted, on a region dropped without a copy, stops the process with the region named.
//     GSWAP_RECOMPUTE_KEEP_COPY=1 keeps a copy always.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "include/gswap.h"
#include "interpose/region.h"

namespace gswap::interpose {

struct RecomputeSource {
  Region* region = nullptr;
  std::uint64_t id = 0;  // the region's id at registration
};

struct RecomputeRange {
  std::uint64_t offset = 0, bytes = 0;  // inside the region
  gswap_recompute_fn fn = nullptr;
  void* ctx = nullptr;
  double cost_us = 0;  // 0: unknown
  std::vector<RecomputeSource> sources;
};

struct RecomputeInfo {
  std::vector<RecomputeRange> ranges;  // sorted by offset, disjoint
  bool announced = false;              // gswapd was told the region is recomputable

  // Whether the ranges cover [0, size).
  bool covers(std::uint64_t size) const {
    std::uint64_t at = 0;
    for (const RecomputeRange& r : ranges) {
      if (r.offset > at) return false;
      at = std::max(at, r.offset + r.bytes);
    }
    return at >= size;
  }
  bool overlaps(std::uint64_t offset, std::uint64_t bytes) const {
    for (const RecomputeRange& r : ranges)
      if (offset < r.offset + r.bytes && r.offset < offset + bytes) return true;
    return false;
  }
};

// Callbacks that have succeeded at least once: regions dropped with them need no host copy.
class TrustedCallbacks {
 public:
  bool trusted(gswap_recompute_fn fn) const {
    return std::find(fns_.begin(), fns_.end(), fn) != fns_.end();
  }
  void succeeded(gswap_recompute_fn fn) {
    if (!trusted(fn)) fns_.push_back(fn);
  }
  void failed(gswap_recompute_fn fn) {
    fns_.erase(std::remove(fns_.begin(), fns_.end(), fn), fns_.end());
  }
  bool all_trusted(const RecomputeInfo& info) const {
    for (const RecomputeRange& r : info.ranges)
      if (!trusted(r.fn)) return false;
    return true;
  }

 private:
  std::vector<gswap_recompute_fn> fns_;
};

// Tells gswapd that r is recomputable (when its ranges cover it): its sources and cost hint.
// Residency's mutex held.
void announce_recomputable(const Region& r);

// The thread inside a recomputation callback: its own launches reach regions being recomputed
// (they are not resident yet), are no positions of the iteration, and must not take the
// restorer lock that thread already holds.
inline thread_local int t_recompute_depth __attribute__((tls_model("initial-exec"))) = 0;
inline bool in_recompute() {
  return t_recompute_depth > 0;
}

}  // namespace gswap::interpose
