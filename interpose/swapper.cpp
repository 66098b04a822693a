// swapper.cpp: the swapper thread's side of residency (see residency.h for the lock rules).
//
// The swapper issues every swap-out and restore, records the events that order them after the
// application's streams, waits for copies, unmaps, finishes stream-ordered frees and evicts down
// to a new budget. It runs in relaxed capture mode, and while any stream captures it only serves
// restores a captured call needs and completes the copies already in flight, all on gswap's own
// streams: it records nothing on application streams, starts no swap-out and frees nothing until
// the capture ends (fact 8).
//
// Every driver call it makes is checked. A swap-out that cannot be enqueued, or whose memory
// cannot be unmapped, is rolled back: the region stays mapped with its bytes, becomes
// must-stay and the failure is counted. A restore that cannot be mapped or copied leaves the
// region on the host and the error goes to the call that needed it. An event query that fails
// means the completion of a copy can no longer be known: the process stops with file and line
// rather than risk using memory a copy may still be writing.
#include <time.h>

#include <algorithm>
#include <chrono>

#include "interpose/check.h"
#include "interpose/clock.h"
#include "interpose/log.h"
#include "interpose/plan_executor.h"
#include "interpose/residency.h"
#include "interpose/telemetry.h"
#include "interpose/timeline.h"

namespace gswap::interpose {
namespace {

// Where access timings go: to gswapd and to the timeline. An external source (CUPTI) gives
// these only.
struct KernelSink : Timings::Sink {
  void kernel(std::uint64_t seq, std::uint32_t stream, const char* name, std::uint64_t start_ns,
              std::uint64_t dur_ns) override {
    telemetry::gpu_timing(seq, start_ns, dur_ns);
    timeline::kernel(seq, stream, name, start_ns, dur_ns);
  }
  void waited(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t) override {}
  void recomputed(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, bool) override {}
};

}  // namespace

void Residency::start_swapper() {
  if (swapper_running_ || stopping_) return;
  swapper_running_ = pthread_create(&swapper_, nullptr, swapper_main, this) == 0;
  if (!swapper_running_)
    GSWAP_LOG(kWarn, "cannot start the swapper thread: swaps run on the threads that need them");
}

void Residency::stop_swapper() {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    if (!swapper_running_) return;
    stopping_ = true;
  }
  wake_cv_.notify_all();
  pthread_join(swapper_, nullptr);
  swapper_running_ = false;
}

// Times one copy each way of kCalibrationBytes on gswap's own streams, so the link's bandwidth is
// known (and gswapd plans with it) before the first swap. Off the application's threads; the
// device memory is gswap's for a moment and given back, never counted against the budget. The
// pinned buffer comes from the pinned pool and goes back there: cuMemFreeHost would wait for the
// application's first kernels and hold up its driver calls meanwhile.
void Residency::calibrate_link() {
  constexpr std::uint64_t kCalibrationBytes = 8ull << 20;
  std::uint64_t bytes = (kCalibrationBytes + granularity_ - 1) / granularity_ * granularity_;
  // Pinned memory only (a pageable buffer would time the staging ring, not the link): a smaller
  // buffer under a small GSWAP_PINNED_CAP, none under one below the granularity.
  if (bytes > cfg_.pinned_cap) bytes = cfg_.pinned_cap / granularity_ * granularity_;
  if (bytes == 0) {
    GSWAP_LOG(kInfo,
              "GSWAP_PINNED_CAP leaves no pinned buffer to calibrate the link with; gswapd plans "
              "with the bandwidth of the first swap copies");
    return;
  }
  std::uint64_t va = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    va = va_.alloc(bytes);
  }
  if (!va) return;
  Device::Handle h = 0;
  HostBuffer buf;
  Device::Event e[3] = {};
  bool ok = dev_.create(bytes, &h) == CUDA_SUCCESS;
  bool mapped = ok && dev_.map(va, bytes, h) == CUDA_SUCCESS;
  // Pageable memory (a pinned cap below the buffer) would time the staging ring, not the link.
  ok = mapped && host_.acquire(bytes, monotonic_ns(), &buf) && buf.pinned;
  void* host = buf.ptr;
  for (auto& ev : e) ok = ok && dev_.event_create(&ev, true) == CUDA_SUCCESS;
  bool enqueued = false;  // a copy may be in flight on the buffers from here on
  ok = ok && dev_.record(e[0], evict_stream_) == CUDA_SUCCESS &&
       (enqueued = dev_.copy_h2d(va, host, bytes, evict_stream_) == CUDA_SUCCESS) &&
       dev_.record(e[1], evict_stream_) == CUDA_SUCCESS &&
       dev_.copy_d2h(host, va, bytes, evict_stream_) == CUDA_SUCCESS &&
       dev_.record(e[2], evict_stream_) == CUDA_SUCCESS && dev_.synchronize(e[2]) == CUDA_SUCCESS;
  if (ok) {
    std::uint64_t a = 0, b = 0;
    timings_.copy_done(true, bytes, e[0], e[1], &a, &b);
    timings_.copy_done(false, bytes, e[1], e[2], &a, &b);
  } else {
    GSWAP_LOG(kWarn,
              "the link could not be calibrated; gswapd plans with the bandwidth of the "
              "first swap copies");
    // A copy enqueued before the failure may still run: the buffers stay until it has. If even
    // that cannot be known, they are never given back (a small leak, never a copy into freed
    // memory).
    if (enqueued && dev_.synchronize_context() != CUDA_SUCCESS) return;
  }
  for (auto& ev : e)
    if (ev) dev_.event_destroy(ev);
  host_.release(&buf, monotonic_ns());
  // A range still mapped is never handed out again (a later map there would fail).
  if (mapped && dev_.unmap(va, bytes) != CUDA_SUCCESS) return;
  if (h) dev_.release(h);
  std::lock_guard<std::mutex> lock(mutex_);
  va_.release(va, bytes);
}

