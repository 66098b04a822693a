// region.h: one swappable allocation: a granularity-aligned VA range that keeps its address
// while its bytes move between device and host.
//
// Ownership: the atomics are read on the launch path without locks (pins, state, last_use,
// streams, restore_pending); every other field, and every state change, is owned by the residency
// mutex (residency.cpp). Region objects are recycled, never freed, so a launch that raced with a
// free reads a stale but valid object and then sees state kFree.
#pragma once

#include <atomic>
#include <cstdint>

namespace gswap::interpose {

enum RegionState : std::uint32_t {
  kRegionFree = 0,      // not in use (recycled object)
  kRegionResident = 1,  // physical memory mapped, usable
  kRegionEvicting = 2,  // D2H in flight; physical still mapped until the copy's event completes
  kRegionEvicted = 3,   // bytes on the host, VA unmapped (touching it faults)
};

struct Region {
  // --- read on the launch path ---
  std::atomic<std::uint32_t> state{kRegionFree};
  std::atomic<std::uint32_t> pins{0};             // launches between check and enqueue
  std::atomic<std::uint32_t> restore_pending{0};  // H2D may still be in flight
  std::atomic<std::uint64_t> last_use{0};         // call sequence number of the last access
  std::atomic<std::uint64_t> streams{0};          // bit per stream slot that used it since eviction

  // --- owned by the residency mutex ---
  std::uint64_t id = 0;
  std::uint64_t base = 0;
  std::uint64_t size = 0;       // what the application asked for
  std::uint64_t mapped = 0;     // size rounded up to the granularity
  std::uint64_t alloc_seq = 0;  // call sequence number of its allocation (re-announced to gswapd)
  std::uint64_t handle = 0;     // CUmemGenericAllocationHandle while physical memory is held
  void* host = nullptr;         // host copy while evicted (pinned or pageable)
  bool host_pinned = false;
  bool must_stay = false;         // accesses gswap cannot see: never evicted
  bool free_requested = false;    // freed by the application while an eviction was in flight
  void* restore_event = nullptr;  // CUevent of the last H2D
  void* evict_event = nullptr;    // CUevent of the last D2H
  Region* next_free = nullptr;    // recycling list
};

}  // namespace gswap::interpose
