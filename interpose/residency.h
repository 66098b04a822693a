// residency.h: the memory manager behind the hooks: regions on VMM under a budget, their states
// (region.h), eviction, restore, stream-ordered frees, out-of-memory.
//
// It is written against the device contract (device.h), so it runs over the real driver in the
// library and over a fake in residency_test.cpp.
//
// Threads and locks:
//   - The launch path (access.h) reads FastState (region map, stream table) and the region atomics
//     and takes no lock. It may make its stream wait for a restore in flight (kRestoring) without
//     a lock: a pinned region's restore event is not re-recorded while the pin is held.
//   - mutex_ owns everything else here: region lists, the VA space, the handle pool, the arena, the
//     in-flight and wanted lists, byte accounting, and every region state change. It is held by
//     application threads on slow paths (allocation, free, restore requests, memory queries), by
//     the swapper thread, and briefly by telemetry's thread (new budget, announcing regions). No
//     thread waits on the device while holding it: host waits happen outside it.
//   - The swapper thread (swapper.cpp) issues every swap-out and restore copy, records events on
//     application streams, waits for copies, unmaps, finishes frees, and enforces the budget after
//     a change. Application threads mark work under mutex_ and push a Command; they wait for the
//     swapper on done_cv_ (releasing mutex_) only when the budget leaves them no choice.
//   - restorer_mutex_ (taken before mutex_) serialises the calls that pin regions and then wait
//     for restores, so two of them never block each other's evictions into a false out-of-memory.
//   - host_ (host_memory.h) has its own mutex; gate_ (capture_gate.h) is taken after mutex_.
#pragma once

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "interpose/capture_gate.h"
#include "interpose/command_queue.h"
#include "interpose/device.h"
#include "interpose/fast_state.h"
#include "interpose/host_memory.h"
#include "interpose/param_scan.h"
#include "interpose/recompute.h"
#include "interpose/region.h"
#include "interpose/va_space.h"
#include "interpose/timings.h"
#include "interpose/victims.h"

namespace gswap::interpose {

struct ResidencySettings {
  std::uint64_t budget = 0;          // bytes of device memory gswap may hold
  std::uint64_t physical_total = 0;  // the device's memory (0: unknown)
  std::uint64_t swap_threshold = 0;  // allocations at least this big are regions; 0: granularity
  std::uint64_t pinned_cap = 16ull << 30;
  std::uint64_t staging_bytes = 64ull << 20;
  bool debug_skip_restore = false;   // test-only fault injection (GSWAP_DEBUG_SKIP_RESTORE)
  bool swapper_thread = true;        // false: tests drive swapper_step() themselves
  bool recompute_keep_copy = false;  // every drop keeps a host copy (GSWAP_RECOMPUTE_KEEP_COPY)
};

struct ResidencyStats {
  std::uint64_t budget = 0, used = 0, resident = 0, evicting = 0, freeing = 0, pooled = 0,
                arena = 0, pinned = 0, peak = 0;
  std::uint64_t swapped_out = 0, swapped_in = 0, evictions = 0, restores = 0;
  std::uint64_t stalls = 0, stall_ns = 0, oom = 0, swap_errors = 0, regions = 0;
  std::uint64_t planned_evictions = 0, prefetches = 0, late_restores = 0, device_stall_ns = 0;
  std::uint64_t h2d_bytes_per_s = 0, d2h_bytes_per_s = 0;
  std::uint64_t planned_drops = 0, recomputes = 0, recomputed_bytes = 0, recompute_ns = 0,
                recompute_failures = 0;
  std::uint64_t fixed = 0;  // what plans cannot move or do not see: the arena, regions that must
                            // stay, and the rounding to the granularity of regions on the device
  std::uint64_t capture_overshoot = 0;  // most bytes held above the budget during a capture
};

class Residency {
 public:
  Residency(Device& device, FastState& fast, VictimPolicy& victims);
  ~Residency();
  Residency(const Residency&) = delete;
  Residency& operator=(const Residency&) = delete;