void* Residency::swapper_main(void* arg) {
  auto* self = static_cast<Residency*>(arg);
  unsigned mode = 0;
  self->dev_.relax_capture_mode(&mode);  // gswap's own work never joins a capture
  bool pushed = false;
  // Nothing the swapper does works without the context: try again (backing off to a second)
  // until it can be made current. Meanwhile work waits, as it does for a busy swapper.
  for (std::uint64_t wait_ms = 10; self->dev_.push(self->ctx_, &pushed) != CUDA_SUCCESS;
       wait_ms = std::min<std::uint64_t>(wait_ms * 2, 1000)) {
    std::unique_lock<std::mutex> wl(self->wake_mutex_);
    if (self->wake_cv_.wait_for(wl, std::chrono::milliseconds(wait_ms),
                                [&] { return self->stopping_; })) {
      self->dev_.restore_capture_mode(mode);
      return nullptr;
    }
  }
  if (self->external_timings_) self->external_timings_->start();
  self->calibrate_link();
  std::uint64_t backoff_us = 20;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(self->wake_mutex_);
      if (self->stopping_) break;
    }
    bool did = self->swapper_step();
    // Outside the residency mutex: CUPTI's flush may take a while.
    if (self->external_timings_) {
      KernelSink sink;
      did = self->external_timings_->poll(self->timings_, sink) || did;
    }
    std::uint64_t now = monotonic_ns();
    const bool second = now - self->last_tick_ns_ >= 1'000'000'000ull;
    if (second || (now - self->last_tick_ns_ >= kPromptTickNs &&
                   self->fixed_rose_.load(std::memory_order_relaxed))) {
      self->last_tick_ns_ = now;
      self->fixed_rose_.store(false, std::memory_order_relaxed);
      if (second) self->host_.trim_idle(now);
      if (self->tick_) self->tick_(self->tick_ctx_);
    }
    if (did) {
      backoff_us = 20;
      continue;
    }
    bool busy;
    {
      std::lock_guard<std::mutex> lock(self->mutex_);
      busy = !self->evict_flight_.empty() || !self->restore_flight_.empty() ||
             !self->wanted_.empty() || !self->deferred_frees_.empty() ||
             !self->prefetches_wanted_.empty();
    }
    // Copies in flight are polled (backing off to 1 ms); otherwise sleep until woken.
    std::unique_lock<std::mutex> wl(self->wake_mutex_);
    self->wake_cv_.wait_for(wl, std::chrono::microseconds(busy ? backoff_us : 20000),
                            [&] { return self->wake_pending_ || self->stopping_; });
    self->wake_pending_ = false;
    if (busy) backoff_us = std::min<std::uint64_t>(backoff_us * 2, 1000);
  }
  if (pushed) self->dev_.pop();
  self->dev_.restore_capture_mode(mode);
  return nullptr;
}

// A completed swap copy, in device time: to the timeline and to gswapd.
void Residency::report_copy(bool to_device, Region* r, std::uint64_t s0, std::uint64_t s1,
                            bool planned) {
  timeline::copy(to_device, r->id, r->name, r->size, s0, s1, planned);
  telemetry::swap_done(to_device, r->id, r->size, s0, s1, planned);
}

// A staged copy (pageable memory, timed on the host), put on the device axis.
void Residency::report_host_copy(bool to_device, Region* r, std::uint64_t t0, std::uint64_t t1) {
  std::uint64_t s0 = timings_.host_to_device(t0), s1 = timings_.host_to_device(t1);
  if (s0 && s1) report_copy(to_device, r, s0, s1, false);
}

bool Residency::swapper_step() {
  std::unique_lock<std::mutex> lock(mutex_);
  return step_locked(lock);
}

bool Residency::step_locked(std::unique_lock<std::mutex>& lock) {
  if (!device_ready()) return false;
  ++steps_;
  bool did = false;
  run_commands(lock);
  if (gate_.capturing()) {
    // Copies already in flight complete on gswap's own streams (this thread is in relaxed capture
    // mode): a restore a captured call needs may be waiting for one of them.
    did = complete_in_flight(lock);
    did = complete_recomputes() || did;
    did = serve_wanted(lock) || did;
  } else {
    did = complete_in_flight(lock);
    did = complete_recomputes() || did;
    if (!deferred_frees_.empty()) {
      std::vector<Region*> frees;
      frees.swap(deferred_frees_);
      for (Region* r : frees) issue_free(r);
      did = true;
    }
    did = serve_wanted(lock) || did;
    did = serve_prefetches(lock) || did;
    did = enforce_budget() || did;
  }
  {
    // Measurements (timings.h): to gswapd, to the timeline, and into residency's counters.
    struct Sink final : KernelSink {
      Residency* self;
      void waited(std::uint64_t tag, std::uint64_t region, std::uint64_t late_ns,
                  std::uint64_t end_ns) override {
        self->device_stall_ns_.fetch_add(late_ns, std::memory_order_relaxed);
        if (late_ns) self->late_restores_.fetch_add(tag ? 1 : 0, std::memory_order_relaxed);
        if (tag)
          telemetry::lateness((tag >> 32) & 0x3fffffffull, plan_tag::entry(tag), late_ns, false);
        timeline::stream_waited(region, late_ns, end_ns);
      }
      void recomputed(std::uint64_t region, std::uint64_t bytes, std::uint64_t start_ns,
                      std::uint64_t end_ns, bool failed) override {
        self->recompute_ns_.fetch_add(end_ns - start_ns, std::memory_order_relaxed);
        telemetry::recomputed(region, bytes, start_ns, end_ns, failed);
        timeline::recompute(region, nullptr, bytes, start_ns, end_ns, failed);
      }
    } sink;
    sink.self = this;
    did = timings_.collect(sink, evict_stream_) || did;
    if (timeline::enabled()) {
      std::uint64_t now = monotonic_ns();
      if (now - last_counters_ns_ >= 1'000'000) {  // a memory sample every millisecond at most
        last_counters_ns_ = now;
        timeline::counters(now, used(), budget(), host_.pinned_bytes());
      }
    }
  }
  did = run_commands(lock) || did;
  done_cv_.notify_all();
  return did;
}

