// residency.cpp: the application-thread side of residency (see residency.h for the thread and
// lock rules; swapper.cpp holds the swapper thread's side).
//
// Accounting: used() is every byte of physical device memory gswap holds or has handed out:
// resident regions (kResident and kRestoring), swap-outs still in flight (kEvicting), freed
// regions whose streams have not passed the free yet, the handle pool and the arena. Outside a
// stream capture, used() <= budget holds whenever a slow path returns; during one, gswap evicts
// nothing (fact 8) and a captured call may take a region back above the budget, which the
// swapper gives back when the capture ends.
#include "interpose/residency.h"

#include <unistd.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <unordered_set>

#include "interpose/check.h"
#include "interpose/clock.h"
#include "interpose/log.h"
#include "interpose/plan_executor.h"
#include "interpose/recompute.h"
#include "interpose/telemetry.h"
#include "interpose/timeline.h"
#include "proto/utf8.h"

namespace gswap::interpose {
namespace {

// A kept intermediate (Region::kept) that may be dropped now: its registration still covers it.
bool may_drop_kept(const Region* r, const void* ctx) {
  return r->kept && r->recompute && r->recompute->covers(r->size) && may_leave(r, ctx);
}

std::uint64_t round_up(std::uint64_t v, std::uint64_t a) {
  return (v + a - 1) / a * a;
}

// One call waiting for memory, by the call number it will have: listed (in a vector the caller
// guards) while it waits, so that planned prefetches due after it leave it the memory that comes
// back (Residency::memory_owed_before).
struct OwedScope {
  std::vector<std::uint64_t>& waiting;
  std::uint64_t seq;
  bool on = false;
  void begin() {
    if (!on) waiting.push_back(seq);
    on = true;
  }
  ~OwedScope() {
    if (on) waiting.erase(std::find(waiting.begin(), waiting.end(), seq));
  }
};

// How long a call waits for regions other threads pin only between their check and their enqueue
// (or the swapper holds while it issues a restore) before it calls a shortage out of memory.
// Generous: on a loaded machine the threads holding them may not run for a while, and a
// synchronous call holds its pins until its copy or memset is done.
constexpr std::uint64_t kTransientPinNs = 1'000'000'000;
// The same inside a recomputation callback, where the pins are likely the thread's own (the
// launch being prepared): a short wait, then out of memory.
constexpr std::uint64_t kOwnPinsNs = 100'000'000;

std::uint64_t pin_deadline() {
  return monotonic_ns() + (in_recompute() ? kOwnPinsNs : kTransientPinNs);
}
// How long an allocation waits for swap-outs and frees in flight when none of them completes:
// one ordered after work that waits for the host (a stream waiting on a value the caller sets
// only later) would otherwise never return. Far longer than any one copy takes.
constexpr std::uint64_t kNoProgressNs = 10'000'000'000;
// How long the end of a capture waits for memory above the budget to leave.
constexpr std::uint64_t kCaptureSettleNs = 2'000'000'000;

}  // namespace

const char* region_state_name(std::uint32_t state) {
  switch (state) {
    case kRegionFree:
      return "free";
    case kRegionResident:
      return "resident";
    case kRegionEvicting:
      return "evicting";
    case kRegionHost:
      return "host";
    case kRegionRestoring:
      return "restoring";
    case kRegionDropped:
      return "dropped";
    default:
      return "invalid";
  }
}

bool region_transition_allowed(std::uint32_t from, std::uint32_t to) {
  if (to == kRegionFree) return from != kRegionFree;  // a free, from any live state
  switch (from) {
    case kRegionFree:
      return to == kRegionResident;  // allocation
    case kRegionResident:
      return to == kRegionEvicting || to == kRegionDropped;
    case kRegionEvicting:  // done (a swap-out or a drop); rescued (back to where it was)
      return to == kRegionHost || to == kRegionDropped || to == kRegionResident ||
             to == kRegionRestoring;
    case kRegionHost:
      return to == kRegionRestoring || to == kRegionResident;  // (skip-restore)
    case kRegionRestoring:
      return to == kRegionResident || to == kRegionEvicting;
    case kRegionDropped:  // recomputed; its registration ended while a host copy was kept
      return to == kRegionRestoring || to == kRegionHost;
    default:
      return false;
  }
}

// One host wait of an application thread, from its first wait to the end of the call: one stall
// in the counters and one interval on the timeline (mutex_ held when it ends).
class Residency::WaitScope {
 public:
  WaitScope(Residency& r, const char* why) : r_(r), why_(why) {}
  void begin() {
    if (!start_) start_ = monotonic_ns();
  }
  ~WaitScope() {
    if (!start_) return;
    std::uint64_t end = monotonic_ns();
    r_.count_stall(end - start_, start_);
    timeline::host_wait(why_, start_, end);
  }