  void configure(const ResidencySettings& settings);
  // Sets the device up on first need from the calling thread's current context: granularity,
  // one VA reservation for every region, gswap's two streams. False when the thread has no
  // context (try again later) or VMM is unusable (nothing will be swappable).
  bool ensure_device();

  // --- application threads ------------------------------------------------------------------
  // A new region; *handled = false means "not for gswap: forward to the driver" (small, no
  // context, VA exhausted).
  CUresult alloc_region(CUdeviceptr* out, std::uint64_t bytes, CUstream stream, bool async,
                        bool per_thread, bool* handled);
  // Memory the driver hands out (small and pitched allocations): room is made within the budget,
  // then forward() allocates; the bytes it reports count until forget_arena. `stream` is a
  // stream-ordered allocation's: on a capturing stream it is graph memory, forwarded uncounted.
  using ForwardAlloc = CUresult (*)(void* ctx, CUdeviceptr* out, std::uint64_t* bytes);
  CUresult alloc_arena(std::uint64_t estimate, ForwardAlloc forward, void* ctx, CUdeviceptr* out,
                       CUstream stream = nullptr);
  // cuMemFree (async false) and cuMemFreeAsync: a region is freed as the driver would free the
  // allocation (by a capture's rules), then by free_region. *handled = false: not a region, or a
  // call the driver must answer (a free on a capturing stream): the caller forwards it.
  CUresult free_allocation(CUdeviceptr p, CUstream stream, bool async, bool per_thread,
                           bool* handled);
  // Frees a region stream-ordered (true), else forgets an arena allocation (false: the caller
  // forwards the free and, for an arena pointer, the bytes stop counting).
  bool free_region(CUdeviceptr p, CUstream stream, bool async, bool per_thread);
  void forget_arena(CUdeviceptr p);

  // The slow path of an access: makes every region of t resident (restoring, evicting others),
  // has the caller's stream (or, for synchronous calls, the host) wait for the restores, and
  // returns with all of t pinned. The caller marks use, enqueues, then unpins.
  CUresult prepare(TouchSet& t, CUstream stream, bool per_thread, bool sync);
  // Accesses gswap cannot see: the regions of t are restored (the host waits) and never leave
  // again. On failure nothing is marked and the regions may leave as before. for_capture: the
  // accesses are being captured into a graph; the regions stay while the capture is open and then
  // while a graph taken from it lives (take_captured, release_graph), not for good.
  CUresult keep_resident(TouchSet& t, bool for_capture = false);
  // At the end of a capture that made a graph: what the graph replays, held for it until
  // release_graph(ids) (the graph and every instance of it destroyed).
  std::vector<std::uint64_t> take_captured();
  void release_graph(const std::vector<std::uint64_t>& ids);
  // Every live region stays resident from now on (graph launches, untrackable calls).
  CUresult keep_all_resident(const char* why);

  // Names the region containing ptr (gswap_name_allocation); false when ptr is in none.
  bool name_region(std::uint64_t ptr, const char* name);

  // Recomputation (recompute.h, recompute.cpp): gswap.h's registration functions, returning its
  // GSWAP_* codes.
  int register_recompute(std::uint64_t ptr, std::uint64_t bytes, const unsigned long long* sources,
                         int num_sources, double cost_us, gswap_recompute_fn fn, void* ctx);
  int unregister_recompute(std::uint64_t ptr);

  // A stream the application made (cuStreamCreate*); non-blocking ones are remembered, as a
  // synchronous free waits for them.
  void stream_created(CUstream stream, unsigned flags);
  // Before the real destroy. Returns the context the stream was followed in as one of the
  // application's non-blocking streams (nullptr: not one), for stream_destroy_failed.
  CUcontext stream_destroyed(CUstream stream);
  // The real destroy failed: the stream lives on, and frees wait for it again.
  void stream_destroy_failed(CUstream stream, CUcontext tracked);
  void capture_begin();
  void capture_aborted();  // the real cuStreamBeginCapture failed
  void capture_end();
  void set_budget(std::uint64_t bytes);  // evicts down to it (the swapper, asynchronously)
  // Under mutex_: calls first(ctx), then fn for every live region (telemetry opens its events and
  // announces the live regions on a new daemon connection, atomically with allocations and frees).
  void for_each_live(void (*first)(void* ctx), void (*fn)(const Region& r, void* ctx), void* ctx);

