// cupti_timing.h: kernel, copy and memset times from CUPTI's activity API (GSWAP_TIMING=cupti).
//
// While gswapd measures, each measured access is enqueued between a push and a pop of an
// external correlation id (its seq, kind CUSTOM2: PyTorch's profiler uses CUSTOM0 and CUSTOM1);
// CUPTI writes the access's device start and end into activity buffers, and the join
// (cupti_join.h) gives each seq its times. An access made inside a CUDA runtime call gets no
// external record; it is paired with the runtime call's correlation id, which the runtime
// domain's API callbacks give at the call's exit (a call that made several accesses: none, all
// counted as skipped). No event is recorded on the application's stream.
// Timestamps are on CLOCK_MONOTONIC (CUPTI is given the library's clock), so they land on the
// same axis as the event measurements (Timings::host_to_device).
//
// libcupti is loaded at run time (dlopen), on the swapper thread once the context is current,
// never at cuInit. When it cannot be loaded, is not CUDA 13's, or refuses the activity callbacks
// (another CUPTI client holds them), one warning says why and kernels are timed with events.
// When it stops delivering records for measured launches (a profiler started later took the
// callbacks), one warning says so and events take over for the rest of the run; the runtime
// callbacks' subscription (CUPTI has one per process) is given up then too.
//
// Threads: begin/end on application threads (CUPTI's own per-thread calls and thread-local
// flags; nothing of ours is locked or allocated); the runtime API callbacks on application
// threads too (thread-local counts, and a lock-free queue of the calls to pair, which the buffer
// callback and poll drain); the buffer callbacks on whichever thread CUPTI calls them, under a
// mutex of this file; start and poll on the swapper thread. All state is static and trivially
// destructible: CUPTI may call back from its own thread while the process exits.
#pragma once

#include <atomic>
#include <cstdint>

#include "interpose/timings.h"

namespace gswap::interpose::cupti {

// At init (before the swapper starts): whether CUPTI is wanted, and the library to load (empty:
// libcupti.so.13, then libcupti.so, by the loader's path, then /usr/local/cuda/lib64).
void configure(bool wanted, const char* path);

// Whether measured accesses are timed by CUPTI now (one load; the launch path).
bool active();

// The launch path of a measured access: around its enqueue.
void begin(std::uint64_t seq);
void end();

// In a child after fork: CUPTI is not used there (it does not survive fork).
void forget_after_fork();

// The swapper's side (Residency::set_external_timings).
ExternalTimings& service();

}  // namespace gswap::interpose::cupti