 private:
  Residency& r_;
  const char* why_;
  std::uint64_t start_ = 0;
};

Residency::Residency(Device& device, FastState& fast, VictimPolicy& victims)
    : dev_(device),
      fast_(fast),
      victims_(victims),
      host_(device),
      gate_(fast.capturing),
      timings_(device) {}

Residency::~Residency() {
  stop_swapper();
}

void Residency::configure(const ResidencySettings& s) {
  std::lock_guard<std::mutex> lock(mutex_);
  cfg_ = s;
  budget_.store(s.budget, std::memory_order_relaxed);
  host_.configure(s.pinned_cap, s.staging_bytes);
}

bool Residency::ensure_device() {
  if (device_ready_.load(std::memory_order_acquire)) return true;
  if (device_failed_) return false;
  CUcontext ctx = dev_.current();
  if (!ctx) return false;  // this thread has no context: try again later
  std::uint64_t gran = 0;
  if (dev_.granularity(&gran) != CUDA_SUCCESS || gran == 0 || (gran & (gran - 1)) != 0) {
    GSWAP_LOG(kWarn, "VMM granularity unavailable: nothing will be swappable");
    device_failed_ = true;
    return false;
  }
  // One reservation for every region: addresses stay put and the launch-path lookup is a table
  // index (region_map.h). Four times the device leaves room for oversubscription.
  std::uint64_t span =
      round_up(std::max<std::uint64_t>(64ull << 30, 4 * cfg_.physical_total), gran);
  std::uint64_t base = 0;
  while (span >= 2 * gran && dev_.reserve(span, gran, &base) != CUDA_SUCCESS) span /= 2;
  if (!base) {
    GSWAP_LOG(kWarn, "cannot reserve device address space: nothing will be swappable");
    device_failed_ = true;
    return false;
  }
  if (!fast_.map.init(base, span, static_cast<unsigned>(__builtin_ctzll(gran))) ||
      dev_.stream_create(&evict_stream_) != CUDA_SUCCESS ||
      dev_.stream_create(&restore_stream_) != CUDA_SUCCESS ||
      dev_.stream_create(&order_stream_) != CUDA_SUCCESS) {
    GSWAP_LOG(kWarn, "cannot set up gswap's streams: nothing will be swappable");
    device_failed_ = true;
    return false;
  }
  ctx_ = ctx;
  device_ = dev_.ordinal();
  granularity_ = gran;
  threshold_ = cfg_.swap_threshold ? cfg_.swap_threshold : gran;
  va_base_ = base;
  va_span_ = span;
  va_.init(base, span);
  slot_events_.assign(StreamTable::kSlots, nullptr);
  timings_.ensure_base(evict_stream_);  // the device-time axis, before any capture can begin
  device_ready_.store(true, std::memory_order_release);
  char a[32], b[32];
  GSWAP_LOG(kInfo, "device %d: budget %s of %s, granularity %llu, threshold %llu", device_,
            format_bytes(budget(), a, 32), format_bytes(cfg_.physical_total, b, 32),
            (unsigned long long)gran, (unsigned long long)threshold_);
  if (cfg_.swapper_thread) start_swapper();
  return true;
}

// --- bookkeeping (mutex_ held) -----------------------------------------------------------------

void Residency::transition(Region* r, std::uint32_t to) {
  std::uint32_t from = r->state.load(std::memory_order_relaxed);
  if (!region_transition_allowed(from, to)) {
    GSWAP_LOG(kError, "region %llu: %s -> %s is not a valid state change",
              (unsigned long long)r->id, region_state_name(from), region_state_name(to));
    GSWAP_CHECK(!"invalid region state change");
  }
  ++r->gen;
  r->state.store(to, std::memory_order_seq_cst);
}

void Residency::note_peak() {
  peak_ = std::max(peak_, used());
}

Region* Residency::new_region() {
  Region* r = recycled_;
  if (r) {
    recycled_ = r->next_free;
  } else {
    r = new Region();
  }
  r->next_free = nullptr;
  r->id = next_id_++;
  // pins is left alone: a launch that raced with this region's previous life may still hold a
  // pin it is about to drop (it will see the new state and back off); zeroing it would lose that
  // decrement and leave the region pinned for ever.
  r->streams.store(0, std::memory_order_relaxed);
  r->last_use.store(lru_tick(), std::memory_order_relaxed);
  r->handle = 0;
  r->host = HostBuffer{};
  r->must_stay = untrackable_seen_;
  r->stream_ordered = false;
  r->free_requested = r->evict_issued = r->free_issued = r->swapper_busy = false;
  r->handle_given = r->stale_mapping = false;
  r->name[0] = '\0';
  r->restore_pending = false;
  r->used_pending = false;
  r->restore_error = CUDA_SUCCESS;
  r->recompute = nullptr;
  r->dependents = 0;
  r->dropping = r->drop_copy = r->host_valid = r->kept = false;
  // A graph that held the region's previous life lets go by id (release_held), and that id is
  // gone: its hold must not pass to the new region, which would then never leave.
  r->graph_holds = 0;
  r->capture_period = 0;
  return r;
}

void Residency::recycle(Region* r) {
  if (r->state.load(std::memory_order_relaxed) != kRegionFree) transition(r, kRegionFree);
  r->next_free = recycled_;
  recycled_ = r;
}

void Residency::finish_free(Region* r) {
  host_.release(&r->host, monotonic_ns());
  if (r->stale_mapping && dev_.unmap(r->base, r->mapped) != CUDA_SUCCESS)
    r->va_bytes = 0;  // still mapped to memory that is no longer its: never reused
  r->stale_mapping = false;
  if (r->va_bytes) va_.release(r->base, r->va_bytes);
  recycle(r);
}

void Residency::unmap_to_pool(Region* r) {
  if (r->handle_given) {
    // Its memory belongs to another region now: drop this address's mapping only.
    if (dev_.unmap(r->base, r->mapped) != CUDA_SUCCESS) {
      GSWAP_LOG(kError,
                "region %llu: its old mapping cannot be dropped yet; tried again before "
                "its address is used",
                (unsigned long long)r->id);
      ++swap_errors_;
      r->stale_mapping = true;
    }
    r->handle_given = false;
    r->handle = 0;
    return;
  }
  if (!r->handle) return;
  if (dev_.unmap(r->base, r->mapped) != CUDA_SUCCESS) {
    // The mapping is as it was: the handle stays with the range, which is never reused.
    GSWAP_LOG(kError, "region %llu: its memory cannot be unmapped; %llu bytes are lost to gswap",
              (unsigned long long)r->id, (unsigned long long)r->mapped);
    ++swap_errors_;
    r->handle = 0;
    r->va_bytes = 0;  // never released to the VA space again
    return;
  }
  handle_pool_.emplace_back(r->handle, r->mapped);
  pooled_ += r->mapped;
  r->handle = 0;
}

// The end of a free whose memory no stream uses any more: a region that still holds its own
// mapping keeps it, with its address range, for the next allocation of that size (as the
// driver's stream-ordered pool keeps freed memory mapped); any other gives its handle to the pool.
void Residency::free_to_pool(Region* r) {
  if (r->handle && !r->handle_given && !r->stale_mapping && r->va_bytes) {
    mapped_pool_.push_back({r->base, r->mapped, r->handle});
    pooled_ += r->mapped;
    r->handle = 0;
    r->va_bytes = 0;  // the range stays with the pool
  } else {
    unmap_to_pool(r);
  }
  finish_free(r);
}

// A pooled range of this mapped size, taken as it is: still mapped.
bool Residency::take_mapped_range(std::uint64_t mapped, std::uint64_t* va, Device::Handle* h) {
  // The most recently freed first: its memory is the likeliest still in the device's caches.
  for (std::size_t i = mapped_pool_.size(); i-- > 0;) {
    const MappedRange& m = mapped_pool_[i];
    if (m.mapped != mapped) continue;
    *va = m.va;
    *h = m.handle;
    pooled_ -= mapped;
    mapped_pool_.erase(mapped_pool_.begin() + static_cast<std::ptrdiff_t>(i));
    return true;
  }
  return false;
}

// Unmaps pooled range i and releases its address range: true, with its handle (no longer
// counted in pooled_), or false when the unmap failed (logged; range and memory are lost to
// gswap, as for a region whose memory cannot be unmapped).
bool Residency::unmap_range(std::size_t i, Device::Handle* h) {
  MappedRange m = mapped_pool_[i];
  mapped_pool_.erase(mapped_pool_.begin() + static_cast<std::ptrdiff_t>(i));
  pooled_ -= m.mapped;
  if (dev_.unmap(m.va, m.mapped) != CUDA_SUCCESS) {
    GSWAP_LOG(kError, "freed memory at 0x%llx cannot be unmapped; %llu bytes are lost to gswap",
              (unsigned long long)m.va, (unsigned long long)m.mapped);
    ++swap_errors_;
    return false;
  }
  va_.release(m.va, m.mapped + granularity_);  // its guard granule with it
  *h = m.handle;
  return true;
}

// Unmaps every pooled range, keeping their handles in the pool: for an allocation that finds no
// free address range. True if any was.
bool Residency::flush_mapped_ranges() {
  bool any = !mapped_pool_.empty();
  while (!mapped_pool_.empty()) {
    Device::Handle h = 0;
    std::uint64_t mapped = mapped_pool_.back().mapped;
    if (unmap_range(mapped_pool_.size() - 1, &h)) {
      handle_pool_.emplace_back(h, mapped);
      pooled_ += mapped;
    }
  }
  return any;
}

// Whether pooled memory (a handle, or a range kept mapped) of exactly `bytes` is there.
bool Residency::has_pooled(std::uint64_t bytes) const {
  for (const auto& [h, size] : handle_pool_)
    if (size == bytes) return true;
  for (const MappedRange& m : mapped_pool_)
    if (m.mapped == bytes) return true;
  return false;
}

bool Residency::take_pooled_handle(std::uint64_t bytes, Device::Handle* h) {
  for (auto it = handle_pool_.begin(); it != handle_pool_.end(); ++it) {
    if (it->second == bytes) {
      *h = it->first;
      pooled_ -= bytes;
      handle_pool_.erase(it);
      return true;
    }
  }
  // A range kept mapped: its memory, once unmapped there.
  for (std::size_t i = mapped_pool_.size(); i-- > 0;)
    if (mapped_pool_[i].mapped == bytes && unmap_range(i, h)) return true;
  return false;
}

// Gives the most recently pooled handle back to the driver: the cheapest way under the budget.
// Ranges kept mapped go last (each needs an unmap), the oldest first.
bool Residency::release_pooled_handle() {
  Device::Handle h = 0;
  if (!handle_pool_.empty()) {
    auto [ph, size] = handle_pool_.back();
    handle_pool_.pop_back();
    dev_.release(ph);
    pooled_ -= size;
    return true;
  }
  if (mapped_pool_.empty()) return false;
  if (unmap_range(0, &h)) dev_.release(h);
  return true;
}

void Residency::push(CommandType type, Region* r) {
  Command c{type, r, r ? r->gen : 0, 0, 0};
  if (!queue_.push(c)) overflow_.push_back(c);  // mutex_ is held: the swapper drains both
  wake_swapper();
}

void Residency::wake_swapper() {
  {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    wake_pending_ = true;
  }
  wake_cv_.notify_one();
}

bool Residency::may_evict_now() const {
  return !gate_.capturing();  // fact 8: nothing leaves while a stream captures
}

// Marks r for swap-out and hands it to the swapper. False when a launch pinned it first.
bool Residency::begin_evict(Region* r) {
  std::uint32_t from = r->state.load(std::memory_order_relaxed);
  transition(r, kRegionEvicting);
  // A Dekker pair with the launch path's pin-then-load (access.h): either we see its pin and back
  // off, or it sees kEvicting and takes the slow path, which rescues the region.
  if (r->pins.load(std::memory_order_seq_cst) != 0) {
    transition(r, from);
    return false;
  }
  resident_ -= r->mapped;
  evicting_ += r->mapped;
  r->evict_asks = asks_.load(std::memory_order_relaxed);
  r->evict_issued = false;
  r->kept = false;
  ++evictions_;
  push(CommandType::kEvict, r);
  return true;
}

// A swap-out that has not completed is cancelled: the region is still mapped and unchanged. A
// copy already in flight only fills r's own host buffer, which stays attached to r (a later
// swap-out on the same FIFO stream overwrites it), so nothing else can be hurt by it. A region
// whose restore had not been seen complete goes back to kRestoring, so users still wait for it.
void Residency::rescue(Region* r) {
  r->dropping = false;
  evicting_ -= r->mapped;
  resident_ += r->mapped;
  transition(r, r->restore_pending ? kRegionRestoring : kRegionResident);
}

// Starts what would bring used() + bytes within the budget: drops pooled handles, begins the
// plan's swap-outs and drops still queued, drops kept intermediates, then hands
// least-recently-used victims to the swapper. kReady: it fits now; kWait: it will once swap-outs
// or frees in flight complete; kNone: nothing can make it fit (it may still, if regions pinned only
// for an instant by other threads' launches are released).
// takes_pooled: the caller takes pooled memory of exactly `bytes` when there is some
// (take_pooled_handle), which needs no more memory than is used now.
Residency::Room Residency::make_room(std::uint64_t bytes, bool over_budget_ok, bool takes_pooled) {
  std::uint64_t b = budget();
  if (used() + bytes <= b) return Room::kReady;
  if (takes_pooled && used() <= b && has_pooled(bytes)) return Room::kReady;
  while (used() + bytes > b && release_pooled_handle()) {
  }
  if (used() + bytes <= b) return Room::kReady;
  if (over_budget_ok) {
    capture_overshoot_ = std::max(capture_overshoot_, used() + bytes - b);
    GSWAP_LOG_ONCE(kInfo,
                   "a captured call needs memory above the budget while a stream captures; the "
                   "excess is given back when the capture ends");
    return Room::kReady;
  }
  send_away_in_order(bytes);
  // Swap-outs and frees in flight give memory back; once they have, or once restores in flight
  // have landed (their regions may leave then), more may be evictable.
  if (evicting_ + freeing_ > 0 || !restore_flight_.empty()) return Room::kWait;
  return Room::kNone;
}

// What makes room, in order: the plan's swap-outs and drops still queued, then intermediates kept
// after a chain of recomputations (dropping them costs no copy), then least-recently-used victims,
// then, for a recomputation, the other regions of the access it is for (yieldable_), until
// used() + bytes, less what is already leaving, fits the budget.
void Residency::send_away_in_order(std::uint64_t bytes) {
  begin_queued_planned();
  send_away(bytes, may_drop_kept, /*drop=*/true);
  send_away(bytes, may_leave, /*drop=*/false);
  if (yieldable_) yield_access_regions(bytes);
}

// The access's own regions (yieldable_), pinned by it alone, leave for its recomputation:
// unpinned to begin their swap-out (a pin held by another call too keeps one where it is), and
// pinned again by recompute_dropped once the recomputation has its memory.
void Residency::yield_access_regions(std::uint64_t bytes) {
  for (std::size_t i = 0; i < yieldable_->n; ++i) {
    if (used() - evicting_ - freeing_ + bytes <= budget() || !may_evict_now()) return;
    Region* r = yieldable_->regions[i];
    if (!movable(r) || r->pins.load(std::memory_order_seq_cst) != 1 ||
        std::find(yielded_.begin(), yielded_.end(), r) != yielded_.end())
      continue;
    r->pins.fetch_sub(1, std::memory_order_seq_cst);
    if (begin_evict(r))
      yielded_.push_back(r);
    else
      r->pins.fetch_add(1, std::memory_order_seq_cst);  // another call pinned it meanwhile
  }
}

// Hands the victims `accept` lets the VictimPolicy pick to the swapper (dropped without a copy
// when `drop`) until used() + bytes, less what is already leaving, fits the budget. A kept
// intermediate that cannot be dropped (pinned meanwhile) is an ordinary region from then on.
void Residency::send_away(std::uint64_t bytes, VictimPolicy::Evictable accept, bool drop) {
  std::size_t attempts = live_.size();
  while (used() - evicting_ - freeing_ + bytes > budget() && attempts-- > 0 && may_evict_now()) {
    Region* v = victims_.pick(live_, accept, nullptr);
    if (!v) break;
    if (!drop)
      begin_evict(v);
    else if (!begin_drop(v))
      v->kept = false;
  }
}

// Application threads: waits (releasing the mutex) until `bytes` fit the budget.
CUresult Residency::wait_for_room(std::unique_lock<std::mutex>& lock, std::uint64_t bytes) {
  std::uint64_t deadline = pin_deadline();
  WaitScope waited(*this, "memory");
  Progress stuck(completed_);
  OwedScope owed{allocations_waiting_, fast_.seq.load()};
  std::unique_lock<std::mutex> restorers(restorer_mutex_, std::defer_lock);  // wait_for_pins
  for (;;) {
    // During a capture nothing leaves (fact 8): the allocation goes above the budget, and the
    // swapper gives the excess back when the capture ends.
    Room room = make_room(bytes, gate_.capturing());
    if (room == Room::kReady) return CUDA_SUCCESS;
    if (room == Room::kNone) {
      if (monotonic_ns() < deadline && held_only_by_pins(live_)) {
        wait_for_pins(lock, restorers, deadline);
        continue;
      }
      return CUDA_ERROR_OUT_OF_MEMORY;
    }
    // Only an allocation over the budget waits, and only for swap-outs in flight (vDNN++).
    waited.begin();
    owed.begin();
    if (stuck.check(completed_)) return stuck_oom();
    wait_progress(lock, 5000);
  }
}

// An allocation finds every byte it could take pinned by launches of other threads. Pins last
// from a launch's check to its enqueue, but launches on other threads follow one another through
// the restorer lock, each pinning its working set anew, and an allocation that only polled could
// wait behind them until its deadline. So it tries to take the restorer lock (never blocking on
// it: its holder may be a recomputation callback waiting for this thread), which lets the pins
// held now go and holds new launches back until the allocation has its memory; its deadline
// starts again from there. Inside a recomputation callback the thread holds that lock already
// and the pins may be its own: it only waits out the deadline it started with.
void Residency::wait_for_pins(std::unique_lock<std::mutex>& lock,
                              std::unique_lock<std::mutex>& restorers, std::uint64_t& deadline) {
  if (!restorers.owns_lock() && !in_recompute() && restorers.try_lock()) {
    deadline = monotonic_ns() + kTransientPinNs;
    return;
  }
  wait_progress(lock, 500);
}

// Lets the swapper make progress: waits for it, or does its work here when it has no thread.
void Residency::wait_progress(std::unique_lock<std::mutex>& lock, std::uint64_t max_us) {
  if (swapper_running_) {
    done_cv_.wait_for(lock, std::chrono::microseconds(max_us));
    return;
  }
  if (!step_locked(lock)) {
    lock.unlock();
    timespec ts{0, 100000};
    nanosleep(&ts, nullptr);
    lock.lock();
  }
}

void Residency::count_stall(std::uint64_t ns, std::uint64_t start_ns) {
  ++stalls_;
  stall_ns_ += ns;
  telemetry::stall(fast_.seq.load(std::memory_order_relaxed), ns, start_ns,
                   static_cast<std::uint64_t>(::gettid()));
}

Residency::Progress::Progress(std::uint64_t completed) : seen(completed), since(monotonic_ns()) {}

bool Residency::Progress::check(std::uint64_t completed) {
  std::uint64_t now = monotonic_ns();
  if (completed != seen) {
    seen = completed;
    since = now;
  }
  return now - since > kNoProgressNs;
}

// The caller logs it (log_oom), saying why.
CUresult Residency::stuck_oom() {
  oom_stuck_ = true;
  return CUDA_ERROR_OUT_OF_MEMORY;
}

void Residency::log_oom(std::uint64_t asked) {
  ++oom_;
  char a[32], b[64], c[32], d[32];
  // The budget, and where it comes from when gswapd's share holds the process below its own.
  format_bytes(budget(), b, 32);
  if (budget_is_share_.load(std::memory_order_relaxed))
    std::strncat(b, " (gswapd's share)", sizeof b - std::strlen(b) - 1);
  if (oom_stuck_) {
    oom_stuck_ = false;
    GSWAP_LOG(kError,
              "out of memory: asked %s and waited %llu s for swap-outs in flight that made no "
              "progress (a stream they follow may be waiting for the host) "
              "(CUDA_ERROR_OUT_OF_MEMORY)",
              format_bytes(asked, a, 32), (unsigned long long)(kNoProgressNs / 1'000'000'000));
    return;
  }
  if (asked > budget()) {
    GSWAP_LOG(kError,
              "out of memory: this call needs %s on the device at once, more than the budget %s "
              "(CUDA_ERROR_OUT_OF_MEMORY)",
              format_bytes(asked, a, 32), b);
    return;
  }
  if (arena_bytes_ > budget() - asked) {
    GSWAP_LOG(kError,
              "out of memory: this call needs %s on the device at once, and the small "
              "allocations, which never leave the device, hold %s of the budget %s "
              "(CUDA_ERROR_OUT_OF_MEMORY)",
              format_bytes(asked, a, 32), format_bytes(arena_bytes_, c, 32), b);
    return;
  }
  // What may never leave, and why, so that a program that cannot find the cause in the budget
  // finds it here: a pointer table uploaded once keeps every allocation it names on the device.
  std::uint64_t stay = 0;
  for (const Region* r : live_)
    if (r->fixed() && r->state.load(std::memory_order_relaxed) != kRegionHost) stay += r->mapped;
  char e[32];
  GSWAP_LOG(kError,
            "out of memory: asked %s, budget %s, resident %s, pinned host %s; not enough of what "
            "is resident can leave (pinned by calls in flight, made to stay, or needed by this "
            "call); %s of it is made to stay for good: allocations named in small host-to-device "
            "copies (pointer tables), touched in stream captures whose graphs live, IPC-exported "
            "or untrackable (CUDA_ERROR_OUT_OF_MEMORY)",
            format_bytes(asked, a, 32), b, format_bytes(used(), c, 32),
            format_bytes(host_.pinned_bytes(), d, 32), format_bytes(stay, e, 32));
}

// --- allocation and free -----------------------------------------------------------------------

// Physical memory for a new region of `bytes` within the budget: a pooled handle, a new one, or,
// for a stream-ordered allocation (async), the memory of a region whose swap-out or free is in
// flight (*donor: the caller orders its stream after it). Waits (releasing the mutex) only when
// none of these is possible yet.
CUresult Residency::obtain_handle(std::unique_lock<std::mutex>& lock, std::uint64_t bytes,
                                  bool async, Device::Handle* h, Region** donor) {
  std::uint64_t deadline = pin_deadline();
  WaitScope waited(*this, "memory for an allocation");
  Progress stuck(completed_);
  // While it waits, planned prefetches due after it leave it the memory that comes back.
  OwedScope owed{allocations_waiting_, fast_.seq.load()};
  std::unique_lock<std::mutex> restorers(restorer_mutex_, std::defer_lock);  // wait_for_pins
  for (;;) {
    Room room = make_room(bytes, gate_.capturing(), true);
    if (room == Room::kReady) {
      if (take_pooled_handle(bytes, h)) return CUDA_SUCCESS;
      CUresult e = dev_.create(bytes, h);
      if (e != CUDA_ERROR_OUT_OF_MEMORY) return e;
      // The device itself is full (other processes, context overhead): behave as at the budget.
      if (release_pooled_handle()) continue;
      Region* v = may_evict_now() ? victims_.pick(live_, may_leave, nullptr) : nullptr;
      if (!v && evicting_ + freeing_ == 0) return e;
      if (v) begin_evict(v);
    } else if (room == Room::kNone) {
      if (monotonic_ns() >= deadline || !held_only_by_pins(live_)) return CUDA_ERROR_OUT_OF_MEMORY;
      wait_for_pins(lock, restorers, deadline);
      continue;
    } else if (async) {
      if (Region* d = donor_for(bytes)) {
        *donor = d;
        *h = d->handle;
        return CUDA_SUCCESS;
      }
    }
    // Only an allocation over the budget waits, and only for swap-outs in flight (vDNN++).
    waited.begin();
    owed.begin();
    if (stuck.check(completed_)) return stuck_oom();
    wait_progress(lock, 5000);
  }
}

// r's physical memory is being handed to another region's mapping (its swap-out or free is in
// flight): the bytes are accounted to the new owner from now on.
void Residency::take_from(Region* donor) {
  donor->handle_given = true;
  if (donor->state.load() == kRegionFree)
    freeing_ -= donor->mapped;
  else
    evicting_ -= donor->mapped;
}

// During a capture, a stream-ordered call on a capturing stream becomes a graph node (an
// allocation on it is graph memory, a free a free node); on the legacy stream while a blocking
// stream captures the driver refuses it (CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, which the query
// answers too). Either way the call is the driver's to answer. per_thread: a _ptsz entry point,
// where stream 0 is the calling thread's default stream.
bool Residency::in_capture(CUstream stream, bool per_thread) {
  if (!gate_.capturing()) return false;
  if (!stream) stream = per_thread ? CU_STREAM_PER_THREAD : legacy_stream();
  bool capturing = false;
  return dev_.is_capturing(stream, &capturing) != CUDA_SUCCESS || capturing;
}

// Whether the calling thread's capture mode is relaxed (cuThreadExchangeStreamCaptureMode).
bool Residency::relaxed_thread() {
  unsigned mode = 0;
  dev_.relax_capture_mode(&mode);
  dev_.restore_capture_mode(mode);
  return mode == CU_STREAM_CAPTURE_MODE_RELAXED;
}

CUresult Residency::alloc_region(CUdeviceptr* out, std::uint64_t bytes, CUstream stream, bool async,
                                 bool per_thread, bool* handled) {
  *handled = false;
  std::unique_lock<std::mutex> lock(mutex_);
  if (!ensure_device() || bytes < threshold_ || bytes == 0) return CUDA_SUCCESS;
  // Another context (another device, or none on this thread) is the driver's to answer.
  if (dev_.current() != ctx_) return CUDA_SUCCESS;
  // Graph memory is the driver's, not a region (its address is only valid while the graph runs).
  if (async && in_capture(stream, per_thread)) return CUDA_SUCCESS;
  // cuMemAlloc is potentially unsafe during a capture: the driver judges this thread by the
  // capture modes, and its refusal (the capture invalidated) is the answer. A relaxed thread may.
  if (!async && gate_.capturing() && !relaxed_thread()) {
    lock.unlock();
    CUresult e = dev_.unsafe_call();
    if (e != CUDA_SUCCESS) {
      *handled = true;
      return e;
    }
    lock.lock();
  }
  // A size within a granule of 2^64 would round up to 0: it is larger than any budget.
  std::uint64_t mapped = bytes > ~0ull - 2 * granularity_ ? ~0ull : round_up(bytes, granularity_);
  // One unmapped guard granule follows every region, assigned to it in the map, so that a
  // one-past-the-end pointer names this region and never the next one (param_scan.h).
  std::uint64_t va_bytes = mapped + granularity_;
  if (mapped > budget()) {
    *handled = true;
    char a[32], b[32];
    GSWAP_LOG(kError,
              "out of memory: one allocation of %s is larger than the budget %s "
              "(CUDA_ERROR_OUT_OF_MEMORY)",
              format_bytes(bytes, a, 32), format_bytes(budget(), b, 32));
    ++oom_;
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  *handled = true;
  auto new_at = [&](std::uint64_t base) {
    Region* r = new_region();
    r->base = base;
    r->size = bytes;
    r->mapped = mapped;
    r->va_bytes = va_bytes;
    return r;
  };
  // Freed memory still mapped, of this size: taken as it is, with its address, when the budget
  // is not exceeded already (a lower budget the swapper has not enforced yet: the allocation
  // makes room first, as any other). During a capture the excess is allowed and given back later.
  if (used() <= budget() || gate_.capturing()) {
    std::uint64_t kept = 0;
    Device::Handle kh = 0;
    if (take_mapped_range(mapped, &kept, &kh)) {
      Context ctx(*this);
      Region* r = new_at(kept);
      r->handle = kh;
      return place_region(r, out, async, stream, per_thread);
    }
  }
  std::uint64_t va = va_.alloc(va_bytes);
  // Address ranges held by freed memory kept mapped: unmapped (their memory stays pooled).
  if (!va && flush_mapped_ranges()) va = va_.alloc(va_bytes);
  if (!va) {
    *handled = false;
    char a[32];
    GSWAP_LOG(kWarn,
              "no free range of %s left in gswap's address reservation: this allocation goes to "
              "the driver and is never swapped",
              format_bytes(va_bytes, a, 32));
    return CUDA_SUCCESS;
  }
  Context ctx(*this);
  Region* r = new_at(va);
  Device::Handle h = 0;
  Region* donor = nullptr;
  CUresult e = obtain_handle(lock, mapped, async, &h, &donor);
  if (e == CUDA_SUCCESS) {
    e = dev_.map(va, mapped, h);
    if (e == CUDA_SUCCESS && donor) {
      // Stream-ordered, like the allocator it stands in for: the new memory is usable on the
      // allocating stream once the donor's swap-out or free has completed there.
      CUstream s = (per_thread && !stream) ? CU_STREAM_PER_THREAD : stream;
      e = dev_.wait(s, donor->evict_event);
      if (e != CUDA_SUCCESS) dev_.unmap(va, mapped);
    }
    if (e != CUDA_SUCCESS && !donor) {
      handle_pool_.emplace_back(h, mapped);
      pooled_ += mapped;
    }
    if (e == CUDA_SUCCESS && donor) take_from(donor);
  }
  if (e != CUDA_SUCCESS) {
    if (e == CUDA_ERROR_OUT_OF_MEMORY) log_oom(mapped);
    va_.release(va, va_bytes);
    r->next_free = recycled_;
    recycled_ = r;
    return e;
  }
  r->handle = h;
  return place_region(r, out, async, stream, per_thread);
}

// A new region with its memory mapped at r->base: resident, in the address map, announced.
CUresult Residency::place_region(Region* r, CUdeviceptr* out, bool async, CUstream stream,
                                 bool per_thread) {
  r->stream_ordered = async;
  resident_ += r->mapped;
  if (r->mapped != r->size) mark_fixed_rose();  // its rounding
  note_peak();
  r->streams.store(
      stream ? fast_.streams.bit(reinterpret_cast<std::uintptr_t>(stream), per_thread) : 0,
      std::memory_order_relaxed);
  transition(r, kRegionResident);
  live_.push_back(r);
  fast_.map.set(r->base, r->va_bytes, r);
  fast_.active.store(true, std::memory_order_release);
  *out = r->base;
  r->alloc_seq = fast_.seq.fetch_add(1, std::memory_order_relaxed);
  telemetry::region_alloc(r->id, r->base, r->size, r->alloc_seq, 0);
  return CUDA_SUCCESS;
}

CUresult Residency::alloc_arena(std::uint64_t estimate, ForwardAlloc forward, void* fctx,
                                CUdeviceptr* out, CUstream stream) {
  std::unique_lock<std::mutex> lock(mutex_);
  // Another context's memory, and graph memory, are the driver's: forwarded, not counted against
  // the budget.
  if (!ensure_device() || dev_.current() != ctx_ || (stream && in_capture(stream, false))) {
    std::uint64_t ignored = 0;
    return forward(fctx, out, &ignored);
  }
  // Arena memory is never evicted but counts against the budget, so room is made first. During a
  // capture nothing can be evicted; the driver answers (it refuses what the capture forbids).
  if (!gate_.capturing()) {
    CUresult e = wait_for_room(lock, estimate);
    if (e != CUDA_SUCCESS) {
      log_oom(estimate);
      return e;
    }
  }
  std::uint64_t bytes = estimate;
  CUresult e = forward(fctx, out, &bytes);
  if (e == CUDA_SUCCESS && out) {
    arena_[*out] = bytes;
    arena_bytes_ += bytes;
    mark_fixed_rose();
    note_peak();
  }
  return e;
}

void Residency::forget_arena(CUdeviceptr p) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = arena_.find(p);
  if (it == arena_.end()) return;
  arena_bytes_ -= it->second;
  arena_.erase(it);
}

CUresult Residency::free_allocation(CUdeviceptr p, CUstream stream, bool async, bool per_thread,
                                    bool* handled) {
  *handled = false;
  // On a capturing stream the driver makes the free a free node, which must name a graph
  // allocation: a region never is one. The driver answers (CUDA_ERROR_INVALID_VALUE, the capture
  // going on) and the region stays: freed here, its memory would go to other allocations at the
  // capture's end while the graph still reads it.
  if (async && in_capture(stream, per_thread)) return CUDA_SUCCESS;
  if (!async) {
    bool region = false, waits = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      Region* r = fast_.map.find(p);
      region = r && r->base == p && r->state.load() != kRegionFree;
      // cuda.h: cuMemFree of memory from cuMemAllocAsync does not synchronise.
      waits = region && !r->stream_ordered;
    }
    CUresult e = CUDA_SUCCESS;
    if (region && gate_.capturing()) {
      // cuMemFree is potentially unsafe during a capture: the driver judges this thread by the
      // capture modes, and its refusal (the capture invalidated, nothing freed) is the answer.
      // Allowed, the driver's own free waits for the context's work, as cuMemFree does.
      e = dev_.unsafe_call();
    } else if (waits) {
      e = wait_like_free();
    }
    if (e != CUDA_SUCCESS) {
      *handled = true;  // nothing freed
      return e;
    }
  }
  *handled = free_region(p, stream, async, per_thread);
  return CUDA_SUCCESS;
}

// cuMemFree of a region returns, as the driver's cuMemFree does, once the work the application
// queued before it has run: the host waits for an event on the legacy stream (which follows every
// blocking stream, per-thread default streams included) and one on each non-blocking stream the
// application made in the regions' context. Not cuCtxSynchronize, the driver's own wait: that
// would also wait for gswap's copies in flight (swap-outs, prefetches), which no work of the
// application waits for. The host waits with no lock held (a host function queued on those
// streams may call the driver, and so gswap), in relaxed capture mode (a capture begun meanwhile
// on another thread must not take gswap's wait for an unsafe call of the application's). When the
// events cannot be recorded (a capture began meanwhile, a failure) the driver's own wait is used.
CUresult Residency::wait_like_free() {
  Context ctx(*this);  // the legacy stream and the events are the regions' context's
  std::vector<Device::Event> events;
  bool capture = false, whole = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    CaptureGate::ForeignStreams held(gate_);  // no stream destroyed while it is recorded on
    capture = !held.ok();
    std::vector<CUstream> streams;
    if (!capture) streams.push_back(legacy_stream());
    for (const AppStream& s : nonblocking_)
      if (!capture && s.ctx == ctx_) streams.push_back(s.stream);
    for (CUstream s : streams) {
      Device::Event ev = nullptr;
      if (dev_.event_create(&ev, false) != CUDA_SUCCESS) {
        whole = true;
        break;
      }
      events.push_back(ev);
      if (dev_.record(ev, s) != CUDA_SUCCESS) {
        // Destroyed where gswap did not see it, or a failing driver: never recorded on again,
        // and this free waits for the whole context instead.
        forget_app_stream(s);
        whole = true;
        break;
      }
    }
  }
  CUresult e = CUDA_SUCCESS;
  if (capture) {
    e = dev_.unsafe_call();
  } else {
    unsigned mode = 0;
    dev_.relax_capture_mode(&mode);
    if (whole) e = dev_.synchronize_context();
    for (std::size_t i = 0; i < events.size() && !whole && e == CUDA_SUCCESS; ++i)
      e = dev_.synchronize(events[i]);
    dev_.restore_capture_mode(mode);
  }
  for (Device::Event ev : events) dev_.event_destroy(ev);
  return e;
}

bool Residency::free_region(CUdeviceptr p, CUstream stream, bool async, bool per_thread) {
  Region* r = fast_.map.find(p);
  if (!r) return false;
  bool is_source = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    is_source = r->base == p && r->state.load() != kRegionFree && r->dependents > 0;
  }
  // Regions registered as recomputed from this one: brought back first if dropped.
  if (is_source) release_dependents(r);
  std::lock_guard<std::mutex> lock(mutex_);
  if (r->base != p || r->state.load() == kRegionFree) return false;
  if (r->recompute) {
    r->recompute->announced = false;  // the free says it: gswapd keeps what the trace needs
    end_registration(r);
  }
  r->host_valid = false;
  fast_.map.clear(r->base, r->va_bytes);
  live_.erase(std::find(live_.begin(), live_.end(), r));
  telemetry::region_free(r->id, fast_.seq.fetch_add(1, std::memory_order_relaxed));
  // The freeing stream joins the streams the memory must wait for (stream-ordered free).
  if (async)
    r->streams.fetch_or(fast_.streams.bit(reinterpret_cast<std::uintptr_t>(stream), per_thread));
  std::uint32_t st = r->state.load();
  if (r->swapper_busy) {
    // The swapper is copying it with the mutex released: it finishes the free afterwards.
    r->free_requested = true;
    transition(r, kRegionFree);
    return true;
  }
  switch (st) {
    case kRegionHost:
      finish_free(r);
      break;
    case kRegionDropped:
      if (!r->handle) {  // nothing mapped, nothing to keep
        finish_free(r);
        break;
      }
      // Mapped for a recomputation in progress on another thread: freed as a resident region.
      transition(r, kRegionFree);
      resident_ -= r->mapped;
      freeing_ += r->mapped;
      r->free_issued = false;
      order_free(r);
      break;
    case kRegionEvicting:
      if (r->evict_issued) {
        // The copy's completion finishes the free (swapper.cpp).
        r->free_requested = true;
        transition(r, kRegionFree);
        break;
      }
      evicting_ -= r->mapped;
      resident_ += r->mapped;
      [[fallthrough]];
    default:  // resident, restoring: memory back once every stream that used it has passed
      resident_ -= r->mapped;
      freeing_ += r->mapped;
      transition(r, kRegionFree);
      r->free_issued = false;
      order_free(r);
      break;
  }
  return true;
}