  // The budget's view of memory for the calling thread's context; false for another context
  // (the driver answers).
  bool memory_info(std::uint64_t* free, std::uint64_t* total);
  std::uint64_t budget() const { return budget_.load(std::memory_order_relaxed); }
  bool device_ready() const { return device_ready_.load(std::memory_order_acquire); }
  CUcontext context() const { return ctx_; }
  int device_ordinal() const { return device_; }
  ResidencyStats stats();

  // --- swapper -----------------------------------------------------------------------------
  void start_swapper();  // on first need (lazily); idempotent
  void stop_swapper();   // joins it (at exit, before the driver's destructors)
  // One pass of the swapper's work: returns true when it did something. The thread loops on it;
  // tests may call it directly with no thread running.
  bool swapper_step();
  // Waits (test helper): until the swapper has nothing queued or in flight.
  void drain();
  // Test helper: whether commands pushed so far still wait to be handled (the queue is popped
  // and each command handled under the mutex this takes).
  bool commands_pending();

  // --- plan execution (launch path: lock-free, never waits) ----------------------------------
  // A planned swap-out of r (if it is still region `id` and may leave), after the access the
  // caller has just enqueued: begun at once when the residency mutex is free (try-lock) and no
  // command is queued before it, its order point that access; else queued for the swapper. A
  // planned prefetch (if it is out, and fits the budget: a prefetch that does not fit is deferred,
  // never forced; due: its back-access's call number, see issue_prefetch). False when the queue is
  // full, or when the swap-out, begun here, could not begin.
  bool plan_evict(Region* r, std::uint64_t id, std::uint64_t tag);
  // A planned drop of r after the access just enqueued: swapped instead when r is not (or no
  // longer) registered as recomputable in full.
  bool plan_drop(Region* r, std::uint64_t id, std::uint64_t tag);
  bool plan_prefetch(Region* r, std::uint64_t id, std::uint64_t tag, std::uint64_t due);
  // While a plan is followed the swapper polls its queue every 100 us instead of sleeping.
  void set_guided(bool on) { guided_.store(on, std::memory_order_relaxed); }
  // A live region by id (a plan naming persistent regions), or nullptr.
  Region* find_by_id(std::uint64_t id);
  // The wait path of an access (access.h): streams wait on the device for restores in flight
  // (or the host, when host_wait), measuring how late each was (device stall, plan lateness).
  // No lock.
  CUresult wait_restores(const TouchSet& t, CUstream stream, bool per_thread, bool host_wait);
  Timings& timings() { return timings_; }

  // Called on the swapper thread about once a second (telemetry counters), and within
  // kPromptTickNs after the fixed figure (ResidencyStats::fixed) may have risen.
  void set_tick(void (*fn)(void* ctx), void* ctx) {
    tick_ = fn;
    tick_ctx_ = ctx;
  }
  // Timings of measured accesses from another source than events (cupti_timing.h), started and
  // polled by the swapper thread. Set before the first region.
  void set_external_timings(ExternalTimings* source) { external_timings_ = source; }
  std::mutex& mutex() { return mutex_; }