bool Residency::commands_pending() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !queue_.empty() || !overflow_.empty();
}

void Residency::drain() {
  std::unique_lock<std::mutex> lock(mutex_);
  // At least two passes of the swapper after this call (the first may have begun before it).
  std::uint64_t until = steps_ + 2;
  for (;;) {
    if (!swapper_running_) {
      step_locked(lock);
    } else {
      lock.unlock();
      wake_swapper();
      lock.lock();
    }
    if (steps_ >= until && evict_flight_.empty() && restore_flight_.empty() && wanted_.empty() &&
        queue_.empty() && overflow_.empty() && (deferred_frees_.empty() || gate_.capturing()))
      return;
    if (swapper_running_) done_cv_.wait_for(lock, std::chrono::milliseconds(1));
  }
}

// A planned swap-out or drop (kPlanEvict, kPlanDrop): begins it unless the region moved on or
// may not leave now. Any thread that holds mutex_: begin_evict only changes state and queues.
bool Residency::begin_planned(const Command& c) {
  Region* r = c.region;
  if (!r || r->id != c.id) return false;  // freed and recycled since the plan named it
  if (!may_evict_now() || !may_leave(r, nullptr)) return false;
  // A drop needs a registration that covers the region; without one (never registered, or
  // unregistered since the plan was made) the region is swapped instead.
  if (c.type == CommandType::kPlanDrop && r->recompute && r->recompute->covers(r->size))
    return begin_drop(r);
  if (!begin_evict(r)) return false;
  r->plan_tag.store(c.tag | plan_tag::kEvicted, std::memory_order_relaxed);
  ++planned_evictions_;
  return true;
}

bool Residency::planned_eviction(const Command& c) {
  return c.type == CommandType::kPlanEvict || c.type == CommandType::kPlanDrop;
}

// Application threads, before they choose victims of their own (make_room): planned swap-outs and
// drops still in the command queue begin now, so an allocation counts the memory the plan is about
// to give back instead of evicting regions the plan keeps. Every other command is left to the
// swapper, in its order.
void Residency::begin_queued_planned() {
  if (queue_.empty() && overflow_.empty()) return;
  std::vector<Command> rest;
  Command c;
  while (queue_.pop(&c)) {
    if (planned_eviction(c))
      begin_planned(c);
    else
      rest.push_back(c);
  }
  for (const Command& m : overflow_) {
    if (planned_eviction(m))
      begin_planned(m);
    else
      rest.push_back(m);
  }
  // begin_evict queued its own commands meanwhile; those follow the ones taken out here. All go
  // back into the queue, in order: the swapper takes the queue before the overflow, which must
  // stay what was pushed after the queue filled (else the queue's newer commands go first).
  overflow_.clear();
  while (queue_.pop(&c)) rest.push_back(c);
  for (const Command& m : rest)
    if (!queue_.push(m)) overflow_.push_back(m);
}

bool Residency::run_commands(std::unique_lock<std::mutex>& lock) {
  bool did = false;
  auto handle = [&](const Command& c) {
    Region* r = c.region;
    if (!r) return;
    if (planned_eviction(c)) {
      did = begin_planned(c) || did;
      return;
    }
    if (c.type == CommandType::kPrefetch) {
      if (r->id == c.id) did = issue_prefetch(lock, r, c.tag, c.due, c.gen, c.asked) || did;
      return;
    }
    if (r->gen != c.gen) return;  // stale: the region moved on since
    std::uint32_t st = r->state.load();
    if (c.type == CommandType::kEvict && st == kRegionEvicting && !r->evict_issued) {
      issue_evict(lock, r);
      did = true;
    } else if (c.type == CommandType::kFree && st == kRegionFree && !r->free_issued) {
      if (gate_.capturing())
        deferred_frees_.push_back(r);
      else
        issue_free(r);
      did = true;
    }
  };
  Command c;
  while (queue_.pop(&c)) handle(c);
  while (!overflow_.empty()) {
    std::vector<Command> more;
    more.swap(overflow_);
    for (const Command& m : more) handle(m);
  }
  return did;
}

// Makes stream s wait for every application stream that used r since its last swap-out, and for
// r's last restore. False (nothing ordered, r's stream marks kept) while a capture is on or when a
// record fails.
bool Residency::order_after_users(Region* r, Device::Stream s) {
  CaptureGate::ForeignStreams foreign(gate_);
  return foreign.ok() && order_after_users(foreign, r, s, nullptr);
}