// A stream-ordered free's order point is the free call itself: its memory goes back once the
// streams that used the region have passed what they had enqueued by now. (Ordered later, by the
// swapper, it would also wait for launches enqueued meanwhile: with the host ahead of the device,
// a whole lead's worth.) The swapper orders it when the streams cannot be named here.
void Residency::order_free(Region* r) {
  if (gate_.capturing() || (r->streams.load() & StreamTable::kUnknownBit)) {
    push(CommandType::kFree, r);
    return;
  }
  Context ctx(*this);  // gswap's streams and events are the regions' context's
  issue_free(r);
  wake_swapper();  // it watches the free's completion
}

// --- restores ----------------------------------------------------------------------------------

// Asks the swapper to bring back every region of `regions` that is on the host (rescuing those
// whose swap-out has not completed) and waits until each restore is issued. The caller holds
// pins on all of them, so the swapper never picks them as victims. Returns the first error.
CUresult Residency::request_restores(std::unique_lock<std::mutex>& lock, TouchSet& t) {
  std::uint64_t deadline = pin_deadline();
  bool asked = false;
  for (std::size_t i = 0; i < t.n; ++i) {
    Region* r = t.regions[i];
    std::uint32_t st = r->state.load();
    bool rescuable = st == kRegionEvicting && !r->swapper_busy && !r->handle_given;
    if (rescuable) {
      rescue(r);
    } else if (st == kRegionHost || st == kRegionEvicting || (st == kRegionDropped && !r->handle)) {
      // (A dropped region gets memory only: the caller recomputes it, see recompute.cpp.)
      bool already = false;
      for (const Wanted& w : wanted_) already = already || w.region == r;
      if (!already) wanted_.push_back({r, r->gen, deadline, fast_.seq.load()});
      r->restore_error = CUDA_SUCCESS;
      asked = true;
    }
  }
  if (!asked) return CUDA_SUCCESS;
  wake_swapper();
  for (;;) {
    bool pending = false;
    for (std::size_t i = 0; i < t.n; ++i) {
      Region* r = t.regions[i];
      if (r->restore_error != CUDA_SUCCESS) {
        CUresult e = r->restore_error;
        r->restore_error = CUDA_SUCCESS;
        return e;
      }
      std::uint32_t st = r->state.load();
      if (st == kRegionEvicting && !r->swapper_busy && !r->handle_given) rescue(r);
      st = r->state.load();
      pending = pending || st == kRegionHost || st == kRegionEvicting ||
                (st == kRegionDropped && !r->handle);
    }
    if (!pending) return CUDA_SUCCESS;
    wait_progress(lock, 5000);
  }
}