 private:
  // During a capture, whether a stream-ordered call on `stream` (0: the legacy stream, or with
  // per_thread the thread's default stream) is the driver's to answer: a graph node, or refused.
  bool in_capture(CUstream stream, bool per_thread);
  bool relaxed_thread();
  CUresult wait_like_free();
  void forget_app_stream(CUstream stream);  // under mutex_: no longer waited for by frees
  enum class CommandType : std::uint8_t { kEvict, kFree, kPlanEvict, kPlanDrop, kPrefetch };
  struct Command {
    CommandType type;
    Region* region;
    std::uint64_t gen;  // kEvict, kFree: the region's gen when asked; kPrefetch: the call number
    std::uint64_t id;   // kPlanEvict, kPrefetch: the region's id when asked
    std::uint64_t tag;  // kPlanEvict, kPrefetch: the plan entry (plan_executor.h's plan_tag)
    std::uint64_t due = ~0ull;  // kPrefetch: the call number of the back-access (see Prefetch)
    std::uint64_t asked = 0;    // kPrefetch: its number among the prefetches asked for (asks_)
  };
  struct Prefetch {
    Region* region;
    std::uint64_t id, tag, deadline_ns;
    std::uint64_t due;     // the call number its back-access is prepared from: soonest first
    std::uint64_t before;  // calls numbered below this that wait for memory go first
  };
  struct InFlight {
    Region* region;
    std::uint64_t gen;
    bool is_free;
    bool copies = false;  // a swap-out's copy (not a drop's or a free's bare event)
  };
  struct Wanted {
    Region* region;
    std::uint64_t gen;
    std::uint64_t deadline_ns;  // OOM if no room by then (regions pinned only for an instant)
    std::uint64_t seq;          // the call number reached when it was asked for
  };
  // Pushes the regions' context for the scope when the thread has another or none (fact 9).
  class Context {
   public:
    explicit Context(Residency& r) : r_(r) {
      if (r_.ctx_) r_.dev_.push(r_.ctx_, &pushed_);
    }
    ~Context() {
      if (pushed_) r_.dev_.pop();
    }
    Context(const Context&) = delete;
    Context& operator=(const Context&) = delete;

   private:
    Residency& r_;
    bool pushed_ = false;
  };
  // restorer_mutex_ for the scope, except on a thread inside a recomputation callback, which holds
  // it already (the callback's own launches come back here).
  class RestorerLock {
   public:
    explicit RestorerLock(Residency& r) : lock_(r.restorer_mutex_, std::defer_lock) {
      if (!in_recompute()) lock_.lock();
    }

   private:
    std::unique_lock<std::mutex> lock_;
  };
  void wait_for_pins(std::unique_lock<std::mutex>& lock, std::unique_lock<std::mutex>& restorers,
                     std::uint64_t& deadline);
  class WaitScope;  // one host wait: a stall and a timeline interval
  class SlowLock;

  // All under mutex_.
  std::uint64_t used() const { return resident_ + evicting_ + freeing_ + pooled_ + arena_bytes_; }
  void transition(Region* r, std::uint32_t to);
  void note_peak();
  void mark_fixed_rose() { fixed_rose_.store(true, std::memory_order_relaxed); }
  Region* new_region();
  void recycle(Region* r);
  void finish_free(Region* r);
  void order_free(Region* r);
  void unmap_to_pool(Region* r);
  void free_to_pool(Region* r);
  CUresult place_region(Region* r, CUdeviceptr* out, bool async, CUstream stream, bool per_thread);
  bool take_mapped_range(std::uint64_t mapped, std::uint64_t* va, Device::Handle* h);
  bool unmap_range(std::size_t i, Device::Handle* h);
  bool flush_mapped_ranges();
  bool has_pooled(std::uint64_t bytes) const;
  bool take_pooled_handle(std::uint64_t bytes, Device::Handle* h);
  bool release_pooled_handle();
  bool begin_evict(Region* r);
  void push(CommandType type, Region* r);
  void wake_swapper();
  bool may_evict_now() const;
  enum class Room { kReady, kWait, kNone };
  Room make_room(std::uint64_t bytes, bool over_budget_ok, bool takes_pooled = false);
  void send_away(std::uint64_t bytes, VictimPolicy::Evictable accept, bool drop);
  void send_away_in_order(std::uint64_t bytes);
  void yield_access_regions(std::uint64_t bytes);
  CUresult wait_for_room(std::unique_lock<std::mutex>& lock, std::uint64_t bytes);
  void wait_progress(std::unique_lock<std::mutex>& lock, std::uint64_t max_us);
  bool step_locked(std::unique_lock<std::mutex>& lock);
  void complete_evict(Region* r);
  void leave_device(Region* r);
  void undo_map(Region* r);
  CUresult request_restores(std::unique_lock<std::mutex>& lock, TouchSet& t);
  void rescue(Region* r);
  void log_oom(std::uint64_t asked);
  // The bytes of the regions `t` touches (mutex_ held): all must be on the device at once. More
  // than the budget leaves beside gswap's arena, with one of them to bring back and no capture
  // on (which may go over the budget), and the call can never run: it fails at once instead of
  // waiting for room that only its own pins hold.
  std::uint64_t touched_bytes(const TouchSet& t) const;
  bool can_never_fit(const TouchSet& t, std::uint64_t touched) const;
  void count_stall(std::uint64_t ns, std::uint64_t start_ns);  // start: host ns
  void release_held(const std::vector<std::uint64_t>& ids);    // one graph hold each
  // Waiting for memory: whether swap-outs and frees in flight still complete now and then.
  struct Progress {
    explicit Progress(std::uint64_t completed);
    bool check(std::uint64_t completed);  // true: none completed for kNoProgressNs
    std::uint64_t seen, since;
  };
  CUresult stuck_oom();  // sets oom_stuck_ for the caller's log_oom