bool Residency::order_after_users(const CaptureGate::ForeignStreams&, Region* r, Device::Stream s,
                                  std::uint64_t* consumed) {
  std::uint64_t mask = r->streams.exchange(0);
  bool ok = true;
  if (mask & StreamTable::kUnknownBit) {
    GSWAP_LOG_ONCE(kWarn,
                   "more streams are live than gswap tracks: swap-outs of regions they used wait "
                   "for the whole device");
    ok = dev_.synchronize_context() == CUDA_SUCCESS;
  }
  if (ok && (mask & StreamTable::kPerThreadBit)) {
    // A per-thread default stream can only be named by its own thread; the legacy stream follows
    // every blocking stream, per-thread ones included.
    if (!legacy_event_) ok = dev_.event_create(&legacy_event_, false) == CUDA_SUCCESS;
    ok = ok && dev_.record(legacy_event_, legacy_stream()) == CUDA_SUCCESS &&
         dev_.wait(s, legacy_event_) == CUDA_SUCCESS;
  }
  for (unsigned b = 0; ok && b < StreamTable::kBuckets; ++b) {
    if (!(mask & (1ull << b))) continue;
    for (unsigned slot = b; ok && slot < StreamTable::kSlots; slot += StreamTable::kBuckets) {
      std::uintptr_t stream = 0;
      if (!fast_.streams.stream_of(slot, &stream)) continue;
      Device::Event& ev = slot_events_[slot];
      if (!ev && dev_.event_create(&ev, false) != CUDA_SUCCESS) {
        ok = false;
        break;
      }
      // The event is re-recorded by later orderings; a wait takes its state now.
      ok = dev_.record(ev, reinterpret_cast<CUstream>(stream)) == CUDA_SUCCESS &&
           dev_.wait(s, ev) == CUDA_SUCCESS;
    }
  }
  if (ok && r->restore_event) ok = dev_.wait(s, r->restore_event) == CUDA_SUCCESS;
  if (!ok) r->streams.fetch_or(mask);
  if (consumed) *consumed = ok ? mask : 0;
  return ok;
}

// The evict stream waits for r's users (those since its order point, when one was taken at its
// planned access, and that point).
bool Residency::order_swap_out(Region* r, std::uint64_t* consumed) {
  CaptureGate::ForeignStreams foreign(gate_);
  if (!foreign.ok() || !order_after_users(foreign, r, evict_stream_, consumed)) return false;
  if (r->used_pending && dev_.wait(evict_stream_, r->used_event) != CUDA_SUCCESS) {
    r->streams.fetch_or(*consumed);
    *consumed = 0;
    return false;
  }
  return true;
}

void Residency::issue_evict(std::unique_lock<std::mutex>& lock, Region* r) {
  if (!may_evict_now()) {
    rescue(r);  // a capture began after it was chosen
    return;
  }
  if (!r->handle) {  // never mapped (GSWAP_DEBUG_SKIP_RESTORE): nothing to copy
    evicting_ -= r->mapped;
    leave_device(r);
    return;
  }
  std::uint64_t consumed = 0;  // the stream marks its ordering took (back if it gives up)
  auto give_up = [&](const char* what) {
    ++swap_errors_;
    r->streams.fetch_or(consumed);  // later orderings (its free) wait for those users again
    rescue(r);
    r->must_stay = true;
    mark_fixed_rose();
    GSWAP_LOG(kError, "region %llu stays resident: %s", (unsigned long long)r->id, what);
  };
  if (r->dropping && !r->drop_copy) {
    // A drop: no copy, only the point after which the memory may go (every user has passed).
    if (!order_swap_out(r, &consumed)) {
      if (gate_.capturing()) {
        rescue(r);
        return;
      }
      return give_up("its drop could not be ordered after the streams that used it");
    }
    if ((!r->evict_event && dev_.event_create(&r->evict_event, true) != CUDA_SUCCESS) ||
        dev_.record(r->evict_event, evict_stream_) != CUDA_SUCCESS)
      return give_up("no event for its drop");
    r->evict_issued = true;
    ++r->d2h_in_flight;
    evict_flight_.push_back({r, r->gen, false});
    return;
  }
  if (!r->host.ptr) {
    // Pinning host memory can take milliseconds: not under the mutex. swapper_busy keeps the
    // region where it is meanwhile (a free is finished below).
    r->swapper_busy = true;
    lock.unlock();
    HostBuffer hb;
    bool ok = host_.acquire(r->mapped, monotonic_ns(), &hb);
    lock.lock();
    r->swapper_busy = false;
    if (ok) r->host = hb;
    if (r->state.load() == kRegionFree && r->free_requested) {
      r->free_requested = false;
      evicting_ -= r->mapped;
      freeing_ += r->mapped;
      issue_free(r);
      return;
    }
    if (!ok) return give_up("no host memory for its swap-out");
  }
  if (!order_swap_out(r, &consumed)) {
    if (gate_.capturing()) {
      rescue(r);
      return;
    }
    return give_up("its swap-out could not be ordered after the streams that used it");
  }
  if ((!r->evict_event && dev_.event_create(&r->evict_event, true) != CUDA_SUCCESS) ||
      (!r->evict_start && dev_.event_create(&r->evict_start, true) != CUDA_SUCCESS))
    return give_up("no event for its swap-out");
  if (r->host.pinned) {
    // The start event goes after the waits for the users: it marks the copy's own start.
    if (dev_.record(r->evict_start, evict_stream_) != CUDA_SUCCESS ||
        dev_.copy_d2h(r->host.ptr, r->base, r->size, evict_stream_) != CUDA_SUCCESS)
      return give_up("its swap-out copy could not be enqueued");
    if (dev_.record(r->evict_event, evict_stream_) != CUDA_SUCCESS) {
      // The copy may be in flight with no way to see it end: its host buffer stays attached to
      // r (nothing else reuses it) and r stays where it is.
      ++r->d2h_in_flight;  // never seen complete: the buffer is never released early
      return give_up("its swap-out's completion event could not be recorded");
    }
    r->evict_issued = true;
    ++r->d2h_in_flight;
    evict_flight_.push_back({r, r->gen, false, true});
    swapped_out_ += r->size;
    telemetry::eviction(r->id, r->size);
    return;
  }
  // Pageable host memory, through the staging ring: the swapper waits with the mutex released.
  r->evict_issued = true;
  r->swapper_busy = true;
  lock.unlock();
  std::uint64_t t0 = monotonic_ns();
  CUresult e = host_.staged_d2h(r->host.ptr, r->base, r->size, evict_stream_);
  std::uint64_t t1 = monotonic_ns();
  timings_.copy_done_ns(false, r->size, t1 - t0);
  report_host_copy(false, r, t0, t1);
  lock.lock();
  r->swapper_busy = false;
  if (r->state.load() == kRegionFree && r->free_requested) {
    r->free_requested = false;
    evicting_ -= r->mapped;
    freeing_ += r->mapped;
    issue_free(r);
    return;
  }
  if (e != CUDA_SUCCESS) return give_up("its staged swap-out copy failed");
  swapped_out_ += r->size;
  telemetry::eviction(r->id, r->size);
  complete_evict(r);  // the host waited for the copy
}