// A planned restore's back-access reached the wait path: report how it went (plan_executor.h).
// late_unknown: the host waited, so the lateness is not measured on the device.
void Residency::report_back_access(Region* r, bool late_unknown) {
  std::uint64_t tag = r->plan_tag.exchange(0, std::memory_order_relaxed);
  if (!tag) return;
  std::uint64_t gen = (tag >> 32) & 0x3fffffffull, entry = plan_tag::entry(tag);
  if (!(tag & plan_tag::kPrefetched)) {
    telemetry::lateness(gen, entry, 0, true);  // evicted by the plan, brought back on demand
    return;
  }
  if (late_unknown) telemetry::lateness(gen, entry, 0, false);
}

// Restores of t still in flight (kRestoring): the caller's stream waits on the device, or the
// host for synchronous calls and during a capture (a captured stream must not depend on an event
// recorded outside the capture). No lock: pins keep each restore event's record stable.
//
// Before a stream waits for a restore that has not landed, a timing event is recorded on it: the
// swapper later measures how long the stream stood still (device-side stall) and, for a planned
// restore, reports that lateness to gswapd. A restore that has landed by then was on time.
CUresult Residency::wait_restores(const TouchSet& t, CUstream stream, bool per_thread,
                                  bool host_wait) {
  CUstream s = (per_thread && stream == nullptr) ? CU_STREAM_PER_THREAD : stream;
  unsigned mode = 0;
  bool relaxed = false;
  CUresult e = CUDA_SUCCESS;
  for (std::size_t i = 0; i < t.n && e == CUDA_SUCCESS; ++i) {
    Region* r = t.regions[i];
    if (r->state.load(std::memory_order_acquire) != kRegionRestoring) continue;
    std::uint64_t tag = r->plan_tag.load(std::memory_order_relaxed);
    if (host_wait) {
      // A host wait on gswap's own event is no part of any graph: never let it count against a
      // capture on another thread.
      if (!relaxed) dev_.relax_capture_mode(&mode);
      relaxed = true;
      e = dev_.synchronize(r->restore_event);
      if (tag) report_back_access(r, true);
      continue;
    }
    Device::Event back = nullptr;
    if (dev_.query(r->restore_event) != CUDA_SUCCESS) back = timings_.take();
    if (back && dev_.record(back, s) == CUDA_SUCCESS) {
      // Measured by the swapper once both events are done; a planned restore's lateness goes
      // with it.
      bool planned = (tag & plan_tag::kPrefetched) != 0;
      if (planned) r->plan_tag.store(0, std::memory_order_relaxed);
      timings_.push_wait(r, r->restores_issued, back, planned ? tag : 0);
      if (tag && !planned) report_back_access(r, true);
    } else {
      timings_.give_back(back);
      if (tag) report_back_access(r, true);  // landed in time (or not measurable)
    }
    e = dev_.wait(s, r->restore_event);
  }
  if (relaxed) dev_.restore_capture_mode(mode);
  return e;
}

