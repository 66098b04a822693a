// process.h: what the hooks call: the process's one residency manager (residency.h) over the
// real driver, its settings, and the process-wide concerns around it (init at cuInit, fork, the
// summary at exit, the daemon's budget and connection callbacks).
//
// Threads: these functions may be called from any application thread; the locking is
// residency's (residency.h). fast() is read by the launch path without locks.
#pragma once

#include <cstdint>
#include <vector>

#include "include/gswap.h"
#include "interpose/cuda_api.h"
#include "interpose/fast_state.h"
#include "interpose/param_scan.h"
#include "interpose/plan_executor.h"

namespace gswap::interpose {

FastState& fast();

// The settings, the log and timeline files and the framework check, once, before the driver's
// cuInit runs: a refused configuration leaves the driver uninitialised, so a program that goes
// on past cuInit's error gets CUDA_ERROR_NOT_INITIALIZED from every other call instead of a
// device with no budget. Returns the error every cuInit must return (CUDA_SUCCESS when fine).
CUresult check_settings();

// Process init at cuInit, once the driver's cuInit succeeded: check_settings, then the budget
// (which needs the device's size), the residency, telemetry. Returns the error every cuInit
// must return when the configuration is refused (CUDA_SUCCESS when fine).
CUresult init_process();

// Allocation. *handled = false means "not a region, forward to the driver" (small allocation,
// no context or another one, VA exhausted, graph memory during a capture): the caller then calls
// arena_alloc.
CUresult region_alloc(CUdeviceptr* out, std::size_t bytes, CUstream stream, bool async,
                      bool per_thread, bool* handled);
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
std::uint64_t budget_total(CUdevice dev, std::uint64_t physical);
bool region_range(CUdeviceptr p, CUdeviceptr* base, std::size_t* size);
// Whether p lies past the end of a live region, in the rest of its granules or its guard granule:
// memory the application never allocated, which the driver would describe while it is mapped.
bool region_slack(CUdeviceptr p);
// The context and device regions belong to (false before the first region).
bool region_owner(CUcontext* ctx, CUdevice* device);

// CUDA_SUCCESS, or the driver's code for a stream it does not know (destroyed, or never made):
// checked before gswap does work on the application's stream, whose failure would otherwise
// show as gswap's own errors. The null, legacy and per-thread streams are always known.
CUresult check_app_stream(CUstream s);

// Slow path of an access: makes every region of t resident (restoring, evicting others), has
// the caller's stream (or, for sync calls, the host) wait for restores, and pins them all.
// On success the caller marks use, enqueues, then unpins. On a stream the driver does not know,
// the driver's code (check_app_stream) before anything moves.
CUresult prepare_slow(TouchSet& t, CUstream stream, bool per_thread, bool sync);
// The wait path of an access whose regions are all mapped but some still being restored
// (kRestoring): the caller's stream waits for those restores on the device (the host, for
// synchronous calls and during a capture). No lock. The regions stay pinned.
CUresult wait_restoring(TouchSet& t, CUstream stream, bool per_thread, bool sync);

// Accesses gswap cannot see. keep_resident: the regions of t never leave again.
CUresult keep_resident(TouchSet& t, CUstream stream, bool per_thread);
// The same for accesses being captured: they stay while a graph made from the capture lives.
CUresult keep_resident_captured(TouchSet& t);
// A capture ended with a graph / a graph or an instance of it destroyed (hooks_graph.cpp).
std::vector<std::uint64_t> take_captured();
void release_graph(const std::vector<std::uint64_t>& ids);
// Every live region (graph launches, untrackable calls) stays resident from now on.
CUresult keep_all_resident(const char* why);
CUresult keep_resident_at(CUdeviceptr addr, const char* why);

// cuStreamCreate*: the application's non-blocking streams, which cuMemFree of a region waits for.
void stream_created(CUstream stream, unsigned flags);
// Before the real destroy; stream_destroy_failed with what it returned when that fails.
CUcontext stream_destroyed(CUstream stream);
void stream_destroy_failed(CUstream stream, CUcontext tracked);
// Stream capture (fact 8): capture_begin is called before the real cuStreamBeginCapture, and
// capture_end after cuStreamEndCapture or a failed begin.
void capture_begin();
void capture_end();
// Plan execution and measurement on the launch path, while calls are numbered (fast().ordered)
// and a plan or a measurement is on (fast().plan_active). before() runs once the access's regions
// are resident and pinned, just before it is enqueued; after() right after.
struct PlanStep {
  PlanExecutor::Step step;
  std::uint64_t seq = 0;
  CUstream stream = nullptr;
  std::uint32_t stream_number = 0;  // as traces number streams (stream_table.h)
  const char* name = nullptr;       // the kernel's (layout_cache.h), for the timeline
  CUevent start = nullptr;          // kernel timing, while measured
  bool cupti = false;               // timed by CUPTI instead (cupti_timing.h)
};
void plan_before(std::uint64_t seq, std::uint64_t function, const TouchSet& t, CUstream stream,
                 bool per_thread, PlanStep* step);
void plan_after(PlanStep* step);
// The name of a kernel is sent to gswapd once per connection (layout_cache.h keeps it).
void send_kernel_name(std::uint64_t function_id, const char* name,
                      std::atomic<std::uint32_t>* sent);

// The public API's (api.cpp) ways in: GSWAP_OK or a GSWAP_ERROR_* code (include/gswap.h), and
// GSWAP_ERROR_NOT_READY until this process's cuInit has succeeded (in a forked child: its own).
int mark_iteration();
int name_region(std::uint64_t ptr, const char* name);
int register_recompute(std::uint64_t ptr, std::uint64_t bytes, const unsigned long long* sources,
                       int num_sources, double cost_us, gswap_recompute_fn fn, void* ctx);
int unregister_recompute(std::uint64_t ptr);

void apply_budget(std::uint64_t bytes);  // telemetry's BudgetCallback
void announce_live_regions();            // telemetry's ConnectCallback

}  // namespace gswap::interpose