// The swap-out's copy has completed: the physical memory goes back to the pool (or stays with the
// region it was handed to, see take_in_flight_handle).
void Residency::complete_evict(Region* r) {
  if (r->handle_given) {
    unmap_to_pool(r);  // drops the mapping only; the bytes were accounted to the new owner
    r->restore_pending = false;
    leave_device(r);
    return;
  }
  if (dev_.unmap(r->base, r->mapped) != CUDA_SUCCESS) {
    // Still mapped with its bytes (the unmap left it as it was): keep it there for good.
    ++swap_errors_;
    rescue(r);
    r->must_stay = true;
    mark_fixed_rose();
    GSWAP_LOG(kError, "region %llu stays resident: its memory could not be unmapped",
              (unsigned long long)r->id);
    return;
  }
  handle_pool_.emplace_back(r->handle, r->mapped);
  pooled_ += r->mapped;
  r->handle = 0;
  r->restore_pending = false;  // the swap-out was ordered after it, and has completed
  evicting_ -= r->mapped;
  leave_device(r);
}

// The end of a swap-out (kHost) or of a drop (kDropped, with or without a host copy).
void Residency::leave_device(Region* r) {
  if (!r->dropping) {
    transition(r, kRegionHost);
    return;
  }
  r->dropping = false;
  r->host_valid = r->drop_copy;
  transition(r, kRegionDropped);
}

// A stream-ordered free: the memory goes back once every stream that used the region (and the
// freeing stream) has passed this point (order_stream_ waits for them). During a capture it waits
// for the capture's end. Application threads call it at the free (order_free), the swapper for
// a free it was handed.
void Residency::issue_free(Region* r) {
  r->free_issued = true;
  if (!r->handle) {
    freeing_ -= r->mapped;
    finish_free(r);
    return;
  }
  // A copy of its own not seen complete (a swap-out or drop, a restore) may still touch it: the
  // free then goes on the evict stream, behind that swap-out (FIFO), waiting for the restore. On
  // the order stream such a wait would hold back every order point after it. Otherwise it goes on
  // the order stream, which then waits for the application's streams only (and an order point
  // taken for the region's planned swap-out is earlier on it).
  const bool copies = r->d2h_in_flight > 0 || r->restore_pending;
  const Device::Stream s = copies ? evict_stream_ : order_stream_;
  if (!order_after_users(r, s) ||
      (copies && r->used_pending && dev_.wait(s, r->used_event) != CUDA_SUCCESS)) {
    if (gate_.capturing()) {
      r->free_issued = false;
      deferred_frees_.push_back(r);
      return;
    }
    // The streams cannot be named: wait for the whole device, then the memory is free.
    if (dev_.synchronize_context() != CUDA_SUCCESS)
      GSWAP_CHECK(!"a freed region's users can be neither ordered nor waited for");
    freeing_ -= r->mapped;
    free_to_pool(r);
    return;
  }
  // Created with timing: the region object is recycled, and the next region's swap-outs are timed
  // with this event.
  if ((!r->evict_event && dev_.event_create(&r->evict_event, true) != CUDA_SUCCESS) ||
      dev_.record(r->evict_event, s) != CUDA_SUCCESS) {
    if (dev_.synchronize_context() != CUDA_SUCCESS)
      GSWAP_CHECK(!"a freed region's users can be neither ordered nor waited for");
    freeing_ -= r->mapped;
    free_to_pool(r);
    return;
  }
  evict_flight_.push_back({r, r->gen, true});
}

