// residency.h: the memory manager behind the hooks: regions, budget, eviction and restore.
//
// Threads and locks:
//   - The launch path (access.h) reads the region map, the stream table and the region atomics
//     and takes no lock.
//   - Everything else here (region lists, the VA allocator, the physical-handle pool, host
//     buffers, pending swap-outs and frees, byte accounting) is owned by g_mutex in residency.cpp,
//     held by whichever application thread is on a slow path (allocation, free, restore, memory
//     queries) or by telemetry's thread applying a new budget.
//   - The reclaim thread (residency.cpp) waits for swap-out/free events outside the mutex, then
//     takes it to unmap what finished and wake allocations waiting on a condition variable.
//   - restore_mutex (taken before g_mutex) serialises the calls that pin regions and may wait.
#pragma once

#include <atomic>
#include <cstdint>

#include "interpose/cuda_api.h"
#include "interpose/param_scan.h"
#include "interpose/region_map.h"
#include "interpose/stream_table.h"

namespace gswap::interpose {

// State the launch path reads without locks.
struct FastState {
  std::atomic<bool> active{false};    // some region exists: launches must be scanned
  std::atomic<std::uint64_t> seq{0};  // call sequence number
  std::atomic<std::uint64_t> launches{0};
  std::atomic<int> capturing{0};      // streams in capture
  std::atomic<bool> all_stay{false};  // every region stays resident (graphs, untrackable calls)
  RegionMap map;
  StreamTable streams;
};
FastState& fast();

// Process init at cuInit: settings, budget, log. Returns the error every cuInit must return when
// the configuration is refused (CUDA_SUCCESS when fine).
CUresult init_process();

// Allocation. *handled = false means "not a region, forward to the driver" (small allocation,
// no context, VA exhausted): the caller then calls arena_alloc.
CUresult region_alloc(CUdeviceptr* out, std::size_t bytes, CUstream stream, bool per_thread,
                      bool* handled);
// Small allocations go to the driver but count against the budget; room is made first.
CUresult arena_alloc(CUdeviceptr* out, std::size_t bytes, CUstream stream, bool async,
                     bool per_thread, CUmemoryPool pool);
// Pitched allocations are left to the driver (its pitch rules are device-specific) and counted
// like the arena.
CUresult arena_alloc_pitch(CUdeviceptr* out, std::size_t* pitch, std::size_t width,
                           std::size_t height, unsigned elem);
// Frees a region (stream-ordered) or an arena allocation; anything else is forwarded.
CUresult free_any(CUdeviceptr p, CUstream stream, bool async, bool per_thread);

bool memory_info(std::size_t* free, std::size_t* total);  // false before init: forward
std::uint64_t budget_total(std::uint64_t physical);
bool region_range(CUdeviceptr p, CUdeviceptr* base, std::size_t* size);
// The context and device regions belong to (false before the first region).
bool region_owner(CUcontext* ctx, CUdevice* device);

// Slow path of an access: makes every region of t resident (restoring, evicting others), has
// the caller's stream (or, for sync calls, the host) wait for restores, and pins them all.
// On success the caller marks use, enqueues, then unpins.
CUresult prepare_slow(TouchSet& t, CUstream stream, bool per_thread, bool sync);

// Accesses gswap cannot see. keep_resident: the regions of t never leave again.
CUresult keep_resident(TouchSet& t, CUstream stream, bool per_thread);
// Every live region (graph launches, untrackable calls) stays resident from now on.
CUresult keep_all_resident(const char* why);
CUresult keep_resident_at(CUdeviceptr addr, const char* why);

void stream_destroyed(CUstream stream);
void capture_begin(CUstream stream, CUstreamCaptureMode mode);
void capture_end(CUstream stream);
void apply_budget(std::uint64_t bytes);  // telemetry's BudgetCallback
void announce_live_regions();            // telemetry's ConnectCallback

}  // namespace gswap::interpose