bool Residency::plan_evict(Region* r, std::uint64_t id, std::uint64_t tag) {
  Command c{CommandType::kPlanEvict, r, 0, id, tag};
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  // Queued for the swapper when the mutex is busy; during a capture (nothing may leave: it begins
  // when the capture ends); and behind commands still queued (a prefetch this access asked for
  // among them), to keep their order.
  if (!lock.owns_lock() || !may_evict_now() || !queue_.empty() || !overflow_.empty())
    return queue_.push(c);
  if (!begin_planned(c)) return false;  // begun: r is evicting, its copy not issued yet
  order_evict_now(r);
  return true;
}

// A swap-out begun by the thread that enqueued its planned access: its order point is taken now,
// on the order stream (what the region's streams have enqueued so far), as r's used event; the
// swapper issues the copy later, after that event and after any use since. Taken by the swapper
// alone, the order point would also cover every launch the host enqueued meanwhile: with the host
// ahead of the device, the copy, and the memory it gives back, would come that much later. (On
// the evict stream itself, the wait would hold back the copies of swap-outs begun before it.)
// Skipped, leaving it all to the swapper, when the gate is held exclusively or a capture is on,
// and while a restore of the region is not seen complete: the point would wait for that copy, and
// every order point after it on the order stream with it.
void Residency::order_evict_now(Region* r) {
  if (r->restore_pending) return;
  CaptureGate::ForeignStreams foreign(gate_, std::try_to_lock);
  if (!foreign.ok()) return;
  Context ctx(*this);
  std::uint64_t mask = 0;
  if (!order_after_users(foreign, r, order_stream_, &mask)) return;
  if ((!r->used_event && dev_.event_create(&r->used_event, false) != CUDA_SUCCESS) ||
      dev_.record(r->used_event, order_stream_) != CUDA_SUCCESS) {
    r->streams.fetch_or(mask);  // no mark: the swapper takes those streams again
    return;
  }
  r->used_pending = true;
}