  // Swapper side (swapper.cpp), mutex_ held unless said.
  bool run_commands(std::unique_lock<std::mutex>& lock);
  static bool planned_eviction(const Command& c);  // kPlanEvict or kPlanDrop
  bool begin_planned(const Command& c);
  void begin_queued_planned();  // any thread
  void issue_evict(std::unique_lock<std::mutex>& lock, Region* r);
  void issue_free(Region* r);
  bool order_after_users(Region* r, Device::Stream s);
  // The same inside a scope that holds the gate; *consumed: the stream marks it took.
  bool order_after_users(const CaptureGate::ForeignStreams& held, Region* r, Device::Stream s,
                         std::uint64_t* consumed);
  void order_evict_now(Region* r);
  bool order_swap_out(Region* r, std::uint64_t* consumed);
  bool complete_in_flight(std::unique_lock<std::mutex>& lock);
  bool serve_wanted(std::unique_lock<std::mutex>& lock);
  CUresult issue_restore(std::unique_lock<std::mutex>& lock, Region* r, Region* donor = nullptr);
  Region* donor_for(std::uint64_t bytes);
  void take_from(Region* donor);
  CUresult obtain_handle(std::unique_lock<std::mutex>& lock, std::uint64_t bytes, bool async,
                         Device::Handle* h, Region** donor);
  bool enforce_budget();
  bool serve_prefetches(std::unique_lock<std::mutex>& lock);
  bool room_without_eviction(std::uint64_t bytes);
  void report_copy(bool to_device, Region* r, std::uint64_t s0, std::uint64_t s1, bool planned);
  void report_host_copy(bool to_device, Region* r, std::uint64_t t0, std::uint64_t t1);
  bool issue_prefetch(std::unique_lock<std::mutex>& lock, Region* r, std::uint64_t tag,
                      std::uint64_t due, std::uint64_t trigger, std::uint64_t asked);
  void prefetched(Region* r, std::uint64_t tag);
  // A restore on demand of r just issued: if r's planned prefetch still waits for memory, this
  // restore is it (see swapper.cpp).
  void adopt_prefetch(Region* r);
  bool memory_owed_before(std::uint64_t due) const;
  void want_prefetch(Region* r, std::uint64_t tag, std::uint64_t due, std::uint64_t trigger);
  void report_back_access(Region* r, bool late_unknown);

