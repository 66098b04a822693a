// telemetry.h: what the preload library tells gswapd, and what it hears back.
//
// The interposer calls these at its event points. The implementation (telemetry.cpp) owns the
// daemon connection, the shared-memory ring and the plan area. Rules, because these run inside
// the application:
//   - every event function is lock-free, allocation-free and never blocks; when the channel is
//     full or no daemon is connected the event is dropped and counted;
//   - start/stop/after_fork_child are the only functions that may do I/O or start threads;
//   - nothing here throws.
#pragma once

#include <atomic>
#include <cstdint>

#include "proto/wire.h"

namespace gswap::interpose::telemetry {

// Counters the library publishes for `gswapctl status`. Bytes unless said otherwise.
struct Counters {
  std::uint64_t budget = 0;
  std::uint64_t resident = 0;
  std::uint64_t peak_resident = 0;
  std::uint64_t swapped_out = 0;  // total bytes copied device to host
  std::uint64_t swapped_in = 0;   // total bytes copied host to device
  std::uint64_t stalls = 0;       // calls that waited for a restore or for budget
  std::uint64_t stall_ns = 0;
  std::uint64_t pinned = 0;   // pinned host bytes held
  std::uint64_t regions = 0;  // live swappable regions
  std::uint64_t launches = 0;
  // Plans and their execution (proto::StatusPayload has the meaning of each).
  std::uint64_t mode = 0;
  std::uint64_t plan_generation = 0;
  std::uint64_t planned_evictions = 0;
  std::uint64_t prefetches = 0;
  std::uint64_t late_restores = 0;
  std::uint64_t divergences = 0;
  std::uint64_t device_stall_ns = 0;
  std::uint64_t h2d_bytes_per_s = 0;
  std::uint64_t d2h_bytes_per_s = 0;
  std::uint64_t guided_iterations = 0;
  std::uint64_t fixed_bytes = 0;
  std::uint64_t planned_drops = 0;
  std::uint64_t recomputes = 0;
  std::uint64_t recomputed_bytes = 0;
  std::uint64_t recompute_ns = 0;
  std::uint64_t recompute_failures = 0;
  std::uint64_t timing_skips = 0;
  std::uint64_t timing_source = 0;  // proto::TimingSource
};
inline constexpr int kNumCounters = 28;

// Called by telemetry's own thread with every new plan the daemon publishes (a new generation),
// entries valid only during the call. The callback may allocate; it must not block for long.
using PlanCallback = void (*)(const proto::PlanHeader& header, const proto::PlanEntry* entries,
                              std::uint32_t num_entries);

// Called by telemetry's own thread when the daemon pushes a new budget. Must be cheap and safe to
// call from a non-application thread; the interposer applies the budget without restarting.
using BudgetCallback = void (*)(std::uint64_t budget_bytes);

// Called by telemetry's own thread right after each successful handshake (the first connection,
// and every reconnection to a restarted daemon), before any new event reaches the daemon. Events
// stay closed until the callback calls open_events(): it takes the lock its region_alloc and
// region_free calls are made under, calls open_events(), calls announce_region() for every live
// region, and unlocks. Each region then reaches the daemon exactly once, either announced or by
// its own region_alloc staged after the opening. Telemetry opens events itself when the callback
// does not (or when there is none).
using ConnectCallback = void (*)();

enum class DaemonMode { kOff, kConnect, kSpawn };

// Everything start() needs; the settings come from the library's Config (read once, at cuInit).
struct StartInfo {
  DaemonMode mode = DaemonMode::kConnect;
  const char* runtime_dir = "";    // resolved runtime directory (proto/rendezvous.h)
  const char* daemon_path = "";    // gswapd to spawn; empty: the one installed beside the library
  const char* gpu_uuid = nullptr;  // 16 raw bytes (CUuuid)
  int device_ordinal = 0;
  std::uint64_t device_total_bytes = 0;
  std::uint64_t budget_bytes = 0;
  BudgetCallback on_budget = nullptr;
  ConnectCallback on_connect = nullptr;
  // Set while events flow to a daemon (the interposer then numbers every call globally, which
  // the launch path otherwise skips), cleared when the connection ends.
  std::atomic<bool>* recording = nullptr;
  PlanCallback on_plan = nullptr;
};

// Lifecycle. start() connects to (or, if configured, spawns) the daemon and returns at once when
// there is none: the library then runs in passive mode and reconnects later in the background.
void start(const StartInfo& info);
void stop();
// In a forked child: forgets the parent's connection (not shared) and stages nothing; the child
// becomes a client of its own only if it initialises CUDA (start(), from its own cuInit).
void after_fork_child();
bool connected();

// Events. `seq` is the library's global call sequence number.
void region_alloc(std::uint64_t region_id, std::uint64_t base, std::uint64_t bytes,
                  std::uint64_t seq, std::uint32_t stream);
void region_free(std::uint64_t region_id, std::uint64_t seq);
void launch(std::uint64_t seq, std::uint32_t stream, std::uint64_t function_id,
            const std::uint64_t* region_ids, std::uint32_t num_regions);
// Region id 0: not a region (host memory, arena). link: proto::kCopyLink...
void copy(std::uint64_t seq, std::uint32_t stream, std::uint64_t src_region,
          std::uint64_t dst_region, std::uint64_t bytes, std::uint64_t link);
void eviction(std::uint64_t region_id, std::uint64_t bytes);
void restore(std::uint64_t region_id, std::uint64_t bytes, bool late);
void stall(std::uint64_t seq, std::uint64_t ns, std::uint64_t start_ns = 0,
           std::uint64_t thread = 0);
// A completed swap copy, in device time (timings.h's axis); the pair that puts host times on it.
void swap_done(bool to_device, std::uint64_t region_id, std::uint64_t bytes, std::uint64_t start_ns,
               std::uint64_t end_ns, bool planned);
void clock(std::uint64_t device_ns, std::uint64_t host_ns);
// Recomputation: a region registered as a whole (cost hint ns, 0 when unknown; its sources, at
// most proto::kMaxRecomputeSources), its registration ended, and one recomputation (device ns,
// 0/0 when not timed).
void recomputable(std::uint64_t region_id, std::uint64_t cost_ns, const std::uint64_t* sources,
                  std::uint32_t num_sources);
void not_recomputable(std::uint64_t region_id);
void recomputed(std::uint64_t region_id, std::uint64_t bytes, std::uint64_t start_ns,
                std::uint64_t end_ns, bool failed);
void gpu_timing(std::uint64_t seq, std::uint64_t start_ns, std::uint64_t duration_ns);
void iteration_mark(std::uint64_t seq);
// Names (cut at proto::kMaxNameChunks * 32 bytes). A kernel's name is sent once per connection:
// connection() numbers the connections, so the interposer can tell whether it was.
void kernel_name(std::uint64_t function_id, const char* name);
void region_name(std::uint64_t region_id, const char* name);
std::uint32_t connection();
// Plan execution: how late a planned restore was at its back-access, and where the program
// stopped doing what the plan expected.
void lateness(std::uint64_t generation, std::uint64_t entry, std::uint64_t late_ns, bool missed);
void divergence(std::uint64_t generation, std::uint64_t offset, std::uint64_t expected,
                std::uint64_t got);

// Only from inside the ConnectCallback (telemetry's thread). open_events() lets events flow to the
// daemon from here on. announce_region() writes a region_alloc for a region allocated earlier
// (its original alloc seq) straight into the shared ring, ahead of every staged event; when the
// ring is full (more live regions than it holds and a slow daemon) it waits for room, at most
// 100 ms per connection in all, and then drops and counts.
void open_events();
void announce_region(std::uint64_t region_id, std::uint64_t base, std::uint64_t bytes,
                     std::uint64_t seq, std::uint32_t stream);

// Called after slow-path changes (allocation, eviction, restore) and at least once a second.
void publish_counters(const Counters& counters);

// Events dropped so far: staging rings full, no daemon connected, or no staging ring free.
std::uint64_t dropped_events();

}  // namespace gswap::interpose::telemetry