bool Residency::plan_prefetch(Region* r, std::uint64_t id, std::uint64_t tag, std::uint64_t due) {
  // The trigger's call number rides in gen, which a prefetch does not use otherwise.
  return queue_.push(Command{CommandType::kPrefetch, r, fast_.seq.load(std::memory_order_relaxed),
                             id, tag, due, asks_.fetch_add(1, std::memory_order_relaxed) + 1});
}

Region* Residency::find_by_id(std::uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Region* r : live_)
    if (r->id == id) return r;
  return nullptr;
}

std::uint64_t Residency::touched_bytes(const TouchSet& t) const {
  std::uint64_t need = 0;
  for (std::size_t i = 0; i < t.n; ++i)
    if (t.regions[i]->state.load() != kRegionFree) need += t.regions[i]->mapped;
  return need;
}

bool Residency::can_never_fit(const TouchSet& t, std::uint64_t touched) const {
  // During a capture memory may go over the budget (make_room), and a call whose regions are all
  // on the device restores nothing (the budget may just have been lowered): neither is refused.
  if (gate_.capturing()) return false;
  bool absent = false;
  for (std::size_t i = 0; i < t.n && !absent; ++i) {
    const std::uint32_t st = t.regions[i]->state.load();
    absent = st != kRegionResident && st != kRegionFree;
  }
  const std::uint64_t b = budget();
  return absent && (touched > b || arena_bytes_ > b - touched);
}