  // Recomputation (recompute.cpp), mutex_ held unless said.
  bool begin_drop(Region* r);
  // Brings back the dropped regions of t (pinned by the caller): recomputes them on stream s.
  // Where that finds no room beside t's other regions, those may leave while it runs (they
  // come back after, through request_restores; see yieldable_). Logs nothing: the caller
  // logs an out-of-memory answer.
  CUresult recompute_dropped(std::unique_lock<std::mutex>& lock, TouchSet& t, CUstream s);
  CUresult recompute_each(std::unique_lock<std::mutex>& lock, TouchSet& t, CUstream s);
  // Ends the drops in flight among t's regions (pinned by the caller) before anything is asked
  // for them: called off where the region still holds its bytes, waited for where its memory went
  // to another region, which leaves it dropped for recompute_dropped.
  void settle_drops_in_flight(std::unique_lock<std::mutex>& lock, const TouchSet& t);
  // Recomputes r (kDropped, pinned by the caller) on s: its sources first. restorer_mutex_ held.
  // Logs no out-of-memory answer (its caller does).
  CUresult recompute(std::unique_lock<std::mutex>& lock, Region* r, CUstream s, int depth);
  // Before a registration of r ends: a drop in flight is cancelled or seen to its end, and a
  // dropped r is brought back (recomputed, or left on the host with its copy). restorer_mutex_
  // held; r is pinned for the call.
  CUresult settle_drop(std::unique_lock<std::mutex>& lock, Region* r);
  CUresult settle_pinned(std::unique_lock<std::mutex>& lock, Region* r);
  void end_range(Region* r, std::size_t i);
  void end_registration(Region* r);
  // Ends the registrations that read `source`, which is being freed, bringing back any of them
  // that was dropped.
  void release_dependents(Region* source);
  int chain_below(const Region* from, const Region* target,
                  std::unordered_map<const Region*, int>* memo) const;
  int chain_above(const Region* r, std::unordered_map<const Region*, int>* memo, int depth) const;
  bool complete_recomputes();  // swapper
  static void* swapper_main(void* self);
  void calibrate_link();

  Device& dev_;
  FastState& fast_;
  VictimPolicy& victims_;
  HostMemory host_;
  CaptureGate gate_;
  ResidencySettings cfg_;
  std::atomic<std::uint64_t> budget_{0};
  // The budget is gswapd's share, below the process's own (set_budget): out-of-memory lines say so.
  std::atomic<bool> budget_is_share_{false};

  std::mutex mutex_;
  std::mutex restorer_mutex_;
  std::condition_variable done_cv_;  // the swapper made progress

  // Device (set by ensure_device).
  std::atomic<bool> device_ready_{false};
  bool device_failed_ = false;
  CUcontext ctx_ = nullptr;
  int device_ = 0;
  std::uint64_t granularity_ = 0, threshold_ = 0, va_base_ = 0, va_span_ = 0;
  Device::Stream evict_stream_ = nullptr, restore_stream_ = nullptr;
  // Order points taken by application threads (stream-ordered frees, planned swap-outs): waits
  // on the application's streams and event records only, never behind a copy.
  Device::Stream order_stream_ = nullptr;
  VaSpace va_;

  // Regions.
  std::vector<Region*> live_;
  Region* recycled_ = nullptr;
  std::uint64_t next_id_ = 1;
  bool untrackable_seen_ = false;
  std::vector<std::pair<Device::Handle, std::uint64_t>> handle_pool_;
  // The memory of freed regions, still mapped at their address range (mapped bytes and the guard
  // granule after them): the next allocation of the same mapped size takes range and memory as
  // they are, with no driver call. Counted in pooled_ with handle_pool_, and given back after it
  // (unmapped first).
  struct MappedRange {
    std::uint64_t va, mapped;
    Device::Handle handle;
  };
  std::vector<MappedRange> mapped_pool_;
  std::unordered_map<CUdeviceptr, std::uint64_t> arena_;