bool Residency::complete_in_flight(std::unique_lock<std::mutex>&) {
  bool did = false;
  std::size_t kept = 0;
  // Swap-outs complete in evict-stream order and frees in order-stream order; the two interleave.
  for (std::size_t i = 0; i < evict_flight_.size(); ++i) {
    InFlight f = evict_flight_[i];
    Region* r = f.region;
    CUresult q = dev_.query(r->evict_event);
    if (q == CUDA_ERROR_NOT_READY) {
      evict_flight_[kept++] = f;
      continue;
    }
    if (q != CUDA_SUCCESS) GSWAP_CHECK(!"a swap-out's or free's completion cannot be known");
    did = true;
    ++completed_;
    if (f.is_free) {
      if (!r->handle_given) freeing_ -= r->mapped;  // else accounted to the new owner already
      free_to_pool(r);
      continue;
    }
    --r->d2h_in_flight;
    std::uint32_t st = r->state.load();
    // The copy ran even when the region was touched again or freed meanwhile (it counts in
    // swapped_out): report it too, while its events are still its own (the last in flight).
    auto report = [&] {
      std::uint64_t s0 = 0, s1 = 0;
      if (f.copies && timings_.copy_done(false, r->size, r->evict_start, r->evict_event, &s0, &s1))
        report_copy(false, r, s0, s1,
                    (r->plan_tag.load(std::memory_order_relaxed) & plan_tag::kEvicted) != 0);
    };
    if (st == kRegionEvicting && r->gen == f.gen) {
      report();
      complete_evict(r);
    } else if (st == kRegionFree && r->free_requested && r->d2h_in_flight == 0) {
      // Freed while its last swap-out was in flight.
      report();
      r->free_requested = false;
      if (!r->handle_given) evicting_ -= r->mapped;
      free_to_pool(r);
    } else if (st == kRegionResident && r->d2h_in_flight == 0) {
      report();
      host_.release(&r->host, monotonic_ns());  // rescued: its copy has landed, the buffer is free
    }
  }
  evict_flight_.resize(kept);
  // Restores complete in restore-stream order.
  std::size_t done = 0;
  for (; done < restore_flight_.size(); ++done) {
    InFlight f = restore_flight_[done];
    Region* r = f.region;
    CUresult q = dev_.query(r->restore_event);
    if (q == CUDA_ERROR_NOT_READY) break;
    if (q != CUDA_SUCCESS) GSWAP_CHECK(!"a restore's completion cannot be known");
    did = true;
    if (f.gen != r->restores_issued || !r->restore_pending) continue;  // an older life's restore
    std::uint64_t s0 = 0, s1 = 0;
    if (r->restore_start &&
        timings_.copy_done(true, r->size, r->restore_start, r->restore_event, &s0, &s1))
      report_copy(true, r, s0, s1,
                  (r->plan_tag.load(std::memory_order_relaxed) & plan_tag::kPrefetched) != 0);
    r->restore_pending = false;
    if (r->state.load() == kRegionRestoring) transition(r, kRegionResident);
    if (r->state.load() == kRegionResident && r->d2h_in_flight == 0)
      host_.release(&r->host, monotonic_ns());
  }
  if (done) restore_flight_.erase(restore_flight_.begin(), restore_flight_.begin() + done);
  return did;
}

// A planned prefetch: r comes back from the host if it fits the budget now, without evicting
// anything for it; otherwise it waits (prefetches_wanted_) until it fits, its back-access brings
// it back on demand, or its time is up. A swap-out not completed yet is simply cancelled, unless
// it began after the prefetch was asked for.
bool Residency::issue_prefetch(std::unique_lock<std::mutex>& lock, Region* r, std::uint64_t tag,
                               std::uint64_t due, std::uint64_t trigger, std::uint64_t asked) {
  if (r->swapper_busy || !may_evict_now()) return false;
  std::uint32_t st = r->state.load();
  if (st == kRegionEvicting) {
    if (r->handle_given) return false;  // its memory went to another restore: wait until out
    // A swap-out begun after the prefetch was asked for (a wrap entry's, right after the access
    // that asked) is not the prefetch's to cancel: the region was resident when it asked.
    if (asked <= r->evict_asks) return false;
    rescue(r);
    prefetched(r, tag);
    return true;
  }
  if (st != kRegionHost) return false;  // already back (or freed)
  want_prefetch(r, tag, due, trigger);
  return serve_prefetches(lock);
}

void Residency::prefetched(Region* r, std::uint64_t tag) {
  r->plan_tag.store(tag | plan_tag::kEvicted | plan_tag::kPrefetched, std::memory_order_relaxed);
  r->last_use.store(lru_tick(), std::memory_order_relaxed);  // not the next LRU victim
  ++prefetches_;
}

// With the host ahead of the device, a planned prefetch is asked for at its trigger and its
// back-access is reached a few calls later, on the host, before the memory the prefetch waits
// for has come back; the access then restores the region on demand. That restore is the
// prefetch (issued a host lead ahead of the device all the same): it counts as one, and the
// stream's wait at the back-access is measured and reported as the plan entry's lateness, so
// feedback sees it, instead of an entry reported as restored on demand.
void Residency::adopt_prefetch(Region* r) {
  for (std::size_t i = 0; i < prefetches_wanted_.size(); ++i) {
    const Prefetch& p = prefetches_wanted_[i];
    if (p.region != r || p.id != r->id) continue;
    const std::uint64_t tag = p.tag;
    prefetches_wanted_.erase(prefetches_wanted_.begin() + static_cast<std::ptrdiff_t>(i));
    prefetched(r, tag);
    return;
  }
}

// Whether `bytes` more fit the budget with nothing evicted: a pooled handle of that size is
// reused as it is, and pooled handles of other sizes are given back to make room.
bool Residency::room_without_eviction(std::uint64_t bytes) {
  std::uint64_t b = budget();
  if (has_pooled(bytes)) return used() <= b;
  while (used() + bytes > b && release_pooled_handle()) {
  }
  return used() + bytes <= b;
}