CUresult Residency::prepare(TouchSet& t, CUstream stream, bool per_thread, bool sync) {
  RestorerLock one_restorer(*this);
  std::uint64_t t0 = monotonic_ns();
  std::unique_lock<std::mutex> lock(mutex_);
  Context ctx(*this);
  if (const std::uint64_t need = touched_bytes(t); can_never_fit(t, need)) {
    log_oom(need);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  // Pin first: while this call waits for room, nobody may evict what it already made resident.
  for (std::size_t i = 0; i < t.n; ++i) t.regions[i]->pins.fetch_add(1, std::memory_order_seq_cst);
  bool restoring = false;
  // Dropped regions are recomputed on the access's stream first; during a capture on gswap's
  // restore stream (a captured stream must not take gswap's work into its graph: the host waits
  // below instead). A region whose drop was in flight may be dropped once the restores are asked
  // for: round again.
  CUstream rs =
      gate_.capturing() ? restore_stream_ : (per_thread && !stream ? CU_STREAM_PER_THREAD : stream);
  CUresult e = CUDA_SUCCESS;
  for (;;) {
    settle_drops_in_flight(lock, t);
    e = recompute_dropped(lock, t, rs);
    if (e == CUDA_SUCCESS) e = request_restores(lock, t);
    bool again = false;
    for (std::size_t i = 0; i < t.n && e == CUDA_SUCCESS; ++i)
      again = again || t.regions[i]->state.load() == kRegionDropped;
    if (!again || in_recompute()) break;
  }
  for (std::size_t i = 0; i < t.n && e == CUDA_SUCCESS; ++i)
    restoring = restoring || t.regions[i]->state.load() == kRegionRestoring;
  if (e != CUDA_SUCCESS) {
    for (std::size_t i = 0; i < t.n; ++i)
      t.regions[i]->pins.fetch_sub(1, std::memory_order_release);
    if (e == CUDA_ERROR_OUT_OF_MEMORY) log_oom(touched_bytes(t));
    return e;
  }
  bool capturing = gate_.capturing();
  lock.unlock();
  if (restoring && !cfg_.debug_skip_restore) {
    e = wait_restores(t, stream, per_thread, sync || capturing);
    if (e != CUDA_SUCCESS) {
      for (std::size_t i = 0; i < t.n; ++i)
        t.regions[i]->pins.fetch_sub(1, std::memory_order_release);
      return e;
    }
  }
  if (restoring) {
    std::uint64_t t1 = monotonic_ns();
    timeline::host_wait("restores", t0, t1);
    lock.lock();
    count_stall(t1 - t0, t0);
  }
  return CUDA_SUCCESS;
}

CUresult Residency::keep_resident(TouchSet& t, bool for_capture) {
  if (!device_ready()) return CUDA_SUCCESS;
  RestorerLock one_restorer(*this);
  std::unique_lock<std::mutex> lock(mutex_);
  Context ctx(*this);
  if (const std::uint64_t need = touched_bytes(t); !for_capture && can_never_fit(t, need)) {
    log_oom(need);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  unsigned mode = 0;
  dev_.relax_capture_mode(&mode);  // the caller may be capturing: gswap's own work is not captured
  for (std::size_t i = 0; i < t.n; ++i) t.regions[i]->pins.fetch_add(1, std::memory_order_seq_cst);
  CUresult e = CUDA_SUCCESS;
  for (;;) {
    settle_drops_in_flight(lock, t);
    e = recompute_dropped(lock, t, restore_stream_);  // gswap's own stream: never captured
    if (e == CUDA_SUCCESS) e = request_restores(lock, t);
    bool again = false;
    for (std::size_t i = 0; i < t.n && e == CUDA_SUCCESS; ++i)
      again = again || t.regions[i]->state.load() == kRegionDropped;
    // From a recomputation callback, the region being recomputed stays dropped until the
    // callback returns (as in prepare).
    if (!again || in_recompute()) break;
  }
  if (e == CUDA_SUCCESS && !cfg_.debug_skip_restore) {
    lock.unlock();
    e = wait_restores(t, nullptr, false, true);  // the host waits: see wait_restores
    lock.lock();
  }
  if (e == CUDA_SUCCESS) {
    for (std::size_t i = 0; i < t.n; ++i) {
      Region* r = t.regions[i];
      if (r->state.load() == kRegionRestoring) {
        r->restore_pending = false;  // the host waited for it
        transition(r, kRegionResident);
        if (r->d2h_in_flight == 0) host_.release(&r->host, monotonic_ns());
      }
      if (r->state.load() == kRegionFree) continue;
      if (!for_capture) {
        r->must_stay = true;
        mark_fixed_rose();
      } else if (r->capture_period != capture_period_ + 1) {
        // Held while the capture is open (capture_end lets go once no capture is on).
        r->capture_period = capture_period_ + 1;
        ++r->graph_holds;
        captured_.push_back(r->id);
      }
    }
  } else if (e == CUDA_ERROR_OUT_OF_MEMORY) {
    log_oom(touched_bytes(t));
  }
  for (std::size_t i = 0; i < t.n; ++i) t.regions[i]->pins.fetch_sub(1, std::memory_order_release);
  dev_.restore_capture_mode(mode);
  return e;
}

CUresult Residency::keep_all_resident(const char* why) {
  if (!device_ready() || !fast_.active.load()) return CUDA_SUCCESS;
  // Once everything stays, regions created later stay too (new_region) and are born resident:
  // graph replays then cost one load.
  if (fast_.all_stay.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  std::vector<Region*> all, already;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    all = live_;
    for (Region* r : live_)
      if (r->must_stay) already.push_back(r);
  }
  // In batches of a TouchSet: each batch is pinned and restored; if one fails, the marks this
  // call set are taken back, so a failure leaves nothing half kept.
  TouchSet t;
  std::vector<Region*> kept;
  for (std::size_t i = 0; i < all.size(); i += TouchSet::kCapacity) {
    t.n = 0;
    for (std::size_t k = i; k < std::min(all.size(), i + TouchSet::kCapacity); ++k) t.add(all[k]);
    CUresult e = keep_resident(t);
    if (e != CUDA_SUCCESS) {
      std::lock_guard<std::mutex> lock(mutex_);
      for (Region* r : kept)
        if (std::find(already.begin(), already.end(), r) == already.end()) r->must_stay = false;
      return e;
    }
    kept.insert(kept.end(), t.regions, t.regions + t.n);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (!untrackable_seen_)
    GSWAP_LOG(kWarn, "%s: every allocation now stays resident (accesses cannot be seen)", why);
  untrackable_seen_ = true;
  for (Region* r : live_) r->must_stay = true;  // and those allocated meanwhile
  mark_fixed_rose();
  fast_.all_stay.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

bool Residency::name_region(std::uint64_t ptr, const char* name) {
  Region* r = fast_.map.find(ptr);
  if (!r) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  if (r->state.load() == kRegionFree || ptr < r->base || ptr >= r->base + r->size) return false;
  // A name cut to fit is cut before a character the cut would split (UTF-8).
  const std::size_t room = sizeof r->name - 1;
  const std::size_t keep = proto::utf8_prefix(reinterpret_cast<const unsigned char*>(name),
                                              ::strnlen(name, room + 4), room);
  std::memcpy(r->name, name, keep);
  r->name[keep] = '\0';
  telemetry::region_name(r->id, r->name);
  return true;
}

// --- streams, captures, budget ----------------------------------------------------------------

void Residency::stream_created(CUstream stream, unsigned flags) {
  if (!(flags & CU_STREAM_NON_BLOCKING)) return;  // the legacy stream follows it
  CUcontext ctx = dev_.current();
  std::lock_guard<std::mutex> lock(mutex_);
  nonblocking_.push_back({stream, ctx});
}

void Residency::forget_app_stream(CUstream stream) {
  nonblocking_.erase(std::remove_if(nonblocking_.begin(), nonblocking_.end(),
                                    [&](const AppStream& a) { return a.stream == stream; }),
                     nonblocking_.end());
}

CUcontext Residency::stream_destroyed(CUstream stream) {
  CUcontext tracked = nullptr;
  {
    // Before the real destroy: a synchronous free records on the streams listed here.
    std::lock_guard<std::mutex> lock(mutex_);
    for (const AppStream& a : nonblocking_)
      if (a.stream == stream) tracked = a.ctx;
    forget_app_stream(stream);
  }
  if (!device_ready() || !stream) return tracked;
  auto exclusive = gate_.exclusive();  // no swapper record on this handle from here on
  Context ctx(*this);
  bool capturing = false;
  if (gate_.capturing()) dev_.is_capturing(stream, &capturing);
  if (!capturing) {
    // Work already queued on the stream still runs after destroy: order later swap-outs (on the
    // evict stream, FIFO), frees and order points (on the order stream, FIFO; a free behind a copy
    // of its own goes on the evict stream) after it before the stream's slot is forgotten.
    Device::Event ev = nullptr;
    if (dev_.event_create(&ev, false) == CUDA_SUCCESS) {
      if (dev_.record(ev, stream) == CUDA_SUCCESS) {
        dev_.wait(evict_stream_, ev);
        dev_.wait(order_stream_, ev);
      }
      dev_.event_destroy(ev);
    }
  }
  fast_.streams.release(reinterpret_cast<std::uintptr_t>(stream));
  return tracked;
}

void Residency::stream_destroy_failed(CUstream stream, CUcontext tracked) {
  if (!tracked) return;  // not a non-blocking stream of the application's: nothing forgotten
  std::lock_guard<std::mutex> lock(mutex_);
  nonblocking_.push_back({stream, tracked});
}

void Residency::capture_begin() {
  gate_.begin_capture();
}

void Residency::capture_aborted() {
  capture_end();
}

void Residency::capture_end() {
  if (gate_.end_capture()) {
    // No capture is on: the holds of the open captures go; graphs keep their own.
    std::unique_lock<std::mutex> lock(mutex_);
    release_held(captured_);
    captured_.clear();
    ++capture_period_;
    // The budget holds again once the last capture has ended: what went above it leaves before
    // this returns (a bounded wait: a swap-out behind a stream that waits for the host is left to
    // the swapper), so the program's next calls see the budget, not the excess.
    std::uint64_t deadline = monotonic_ns() + kCaptureSettleNs;
    while (device_ready()) {
      enforce_budget();
      if (used() <= budget() || evicting_ + freeing_ == 0 || monotonic_ns() >= deadline) break;
      wait_progress(lock, 1000);
    }
    lock.unlock();
    wake_swapper();  // deferred frees, and the budget again
  }
}

std::vector<std::uint64_t> Residency::take_captured() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (Region* r : live_)
    if (r->capture_period == capture_period_ + 1) ++r->graph_holds;
  mark_fixed_rose();
  return captured_;
}

void Residency::release_graph(const std::vector<std::uint64_t>& ids) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    release_held(ids);
  }
  wake_swapper();  // what stayed for the graph may leave now (the budget again)
}

// Mutex held. Regions freed since are gone from live_ (and ids are never reused).
void Residency::release_held(const std::vector<std::uint64_t>& ids) {
  if (ids.empty()) return;
  std::unordered_set<std::uint64_t> set(ids.begin(), ids.end());
  for (Region* r : live_)
    if (r->graph_holds && set.count(r->id)) --r->graph_holds;
}

void Residency::set_budget(std::uint64_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::uint64_t b = cfg_.physical_total ? std::min(bytes, cfg_.physical_total) : bytes;
  char x[32];
  GSWAP_LOG(kInfo, "new budget %s", format_bytes(b, x, 32));
  budget_.store(b, std::memory_order_relaxed);
  budget_is_share_.store(b < cfg_.budget, std::memory_order_relaxed);
  wake_swapper();  // the swapper evicts down to it (enforce_budget)
}

void Residency::for_each_live(void (*first)(void* ctx), void (*fn)(const Region& r, void* ctx),
                              void* ctx) {
  std::lock_guard<std::mutex> lock(mutex_);
  first(ctx);
  for (Region* r : live_) fn(*r, ctx);
}

bool Residency::memory_info(std::uint64_t* free, std::uint64_t* total) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Another context (another device) is the driver's to answer, as for its allocations. Before
  // the first region, the budget is device 0's (the one it was resolved against), as
  // cuDeviceTotalMem answers it (budget_total).
  if (device_ready() ? dev_.current() != ctx_ : dev_.ordinal() != 0) return false;
  std::uint64_t b = budget();
  std::uint64_t t = cfg_.physical_total ? std::min(b, cfg_.physical_total) : b;
  // Pooled handles are free to the application, and so is memory whose stream-ordered free is
  // on its way back (an allocation needing it waits for it, as for any swap-out in flight).
  std::uint64_t in_use = used() - pooled_ - freeing_;
  *total = t;
  *free = in_use >= t ? 0 : t - in_use;
  return true;
}

