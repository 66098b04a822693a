// victims.h: which region leaves next when room must be made.
//
// Residency asks a VictimPolicy, under its mutex, for the next region to evict among the live
// ones that may leave now (the predicate: resident, not pinned, not needed by the call making
// room, not required to stay). Least recently used today; a plan-aware policy (the region whose
// next planned use is furthest away) plugs in here.
#pragma once

#include <cstdint>
#include <vector>

#include "interpose/region.h"

namespace gswap::interpose {

// Whether r is mapped with its bytes (or about to be: a restore in flight).
inline bool mapped_state(std::uint32_t st) {
  return st == kRegionResident || st == kRegionRestoring;
}

// Whether r may leave but for the pins of launches: mapped, not required to stay, not in the
// swapper's hands (mutex held). A region whose restore is still in flight may leave too: its
// swap-out is ordered after that restore.
inline bool movable(const Region* r) {
  return !r->fixed() && mapped_state(r->state.load(std::memory_order_relaxed)) && !r->swapper_busy;
}

// Whether r may leave now: movable and pinned by no launch. The predicate residency gives a
// VictimPolicy (mutex held).
inline bool may_leave(const Region* r, const void*) {
  return movable(r) && r->pins.load(std::memory_order_relaxed) == 0;
}

// Whether some region could leave but for a launch's pin (held only between a launch's check
// and its enqueue) or the swapper's work on it (a restore being issued, outside the mutex): a
// shortage is then worth a short wait before it is called out of memory.
inline bool held_only_by_pins(const std::vector<Region*>& live) {
  for (const Region* r : live) {
    if (r->fixed()) continue;
    // The swapper works on a region outside the mutex (a staged restore holds its memory while
    // the region is still on the host): it is evictable again once that is done.
    if (r->swapper_busy) return true;
    // Mapped, pinned or not: a region room could not be made of (its pin seen) may have been
    // let go since. A launch that pins a region while it begins to leave lets it go and takes the
    // slow path; one thread of four allocating against the others' launches (preload_contend)
    // then found it unpinned here and was answered out of memory, about once in 400 runs.
    if (mapped_state(r->state.load(std::memory_order_relaxed))) return true;
  }
  return false;
}

class VictimPolicy {
 public:
  using Evictable = bool (*)(const Region* r, const void* ctx);
  virtual ~VictimPolicy() = default;
  virtual const char* name() const = 0;
  // The region to evict next, or nullptr when none may leave.
  virtual Region* pick(const std::vector<Region*>& live, Evictable evictable, const void* ctx) = 0;
};

class LruVictims final : public VictimPolicy {
 public:
  const char* name() const override { return "lru"; }
  Region* pick(const std::vector<Region*>& live, Evictable evictable, const void* ctx) override {
    Region* best = nullptr;
    std::uint64_t best_use = ~0ull;
    for (Region* r : live) {
      if (!evictable(r, ctx)) continue;
      std::uint64_t u = r->last_use.load(std::memory_order_relaxed);
      if (u < best_use) {
        best_use = u;
        best = r;
      }
    }
    return best;
  }
};

}  // namespace gswap::interpose