// Queues a prefetch triggered at call `trigger` (once per region), keeping the queue by due. It
// yields to calls waiting for memory in the first half of its window (trigger to due): they are
// needed long before it, and it has the time to follow them. Those in the second half are about
// as urgent, and the prefetch, asked for first, goes first.
void Residency::want_prefetch(Region* r, std::uint64_t tag, std::uint64_t due,
                              std::uint64_t trigger) {
  for (const Prefetch& p : prefetches_wanted_)
    if (p.region == r) return;
  std::uint64_t before = due != ~0ull && trigger < due ? trigger + (due - trigger) / 2 : due;
  auto at = std::upper_bound(prefetches_wanted_.begin(), prefetches_wanted_.end(), due,
                             [](std::uint64_t d, const Prefetch& p) { return d < p.due; });
  prefetches_wanted_.insert(at, {r, r->id, tag, monotonic_ns() + 1'000'000'000ull, due, before});
}

// Whether a call numbered below `seq` waits for memory: an allocation, or a restore asked for on
// demand that has not started.
bool Residency::memory_owed_before(std::uint64_t seq) const {
  for (std::uint64_t s : allocations_waiting_)
    if (s < seq) return true;
  for (const Wanted& w : wanted_)
    if (w.seq < seq) return true;
  return false;
}

// Starts waiting prefetches, soonest back-access first, each that fits now (in free memory, or
// in memory already on its way out: a planned swap-out's, a free's, which forces nothing). Memory
// goes first to what is needed first: a prefetch also waits while a call well before its
// back-access (an allocation, a restore on demand; see want_prefetch) waits for memory.
bool Residency::serve_prefetches(std::unique_lock<std::mutex>& lock) {
  bool did = false;
  std::uint64_t now = monotonic_ns();
  for (std::size_t i = 0; i < prefetches_wanted_.size();) {
    Prefetch p = prefetches_wanted_[i];
    Region* r = p.region;
    bool gone = r->id != p.id || r->state.load() != kRegionHost || now > p.deadline_ns;
    if (!gone && (r->swapper_busy || memory_owed_before(p.before))) {
      ++i;
      continue;
    }
    Region* donor = nullptr;
    bool room = !gone && room_without_eviction(r->mapped);
    if (!gone && !room && !(donor = donor_for(r->mapped))) {
      ++i;
      continue;
    }
    prefetches_wanted_.erase(prefetches_wanted_.begin() + static_cast<std::ptrdiff_t>(i));
    if (gone || issue_restore(lock, r, donor) != CUDA_SUCCESS) continue;
    prefetched(r, p.tag);
    did = true;
  }
  return did;
}

// A region whose memory is on its way out (its swap-out copy or its stream-ordered free is
// enqueued, with its completion event) and can be handed to a restore of `bytes`: the oldest,
// which completes first.
Region* Residency::donor_for(std::uint64_t bytes) {
  for (const InFlight& f : evict_flight_) {
    Region* d = f.region;
    if (d->mapped != bytes || d->handle_given || !d->handle || d->swapper_busy) continue;
    std::uint32_t st = d->state.load();
    if (f.is_free ? (st == kRegionFree && f.gen == d->gen)
                  : (st == kRegionEvicting && f.gen == d->gen && d->evict_issued))
      return d;
  }
  return nullptr;
}

bool Residency::serve_wanted(std::unique_lock<std::mutex>& lock) {
  bool did = false;
  std::uint64_t now = monotonic_ns();
  for (std::size_t i = 0; i < wanted_.size();) {
    Wanted w = wanted_[i];
    Region* r = w.region;
    std::uint32_t st = r->state.load();
    if (r->swapper_busy) {
      ++i;
      continue;
    }
    if (st == kRegionEvicting) {
      if (r->handle_given) {  // its memory is gone to another region: restore once it is out
        ++i;
        continue;
      }
      rescue(r);
      st = r->state.load();
    }
    if (st != kRegionHost && !(st == kRegionDropped && !r->handle)) {  // back already, or freed
      wanted_.erase(wanted_.begin() + static_cast<std::ptrdiff_t>(i));
      did = true;
      continue;
    }
    Room room = make_room(r->mapped, gate_.capturing(), true);  // issue_restore takes it
    if (room == Room::kWait) {
      // Memory on its way out can be taken at once, the copy back ordered after it on the
      // device: the caller's stream waits for the restore, never the host for the swap-out.
      if (Region* donor = donor_for(r->mapped)) {
        CUresult e = issue_restore(lock, r, donor);
        if (e != CUDA_ERROR_NOT_READY) {
          if (e != CUDA_SUCCESS) r->restore_error = e;
          if (e == CUDA_SUCCESS) adopt_prefetch(r);
          wanted_.erase(wanted_.begin() + static_cast<std::ptrdiff_t>(i));
          did = true;
          continue;
        }
      }
      ++i;
      continue;
    }
    CUresult e = CUDA_ERROR_OUT_OF_MEMORY;
    if (room == Room::kNone) {
      if (now < w.deadline_ns && held_only_by_pins(live_)) {
        ++i;
        continue;
      }
    } else {
      e = issue_restore(lock, r);
      if (e == CUDA_ERROR_NOT_READY) {
        ++i;
        continue;
      }
      if (e == CUDA_SUCCESS) adopt_prefetch(r);
    }
    if (e != CUDA_SUCCESS) r->restore_error = e;
    // issue_restore may have released the mutex; other threads only append to wanted_, so the
    // entry is still at i.
    wanted_.erase(wanted_.begin() + static_cast<std::ptrdiff_t>(i));
    did = true;
  }
  return did;
}

// Maps r again at its address and starts the copy back (room is ready). CUDA_ERROR_NOT_READY:
// the device itself is full and more room is being made.
CUresult Residency::issue_restore(std::unique_lock<std::mutex>& lock, Region* r, Region* donor) {
  if (cfg_.debug_skip_restore && r->state.load() != kRegionDropped) {
    // Test-only fault injection: claim residency without memory, so the next touch faults.
    resident_ += r->mapped;
    transition(r, kRegionResident);
    ++restores_;
    return CUDA_SUCCESS;
  }
  if (r->stale_mapping) {
    // Its address still maps memory it handed on (an earlier unmap failed): drop that first.
    CUresult e = dev_.unmap(r->base, r->mapped);
    if (e != CUDA_SUCCESS) return e;
    r->stale_mapping = false;
  }
  Device::Handle h = 0;
  if (donor) {
    // The donor's swap-out or free is in flight: its handle stays mapped at its own address until
    // that completes, and is mapped here too; the copy back waits for it on the restore stream.
    CUresult e = dev_.map(r->base, r->mapped, donor->handle);
    if (e != CUDA_SUCCESS) return e;  // a failed map left nothing mapped
    e = dev_.wait(restore_stream_, donor->evict_event);
    if (e != CUDA_SUCCESS) {
      dev_.unmap(r->base, r->mapped);  // a failed wait left the map
      return e;
    }
    take_from(donor);
    h = donor->handle;
  } else if (!take_pooled_handle(r->mapped, &h)) {
    CUresult e = dev_.create(r->mapped, &h);
    if (e == CUDA_ERROR_OUT_OF_MEMORY) {
      // The device is full though the budget is not (other processes, context overhead).
      if (release_pooled_handle()) return CUDA_ERROR_NOT_READY;
      if (may_evict_now())
        if (Region* v = victims_.pick(live_, may_leave, nullptr); v && begin_evict(v))
          return CUDA_ERROR_NOT_READY;
      if (evicting_ + freeing_ > 0) return CUDA_ERROR_NOT_READY;
      return e;
    }
    if (e != CUDA_SUCCESS) return e;
  }
  CUresult e = donor ? CUDA_SUCCESS : dev_.map(r->base, r->mapped, h);
  if (e != CUDA_SUCCESS) {
    handle_pool_.emplace_back(h, r->mapped);
    pooled_ += r->mapped;
    return e;
  }
  r->handle = h;
  resident_ += r->mapped;
  note_peak();
  if ((!r->restore_event && (e = dev_.event_create(&r->restore_event, true)) != CUDA_SUCCESS) ||
      (!r->restore_start && (e = dev_.event_create(&r->restore_start, true)) != CUDA_SUCCESS)) {
    undo_map(r);
    return e;
  }
  if (r->state.load() == kRegionDropped) {
    // Memory for a recomputation (recompute.cpp), no copy: the recomputing stream waits for this
    // event, which follows a donor's swap-out or free on the restore stream.
    e = dev_.record(r->restore_event, restore_stream_);
    if (e != CUDA_SUCCESS) undo_map(r);
    return e;
  }
  if (r->host.pinned) {
    e = dev_.record(r->restore_start, restore_stream_);
    if (e == CUDA_SUCCESS) e = dev_.copy_h2d(r->base, r->host.ptr, r->size, restore_stream_);
    if (e == CUDA_SUCCESS) {
      e = dev_.record(r->restore_event, restore_stream_);
      // The copy is in flight with no event to see it end: wait for the device before unmapping.
      if (e != CUDA_SUCCESS && dev_.synchronize_context() != CUDA_SUCCESS)
        GSWAP_CHECK(!"a restore copy's end can be neither seen nor waited for");
    }
    if (e != CUDA_SUCCESS) {
      undo_map(r);
      return e;
    }
  } else {
    r->swapper_busy = true;
    lock.unlock();
    std::uint64_t t0 = monotonic_ns();
    e = host_.staged_h2d(r->base, r->host.ptr, r->size, restore_stream_);
    if (e == CUDA_SUCCESS) e = dev_.record(r->restore_event, restore_stream_);
    std::uint64_t t1 = monotonic_ns();
    timings_.copy_done_ns(true, r->size, t1 - t0);
    report_host_copy(true, r, t0, t1);
    lock.lock();
    r->swapper_busy = false;
    if (r->state.load() == kRegionFree && r->free_requested) {
      // Freed while its bytes came back: its memory goes back through an ordered free.
      r->free_requested = false;
      resident_ -= r->mapped;
      freeing_ += r->mapped;
      issue_free(r);
      return CUDA_SUCCESS;
    }
    if (e != CUDA_SUCCESS) {
      undo_map(r);
      return e;
    }
  }
  transition(r, kRegionRestoring);
  r->restore_pending = true;
  swapped_in_ += r->size;
  ++restores_;
  restore_flight_.push_back({r, ++r->restores_issued, false});
  telemetry::restore(r->id, r->size, false);
  return CUDA_SUCCESS;
}

// A restore that failed after mapping: the region goes back to the host state it was in.
void Residency::undo_map(Region* r) {
  if (dev_.unmap(r->base, r->mapped) != CUDA_SUCCESS)
    GSWAP_CHECK(!"a region mapped for a failed restore cannot be unmapped");
  handle_pool_.emplace_back(r->handle, r->mapped);
  pooled_ += r->mapped;
  r->handle = 0;
  resident_ -= r->mapped;
}

// Evicts down to the budget after it shrank or a capture left memory above it.
bool Residency::enforce_budget() {
  if (!may_evict_now()) return false;
  bool did = false;
  while (used() - evicting_ - freeing_ > budget() && release_pooled_handle()) did = true;
  if (used() - evicting_ - freeing_ <= budget()) return did;
  const std::uint64_t evictions = evictions_;
  send_away_in_order(0);
  return did || evictions_ != evictions;
}

}  // namespace gswap::interpose
