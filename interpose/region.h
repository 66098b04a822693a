// region.h: one swappable allocation: a granularity-aligned VA range that keeps its address
// while its bytes move between device and host, and the states it moves through.
//
//            alloc                 evict (D2H queued)            copy done, unmapped
//   kFree ----------> kResident ----------------------> kEvicting -------------------> kHost
//                       ^   ^  \                           |  ^                           |
//                       |   |   `--- rescue / failure -----'  | evict before use          | restore
//                       |   |                                 |                           v
//                       |   `------- H2D done ----------- kRestoring <--------------------'
//                       |                                     ^
//                       |                                     | recomputed (callback enqueued)
//                       `-- planned drop (evict, no copy) --> kDropped
//   (a drop passes through kEvicting like a swap-out; it copies only while the callback is not
//   trusted yet, see recompute.h; kDropped -> kHost when a registration ends with a copy kept.)
//   and from every state, free -> kFree (memory back once the streams that used it have passed).
//
// Ownership: the atomics are read on the launch path without locks (pins, state, last_use,
// streams); every other field, and every state change, is owned by the residency mutex
// (residency.cpp). Region objects are recycled, never freed, so a launch that raced with a free
// reads a stale but valid object and then sees state kFree.
#pragma once

#include <atomic>
#include <cstdint>

#include "interpose/cuda_api.h"

namespace gswap::interpose {

enum RegionState : std::uint32_t {
  kRegionFree = 0,       // not in use (recycled object), or freed with memory still pending
  kRegionResident = 1,   // physical memory mapped, bytes valid on the device
  kRegionEvicting = 2,   // swap-out queued or in flight; still mapped until its copy completes
  kRegionHost = 3,       // bytes on the host, VA unmapped (touching it faults)
  kRegionRestoring = 4,  // mapped, H2D in flight: users wait for restore_event on their stream
  kRegionDropped = 5,    // bytes discarded, to be recomputed (recomputation callback); mapped
                         // only while the recomputing thread holds it (handle != 0)
};

struct RecomputeInfo;  // recompute.h
const char* region_state_name(std::uint32_t state);
// Whether residency may move a region from one state to the other (checked on every change).
bool region_transition_allowed(std::uint32_t from, std::uint32_t to);

// A host copy of a region's bytes: pinned (from the pinned pool) or pageable (reached through
// the staging ring).
struct HostBuffer {
  void* ptr = nullptr;
  std::uint64_t bytes = 0;
  bool pinned = false;
};

struct Region {
  // --- read on the launch path ---
  std::atomic<std::uint32_t> state{kRegionFree};
  std::atomic<std::uint32_t> pins{0};      // launches between check and enqueue
  std::atomic<std::uint64_t> last_use{0};  // tick of the last access (LRU)
  std::atomic<std::uint64_t> streams{0};   // stream buckets that used it since its last swap-out
  // Which plan entry last moved it (plan_executor.h's plan_tag): set by the swapper, cleared at
  // the planned back-access.
  std::atomic<std::uint64_t> plan_tag{0};

  // --- owned by the residency mutex ---
  std::uint64_t id = 0;
  std::uint64_t base = 0;
  std::uint64_t size = 0;       // what the application asked for
  std::uint64_t mapped = 0;     // size rounded up to the granularity
  std::uint64_t va_bytes = 0;   // address range held: mapped + one guard granule (0: never reused)
  std::uint64_t alloc_seq = 0;  // call sequence number of its allocation (re-announced to gswapd)
  std::uint64_t gen = 0;        // bumped on every state change: stale swapper work is skipped
  std::uint64_t handle = 0;     // CUmemGenericAllocationHandle while physical memory is held
  HostBuffer host;              // host copy while swapped out (kept for reuse until freed)
  bool must_stay = false;       // accesses gswap cannot see: never evicted
  bool stream_ordered = false;  // from cuMemAllocAsync: cuMemFree of it does not wait
  // Captured graphs that replay it (and the capture still open): it stays while any is alive.
  std::uint32_t graph_holds = 0;
  // Kept on the device whatever the budget (gswapd plans around it as fixed): made to stay, or
  // held by a captured graph.
  bool fixed() const { return must_stay || graph_holds != 0; }
  std::uint64_t capture_period = 0;  // the last capture period that held it (no double hold)
  bool free_requested = false;       // freed by the application while a swap-out was in flight
  bool evict_issued = false;         // kEvicting: the D2H copy and its event are enqueued
  bool free_issued = false;          // a stream-ordered free ordered (events recorded)
  bool swapper_busy = false;         // the swapper copies it with the mutex released (staging ring)
  // Its physical memory was handed to another region's restore while its own swap-out or free was
  // still in flight (the restore waits for that on the device): when that completes, only the
  // mapping at its address is dropped.
  bool handle_given = false;
  // Its old mapping could not be dropped after its memory was handed on: dropped (again) before
  // anything is mapped at its address.
  bool stale_mapping = false;
  std::uint32_t d2h_in_flight = 0;        // swap-out copies issued and not yet seen complete
  bool restore_pending = false;           // the last restore has not been seen complete
  std::uint64_t restores_issued = 0;      // numbers restores, so a stale completion is recognised
  CUresult restore_error = CUDA_SUCCESS;  // why the swapper gave up restoring it (waiters read it)
  CUevent restore_event = nullptr;        // the last H2D's completion (a timing event)
  CUevent restore_start = nullptr;        // recorded just before it (the link's bandwidth)
  CUevent evict_event = nullptr;          // the last D2H's (or stream-ordered free's) completion
  // A planned swap-out's order point, taken when its access was enqueued (on the order stream).
  // used_pending: one was taken in this region's life; every later swap-out or drop of it waits
  // for the last one (a free on the order stream follows it there).
  CUevent used_event = nullptr;
  bool used_pending = false;
  // Prefetches asked for (Residency's count) when its last swap-out began.
  std::uint64_t evict_asks = 0;
  CUevent evict_start = nullptr;
  // Recomputation (recompute.h): its registration, how many registrations name it as a source,
  // and a planned drop in progress.
  RecomputeInfo* recompute = nullptr;
  std::uint32_t dependents = 0;
  bool dropping = false;    // kEvicting: a planned drop
  bool drop_copy = false;   // that drop copies the bytes to the host first (a fallback)
  bool host_valid = false;  // kDropped: the host buffer holds its bytes
  // Recomputed only as a source of another recomputation (a chain's intermediate): resident while
  // memory allows, and the first to be dropped again when room is needed (as gswapd's simulator
  // counts it). Cleared when it leaves.
  bool kept = false;
  char name[64] = {};           // given by the program (gswap_name_allocation)
  Region* next_free = nullptr;  // recycling list
};

}  // namespace gswap::interpose