  // Work between application threads and the swapper.
  CommandQueue<Command, 4096> queue_;
  std::vector<Command> overflow_;         // pushes the full queue refused (mutex_ held)
  std::vector<InFlight> evict_flight_;    // D2H copies and frees, in evict-stream order
  std::vector<InFlight> restore_flight_;  // H2D copies, in restore-stream order
  std::vector<Wanted> wanted_;            // restores asked for, waiting for room
  std::vector<Region*> deferred_frees_;   // freed during a capture
  struct AppStream {
    CUstream stream;
    CUcontext ctx;
  };
  std::vector<AppStream> nonblocking_;       // the application's non-blocking streams
  std::vector<Prefetch> prefetches_wanted_;  // planned prefetches waiting for room, by due
  // Call numbers at which allocations wait for memory now (one per waiting call).
  std::vector<std::uint64_t> allocations_waiting_;

  // Bytes of device memory gswap holds or has handed out (see used()).
  std::uint64_t resident_ = 0, evicting_ = 0, freeing_ = 0, pooled_ = 0, arena_bytes_ = 0;
  std::uint64_t peak_ = 0;
  std::uint64_t swapped_out_ = 0, swapped_in_ = 0, evictions_ = 0, restores_ = 0;
  std::uint64_t stalls_ = 0, stall_ns_ = 0, oom_ = 0, swap_errors_ = 0, capture_overshoot_ = 0;
  // Regions held by the captures open now (ids), and which capture period is open (+1 marks it).
  std::vector<std::uint64_t> captured_;
  std::uint64_t capture_period_ = 0;
  std::uint64_t completed_ = 0;  // swap-outs and frees seen complete (Progress)
  bool oom_stuck_ = false;       // the out-of-memory being logged came from a wait with no progress
  std::uint64_t planned_evictions_ = 0, prefetches_ = 0;
  // Prefetches asked for so far (numbers them, lock-free); a region's swap-out notes the count
  // when it begins (Region::evict_asks), so a prefetch asked for before it cancels nothing.
  std::atomic<std::uint64_t> asks_{0};
  std::atomic<std::uint64_t> late_restores_{0}, device_stall_ns_{0};

  Timings timings_;
  std::atomic<bool> guided_{false};

  // Recomputation.
  TrustedCallbacks trusted_;
  std::vector<InFlight> recompute_flight_;  // recomputed regions until their event completes
  std::uint64_t planned_drops_ = 0, recomputes_ = 0, recomputed_bytes_ = 0, recompute_failures_ = 0;
  std::atomic<std::uint64_t> recompute_ns_{0};

  // The swapper thread.
  pthread_t swapper_{};
  bool swapper_running_ = false;
  bool stopping_ = false;
  std::mutex wake_mutex_;
  std::condition_variable wake_cv_;
  bool wake_pending_ = false;
  std::vector<Device::Event> slot_events_;  // one per stream slot, recorded by the swapper only
  Device::Event legacy_event_ = nullptr;
  std::uint64_t last_tick_ns_ = 0;
  // While recompute_dropped recomputes for an access, the access's other regions (pinned by it):
  // they may leave for the recomputation's memory once nothing else can (make_room), and those
  // that did (yielded_, unpinned meanwhile) come back before the access runs. mutex_.
  const TouchSet* yieldable_ = nullptr;
  std::vector<Region*> yielded_;
  // The fixed figure may have risen since the last tick (mark_fixed_rose): gswapd plans the
  // budget less that figure, and a plan it made without it (before the next one-second tick)
  // fills the budget with regions and leaves the arena no room. The swapper ticks early.
  std::atomic<bool> fixed_rose_{false};
  static constexpr std::uint64_t kPromptTickNs = 10'000'000;
  std::uint64_t steps_ = 0;             // swapper passes (mutex_)
  std::uint64_t last_counters_ns_ = 0;  // the timeline's last memory sample (swapper)
  void (*tick_)(void* ctx) = nullptr;
  void* tick_ctx_ = nullptr;
  ExternalTimings* external_timings_ = nullptr;
  friend struct ResidencyTestPeer;
};

}  // namespace gswap::interpose
