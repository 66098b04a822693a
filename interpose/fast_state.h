// fast_state.h: the state the launch path reads without locks.
//
// Laid out so that launching threads do not write to shared cache lines: the read-mostly part
// (region map, flags, stream table) never changes per launch; the call sequence number, the only
// global counter written per call, is bumped only while gswapd records a trace or a plan is
// followed (then launches must be globally ordered); the launch count is spread over per-thread
// slots; LRU marks use the CPU's cycle counter, not a shared counter.
#pragma once

#include <atomic>
#include <cstdint>

#include "interpose/clock.h"
#include "interpose/region_map.h"
#include "interpose/stream_table.h"

namespace gswap::interpose {

// Launches counted in per-thread slots (threads beyond kSlots share them, still exact).
class LaunchCounter {
 public:
  void add() {
    static thread_local unsigned slot = next_.fetch_add(1, std::memory_order_relaxed) % kSlots;
    slots_[slot].n.fetch_add(1, std::memory_order_relaxed);
  }
  std::uint64_t total() const {
    std::uint64_t t = 0;
    for (const Slot& s : slots_) t += s.n.load(std::memory_order_relaxed);
    return t;
  }
  void reset() {
    for (Slot& s : slots_) s.n.store(0, std::memory_order_relaxed);
  }

 private:
  static constexpr unsigned kSlots = 64;
  struct alignas(64) Slot {
    std::atomic<std::uint64_t> n{0};
  };
  Slot slots_[kSlots];
  std::atomic<unsigned> next_{0};
};

struct FastState {
  // --- read-mostly ---
  std::atomic<bool> active{false};       // some region exists: launches must be scanned
  std::atomic<bool> all_stay{false};     // every region stays resident (graphs, untrackable calls)
  std::atomic<bool> ordered{false};      // calls need a global sequence number (trace or plan)
  std::atomic<bool> plan_active{false};  // a plan is followed or kernels are timed
  RegionMap map;
  StreamTable streams;
  // --- written rarely (capture begin/end) ---
  alignas(64) std::atomic<int> capturing{0};  // streams in capture (see capture_gate.h)
  // --- written per call while `ordered` ---
  alignas(64) std::atomic<std::uint64_t> seq{0};  // call sequence number
  alignas(64) LaunchCounter launches;
};

}  // namespace gswap::interpose