ResidencyStats Residency::stats() {
  std::lock_guard<std::mutex> lock(mutex_);
  ResidencyStats s;
  s.budget = budget();
  s.used = used();
  s.resident = resident_;
  s.evicting = evicting_;
  s.freeing = freeing_;
  s.pooled = pooled_;
  s.arena = arena_bytes_;
  s.pinned = host_.pinned_bytes();
  s.peak = peak_;
  s.swapped_out = swapped_out_;
  s.swapped_in = swapped_in_;
  s.evictions = evictions_;
  s.restores = restores_;
  s.stalls = stalls_;
  s.stall_ns = stall_ns_;
  s.oom = oom_;
  s.swap_errors = swap_errors_;
  s.regions = live_.size();
  s.capture_overshoot = capture_overshoot_;
  s.planned_evictions = planned_evictions_;
  s.prefetches = prefetches_;
  s.late_restores = late_restores_.load(std::memory_order_relaxed);
  s.device_stall_ns = device_stall_ns_.load(std::memory_order_relaxed);
  s.h2d_bytes_per_s = timings_.h2d_bytes_per_s();
  s.d2h_bytes_per_s = timings_.d2h_bytes_per_s();
  s.planned_drops = planned_drops_;
  s.recomputes = recomputes_;
  s.recomputed_bytes = recomputed_bytes_;
  s.recompute_ns = recompute_ns_.load(std::memory_order_relaxed);
  s.recompute_failures = recompute_failures_;
  // What gswapd cannot plan with: the arena and regions that must stay, and the rounding of
  // the other regions that hold device memory. A trace gives each region the size the program
  // asked for, while it holds that rounded up to the granularity (2.25 MiB holds 4 MiB: three
  // quarters of PyTorch ResNet-50's regions under the cudaMallocAsync backend are not whole
  // granules), and a plan of the asked sizes would overrun the budget by the difference.
  s.fixed = arena_bytes_;
  for (const Region* r : live_) {
    if (r->fixed()) {
      s.fixed += r->mapped;
      continue;
    }
    const std::uint32_t st = r->state.load(std::memory_order_relaxed);
    if (st != kRegionHost && st != kRegionFree) s.fixed += r->mapped - r->size;
  }
  return s;
}

}  // namespace gswap::interpose
