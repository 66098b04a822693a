// residency.cpp: regions on CUDA VMM, the budget, eviction and restore (see residency.h for the
// thread and lock rules).
//
// Accounting: "used" is every byte of physical device memory gswap holds or has handed out:
// resident regions, regions whose swap-out is still in flight, freed regions whose streams have
// not passed the free yet, the handle pool and the arena. used <= budget always holds after a
// slow path returns; the handle pool is reported as free to the application.
#include "interpose/residency.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

#include "interpose/check.h"
#include "interpose/config.h"
#include "interpose/driver.h"
#include "interpose/frameworks.h"
#include "interpose/log.h"
#include "interpose/telemetry.h"
#include "interpose/va_space.h"

namespace gswap::interpose {
namespace {

std::uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

std::uint64_t round_up(std::uint64_t v, std::uint64_t a) {
  return (v + a - 1) / a * a;
}

struct Pending {
  Region* region;
  bool is_free;  // a stream-ordered free (else a swap-out)
};

struct State {
  std::mutex mutex;
  // Serialises the calls that pin regions and then may wait for memory (restores): if two of
  // them held pins while waiting, each could block the other's eviction into a false OOM.
  // Lock order: restore_mutex, then mutex.
  std::mutex restore_mutex;
  bool inited = false;
  CUresult init_result = CUDA_SUCCESS;
  Config config;
  pid_t owner_pid = 0;

  // Device (set by the first region allocation, which needs a current context).
  bool device_ready = false;
  bool device_failed = false;
  CUcontext ctx = nullptr;
  CUdevice device = 0;
  std::uint64_t physical_total = 0;
  std::uint64_t budget = 0;
  std::uint64_t granularity = 0;
  std::uint64_t threshold = 0;
  CUdeviceptr va_base = 0;
  std::uint64_t va_span = 0;
  CUstream evict_stream = nullptr;
  CUstream restore_stream = nullptr;
  CUevent slot_events[64] = {};

  VaSpace va;  // free addresses inside the reservation

  // Regions.
  std::vector<Region*> live;  // allocated and not freed
  Region* recycled = nullptr;
  std::uint64_t next_region_id = 1;
  std::vector<Pending> pending;  // swap-outs and frees in flight, in stream order
  std::vector<std::pair<CUmemGenericAllocationHandle, std::uint64_t>> handle_pool;
  std::vector<std::pair<void*, std::uint64_t>> pinned_pool;
  std::unordered_map<CUdeviceptr, std::uint64_t> arena;

  // Staging ring for swaps above the pinned cap: two pinned halves, each with its event.
  void* staging = nullptr;
  CUevent staging_events[2] = {};
  bool staging_busy[2] = {};

  bool untrackable_seen = false;

  // The reclaim thread (started with the first swap-out or free): waits for the earliest pending
  // event outside the mutex, reclaims, and wakes allocations waiting for memory.
  pthread_t helper{};
  bool helper_running = false;
  bool stopping = false;
  std::condition_variable work_cv;  // pending work appeared, or stop
  std::condition_variable done_cv;  // something was reclaimed

  // Bytes.
  std::uint64_t resident = 0, evicting = 0, freeing = 0, pooled = 0, arena_bytes = 0;
  std::uint64_t pinned = 0;
  std::uint64_t peak = 0;
  std::uint64_t swapped_out = 0, swapped_in = 0;
  std::uint64_t stalls = 0, stall_ns = 0;
  std::uint64_t oom_count = 0;

  std::uint64_t used() const { return resident + evicting + freeing + pooled + arena_bytes; }
};

// Never destroyed: hooks may run from other libraries' destructors after ours.
alignas(State) unsigned char g_state_storage[sizeof(State)];
State* g = nullptr;
FastState* g_fast = nullptr;
alignas(FastState) unsigned char g_fast_storage[sizeof(FastState)];

const Real& R() {
  return real();
}

void note_peak() {
  g->peak = std::max(g->peak, g->used());
}

telemetry::Counters counters() {
  telemetry::Counters c;
  c.budget = g->budget;
  c.resident = g->used();
  c.peak_resident = g->peak;
  c.swapped_out = g->swapped_out;
  c.swapped_in = g->swapped_in;
  c.stalls = g->stalls;
  c.stall_ns = g->stall_ns;
  c.pinned = g->pinned;
  c.regions = g->live.size();
  c.launches = g_fast->launches.load(std::memory_order_relaxed);
  return c;
}

// Pushes the context gswap's device work belongs to when the calling thread has another or none
// (fact 9: worker threads may have no current context).
class ScopedContext {
 public:
  ScopedContext() {
    if (!g->ctx) return;
    CUcontext cur = nullptr;
    R().cuCtxGetCurrent(&cur);
    if (cur != g->ctx && R().cuCtxPushCurrent_v2(g->ctx) == CUDA_SUCCESS) pushed_ = true;
  }
  ~ScopedContext() {
    CUcontext popped;
    if (pushed_) R().cuCtxPopCurrent_v2(&popped);
  }

 private:
  bool pushed_ = false;
};

// Host waits inside one slow-path call; that call counts once as a stall (see StallScope).
thread_local std::uint64_t t_waited_ns = 0;
thread_local bool t_in_scope = false;

void wait_event(CUevent ev) {
  std::uint64_t t0 = now_ns();
  R().cuEventSynchronize(ev);
  std::uint64_t dt = now_ns() - t0;
  if (t_in_scope) {
    t_waited_ns += dt;
    return;
  }
  g->stalls++;
  g->stall_ns += dt;
  telemetry::stall(g_fast->seq.load(std::memory_order_relaxed), dt);
}

// A slow-path call that may make the application wait: counted as one stall when it restored
// something or waited for the host, with its whole duration.
class StallScope {
 public:
  StallScope() : t0_(now_ns()) {
    t_in_scope = true;
    t_waited_ns = 0;
  }
  void restored() { restored_ = true; }
  ~StallScope() {
    t_in_scope = false;
    if (!restored_ && t_waited_ns == 0) return;
    std::uint64_t dt = now_ns() - t0_;
    g->stalls++;
    g->stall_ns += dt;
    telemetry::stall(g_fast->seq.load(std::memory_order_relaxed), dt);
  }

 private:
  std::uint64_t t0_;
  bool restored_ = false;
};

// The residency mutex as held by a slow path that may wait for memory: make_room() releases it
// while it waits for the reclaim thread, so other threads' slow paths go on meanwhile.
thread_local std::unique_lock<std::mutex>* t_lock = nullptr;
class SlowLock {
 public:
  SlowLock() : lock_(g->mutex), prev_(t_lock) { t_lock = &lock_; }
  ~SlowLock() { t_lock = prev_; }

 private:
  std::unique_lock<std::mutex> lock_;
  std::unique_lock<std::mutex>* prev_;
};

// --- summary, fork -------------------------------------------------------------------------

void print_summary() {
  if (!g || !g->inited || g->owner_pid != ::getpid() || !g->config.summary) return;
  if (!g->device_ready) return;
  char a[32], b[32], c[32], d[32];
  char line[320];
  int n = std::snprintf(
      line, sizeof line,
      "gswap summary: peak_resident=%llu (%s) budget=%llu (%s) swapped_out=%llu (%s) "
      "swapped_in=%llu (%s) stalls=%llu stall_ms=%.1f oom=%llu\n",
      (unsigned long long)g->peak, format_bytes(g->peak, a, 32), (unsigned long long)g->budget,
      format_bytes(g->budget, b, 32), (unsigned long long)g->swapped_out,
      format_bytes(g->swapped_out, c, 32), (unsigned long long)g->swapped_in,
      format_bytes(g->swapped_in, d, 32), (unsigned long long)g->stalls, g->stall_ns / 1e6,
      (unsigned long long)g->oom_count);
  if (n > 0) {
    ssize_t w = ::write(2, line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
    (void)w;
  }
}

void stop_helper() {
  if (!g || !g->helper_running) return;
  {
    std::lock_guard<std::mutex> lock(g->mutex);
    g->stopping = true;
    g->work_cv.notify_all();
  }
  pthread_join(g->helper, nullptr);
  g->helper_running = false;
}

void at_exit() {
  // The reclaim thread may be inside the driver: let it finish before the driver's own
  // destructors run (they run after this handler, which was registered after the driver loaded).
  if (g && g->owner_pid == ::getpid()) stop_helper();
  print_summary();
  telemetry::stop();
}

void fork_prepare() {
  g->mutex.lock();
}
void fork_parent() {
  g->mutex.unlock();
}
void fork_child() {
  // The child has one thread and no usable CUDA state of its parent's (CUDA does not survive
  // fork). Start over: a child that uses CUDA initialises again on its own cuInit.
  g->mutex.unlock();
  Config cfg = g->config;
  // Not destroyed: its condition variables may still count the parent's reclaim thread as a
  // waiter, and destroying them would block. The old state's memory is simply left behind.
  g = new (g_state_storage) State();
  g->config = cfg;
  g_fast->active.store(false);
  g_fast->map.reset();
  g_fast->streams.reset();
  g_fast->capturing.store(0);
  g_fast->all_stay.store(false);
  telemetry::after_fork_child();
}

// --- device set-up -----------------------------------------------------------------------

bool ensure_device() {
  if (g->device_ready) return true;
  if (g->device_failed) return false;
  CUcontext ctx = nullptr;
  if (R().cuCtxGetCurrent(&ctx) != CUDA_SUCCESS || !ctx) return false;  // try again later
  CUdevice dev = 0;
  if (R().cuCtxGetDevice(&dev) != CUDA_SUCCESS) return false;
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  if (R().cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
          CUDA_SUCCESS ||
      gran == 0 || (gran & (gran - 1)) != 0) {
    GSWAP_LOG(kWarn, "VMM granularity unavailable: nothing will be swappable");
    g->device_failed = true;
    return false;
  }
  // One reservation for every region: addresses stay put and the launch-path lookup is a table
  // index (region_map.h). Four times the device leaves room for oversubscription.
  std::uint64_t span = round_up(std::max<std::uint64_t>(64ull << 30, 4 * g->physical_total), gran);
  CUdeviceptr base = 0;
  while (span >= 2 * gran && R().cuMemAddressReserve(&base, span, gran, 0, 0) != CUDA_SUCCESS)
    span /= 2;
  if (!base) {
    GSWAP_LOG(kWarn, "cannot reserve device address space: nothing will be swappable");
    g->device_failed = true;
    return false;
  }
  unsigned shift = static_cast<unsigned>(__builtin_ctzll(gran));
  if (!g_fast->map.init(base, span, shift)) {
    g->device_failed = true;
    return false;
  }
  if (R().cuStreamCreate(&g->evict_stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
      R().cuStreamCreate(&g->restore_stream, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) {
    g->device_failed = true;
    return false;
  }
  g->ctx = ctx;
  g->device = dev;
  g->granularity = gran;
  g->threshold = g->config.swap_threshold.bytes ? g->config.swap_threshold.bytes : gran;
  g->va_base = base;
  g->va_span = span;
  g->va.init(base, span);
  g->device_ready = true;
  char a[32], b[32];
  GSWAP_LOG(kInfo, "device %d: budget %s of %s, granularity %llu, threshold %llu", dev,
            format_bytes(g->budget, a, 32), format_bytes(g->physical_total, b, 32),
            (unsigned long long)gran, (unsigned long long)g->threshold);
  return true;
}

// --- host buffers --------------------------------------------------------------------------

void host_acquire(Region* r) {
  if (r->host) return;
  for (auto it = g->pinned_pool.begin(); it != g->pinned_pool.end(); ++it) {
    if (it->second == r->mapped) {
      r->host = it->first;
      r->host_pinned = true;
      g->pinned_pool.erase(it);
      return;
    }
  }
  if (g->pinned + r->mapped <= g->config.pinned_cap) {
    void* p = nullptr;
    if (R().cuMemAllocHost_v2(&p, r->mapped) == CUDA_SUCCESS) {
      r->host = p;
      r->host_pinned = true;
      g->pinned += r->mapped;
      return;
    }
  }
  // Above the cap: ordinary pageable memory, reached through the staging ring.
  void* p = ::mmap(nullptr, r->mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  GSWAP_CHECK(p != MAP_FAILED);
  r->host = p;
  r->host_pinned = false;
}

void host_release(Region* r) {
  if (!r->host) return;
  if (r->host_pinned) {
    g->pinned_pool.emplace_back(r->host, r->mapped);  // stays pinned and counted, for reuse
  } else {
    ::munmap(r->host, r->mapped);
  }
  r->host = nullptr;
}

bool ensure_staging() {
  if (g->staging) return true;
  if (R().cuMemAllocHost_v2(&g->staging, g->config.staging_bytes) != CUDA_SUCCESS) return false;
  g->pinned += g->config.staging_bytes;
  for (auto& e : g->staging_events) R().cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
  return true;
}

// Pageable host <-> device through the two halves of the pinned ring, so one half's DMA overlaps
// the other's memcpy. The host waits here: only swaps above the pinned cap take this path.
void staged_d2h(void* host, CUdeviceptr src, std::uint64_t bytes, CUstream stream) {
  GSWAP_CHECK(ensure_staging());
  std::uint64_t half = g->config.staging_bytes / 2;
  std::uint64_t off[2] = {0, 0}, len[2] = {0, 0};
  auto drain = [&](int s) {
    if (!g->staging_busy[s]) return;
    wait_event(g->staging_events[s]);
    if (len[s])
      std::memcpy(static_cast<char*>(host) + off[s], static_cast<char*>(g->staging) + s * half,
                  len[s]);
    len[s] = 0;
    g->staging_busy[s] = false;
  };
  int s = 0;
  for (std::uint64_t o = 0; o < bytes; o += half, s ^= 1) {
    drain(s);
    std::uint64_t n = std::min(half, bytes - o);
    R().cuMemcpyDtoHAsync_v2(static_cast<char*>(g->staging) + s * half, src + o, n, stream);
    R().cuEventRecord(g->staging_events[s], stream);
    g->staging_busy[s] = true;
    off[s] = o;
    len[s] = n;
  }
  drain(0);
  drain(1);
}

void staged_h2d(CUdeviceptr dst, const void* host, std::uint64_t bytes, CUstream stream) {
  GSWAP_CHECK(ensure_staging());
  std::uint64_t half = g->config.staging_bytes / 2;
  int s = 0;
  for (std::uint64_t o = 0; o < bytes; o += half, s ^= 1) {
    if (g->staging_busy[s]) wait_event(g->staging_events[s]);
    std::uint64_t n = std::min(half, bytes - o);
    std::memcpy(static_cast<char*>(g->staging) + s * half, static_cast<const char*>(host) + o, n);
    R().cuMemcpyHtoDAsync_v2(dst + o, static_cast<char*>(g->staging) + s * half, n, stream);
    R().cuEventRecord(g->staging_events[s], stream);
    g->staging_busy[s] = true;
  }
}

// --- physical memory ------------------------------------------------------------------------

bool map_physical(Region* r, CUmemGenericAllocationHandle h) {
  if (R().cuMemMap(r->base, r->mapped, 0, h, 0) != CUDA_SUCCESS) return false;
  CUmemAccessDesc access = {};
  access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  access.location.id = g->device;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (R().cuMemSetAccess(r->base, r->mapped, &access, 1) != CUDA_SUCCESS) {
    R().cuMemUnmap(r->base, r->mapped);
    return false;
  }
  r->handle = h;
  return true;
}

void unmap_to_pool(Region* r) {
  if (r->handle) {
    R().cuMemUnmap(r->base, r->mapped);
    g->handle_pool.emplace_back(r->handle, r->mapped);
    g->pooled += r->mapped;
  }
  r->handle = 0;
}

Region* new_region() {
  Region* r = g->recycled;
  if (r) {
    g->recycled = r->next_free;
  } else {
    r = new Region();
  }
  r->next_free = nullptr;
  r->id = g->next_region_id++;
  r->pins.store(0);
  r->restore_pending.store(0);
  r->streams.store(0);
  r->last_use.store(g_fast->seq.load(std::memory_order_relaxed));
  r->handle = 0;
  r->host = nullptr;
  r->must_stay = g->untrackable_seen;
  r->free_requested = false;
  return r;
}

void recycle(Region* r) {
  r->state.store(kRegionFree);
  r->next_free = g->recycled;
  g->recycled = r;
}

void finish_free(Region* r) {
  host_release(r);
  g->va.release(r->base, r->mapped);
  recycle(r);
}

void reclaim();

void* helper_main(void*) {
  CUcontext popped = nullptr;
  bool pushed = g->ctx && R().cuCtxPushCurrent_v2(g->ctx) == CUDA_SUCCESS;
  std::unique_lock<std::mutex> lock(g->mutex);
  std::uint64_t last_publish = 0;
  while (!g->stopping) {
    // Nothing to do, or a stream capture is on (fact 8: no synchronisation from any thread).
    std::uint64_t now = now_ns();
    if (now - last_publish >= 1000000000ull) {  // telemetry.h: at least once a second
      telemetry::publish_counters(counters());
      last_publish = now;
    }
    if (g->pending.empty() || g_fast->capturing.load() > 0) {
      g->work_cv.wait_for(lock, std::chrono::milliseconds(20));
      continue;
    }
    CUevent ev = static_cast<CUevent>(g->pending.front().region->evict_event);
    lock.unlock();
    R().cuEventSynchronize(ev);  // events are never destroyed, so this handle stays valid
    lock.lock();
    reclaim();
    g->done_cv.notify_all();
  }
  lock.unlock();
  if (pushed) R().cuCtxPopCurrent_v2(&popped);
  return nullptr;
}

// Starts the reclaim thread on first need; without it (pthread_create failed) waits happen in the
// allocating thread instead.
void wake_helper() {
  if (!g->helper_running && !g->stopping) {
    g->helper_running = pthread_create(&g->helper, nullptr, helper_main, nullptr) == 0;
  }
  g->work_cv.notify_one();
}

// Completes the swap-outs and frees whose events have passed. They complete in stream order, so
// the scan stops at the first one still in flight unless `all` asks for a full pass.
void reclaim() {
  std::size_t done = 0;
  for (; done < g->pending.size(); ++done) {
    Pending& p = g->pending[done];
    if (R().cuEventQuery(static_cast<CUevent>(p.region->evict_event)) != CUDA_SUCCESS) break;
    Region* r = p.region;
    if (p.is_free) {
      g->freeing -= r->mapped;
      unmap_to_pool(r);
      finish_free(r);
    } else {
      g->evicting -= r->mapped;
      unmap_to_pool(r);
      r->state.store(kRegionEvicted);
      if (r->free_requested) finish_free(r);
    }
  }
  if (done) g->pending.erase(g->pending.begin(), g->pending.begin() + static_cast<long>(done));
}

bool in_set(const TouchSet* t, Region* r) {
  if (!t) return false;
  for (std::size_t i = 0; i < t->n; ++i)
    if (t->regions[i] == r) return true;
  return false;
}

Region* pick_victim(const TouchSet* exclude) {
  if (g_fast->capturing.load() > 0) return nullptr;  // nothing unsafe during capture (fact 8)
  Region* best = nullptr;
  std::uint64_t best_use = ~0ull;
  for (Region* r : g->live) {
    if (r->must_stay || r->state.load() != kRegionResident || r->pins.load() != 0 ||
        in_set(exclude, r))
      continue;
    std::uint64_t u = r->last_use.load(std::memory_order_relaxed);
    if (u < best_use) {
      best_use = u;
      best = r;
    }
  }
  return best;
}

// Makes stream `evict_stream` wait for every stream that used r since its last eviction.
void order_after_users(Region* r) {
  std::uint64_t mask = r->streams.exchange(0);
  if (mask & (StreamTable::kPerThreadBit | StreamTable::kUnknownBit)) {
    // A per-thread default stream can only be named by its own thread: wait for the device.
    R().cuCtxSynchronize();
  }
  for (unsigned s = 0; s < StreamTable::kSlots; ++s) {
    if (!(mask & (1ull << s))) continue;
    std::uintptr_t stream;
    if (!g_fast->streams.stream_of(s, &stream)) continue;
    if (!g->slot_events[s]) R().cuEventCreate(&g->slot_events[s], CU_EVENT_DISABLE_TIMING);
    // The event is re-recorded by later evictions; cuStreamWaitEvent takes its state now.
    if (R().cuEventRecord(g->slot_events[s], reinterpret_cast<CUstream>(stream)) == CUDA_SUCCESS)
      R().cuStreamWaitEvent(g->evict_stream, g->slot_events[s], 0);
  }
  if (r->restore_pending.load()) {
    R().cuStreamWaitEvent(g->evict_stream, static_cast<CUevent>(r->restore_event), 0);
    r->restore_pending.store(0);
  }
}

// Starts a swap-out. Compute does not wait for it: the copy runs on the evict stream after the
// users' events, and the physical memory is released by reclaim() once its event has passed.
bool evict(Region* r) {
  r->state.store(kRegionEvicting, std::memory_order_seq_cst);
  if (r->pins.load(std::memory_order_seq_cst) != 0) {  // a launch got in first (see access.h)
    r->state.store(kRegionResident);
    return false;
  }
  host_acquire(r);
  order_after_users(r);
  if (!r->evict_event)
    R().cuEventCreate(reinterpret_cast<CUevent*>(&r->evict_event), CU_EVENT_DISABLE_TIMING);
  g->resident -= r->mapped;
  g->swapped_out += r->size;
  telemetry::eviction(r->id, r->size);
  if (r->handle == 0) {  // never mapped (fault injection): nothing to copy
    r->state.store(kRegionEvicted);
    return true;
  }
  if (r->host_pinned) {
    R().cuMemcpyDtoHAsync_v2(r->host, r->base, r->size, g->evict_stream);
    R().cuEventRecord(static_cast<CUevent>(r->evict_event), g->evict_stream);
    g->evicting += r->mapped;
    g->pending.push_back({r, false});
    wake_helper();
  } else {
    staged_d2h(r->host, r->base, r->size, g->evict_stream);
    unmap_to_pool(r);
    r->state.store(kRegionEvicted);
  }
  return true;
}

void log_oom(std::uint64_t asked) {
  g->oom_count++;
  char a[32], b[32], c[32], d[32];
  GSWAP_LOG(kError,
            "out of memory: asked %s, budget %s, resident %s, pinned host %s; nothing more can be "
            "evicted (CUDA_ERROR_OUT_OF_MEMORY)",
            format_bytes(asked, a, 32), format_bytes(g->budget, b, 32),
            format_bytes(g->used(), c, 32), format_bytes(g->pinned, d, 32));
}

// True when some resident region outside `exclude` could be evicted but for a pin.
bool pinned_by_others(const TouchSet* exclude) {
  for (Region* r : g->live)
    if (!r->must_stay && r->state.load() == kRegionResident && r->pins.load() != 0 &&
        !in_set(exclude, r))
      return true;
  return false;
}

// Gives the most recently pooled physical handle back to the driver, the cheapest way to get
// under the budget (no copy). False when the pool is empty. Caller holds g->mutex.
bool release_pooled_handle() {
  if (g->handle_pool.empty()) return false;
  auto [h, size] = g->handle_pool.back();
  g->handle_pool.pop_back();
  R().cuMemRelease(h);
  g->pooled -= size;
  return true;
}

// Makes room for `bytes` more within the budget: reclaims, drops pooled handles, evicts LRU
// victims (never those in `exclude` or pinned), and as a last resort waits for the earliest
// swap-out in flight. Takes a pooled handle of the right size when `handle` is wanted.
CUresult make_room(std::uint64_t bytes, const TouchSet* exclude,
                   CUmemGenericAllocationHandle* handle) {
  int transient_retries = 0;
  for (;;) {
    reclaim();
    if (handle) {
      for (auto it = g->handle_pool.begin(); it != g->handle_pool.end(); ++it) {
        if (it->second == bytes) {
          *handle = it->first;
          g->pooled -= bytes;
          g->handle_pool.erase(it);
          return CUDA_SUCCESS;  // stays counted: moves from pool to the caller
        }
      }
    }
    if (g->used() + bytes <= g->budget) {
      if (!handle) return CUDA_SUCCESS;
      CUmemAllocationProp prop = {};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = g->device;
      CUresult e = R().cuMemCreate(handle, bytes, &prop, 0);
      if (e == CUDA_SUCCESS) return CUDA_SUCCESS;
      if (e != CUDA_ERROR_OUT_OF_MEMORY) return e;
      // The device itself is full (other processes, context overhead): behave as at the budget.
    }
    if (release_pooled_handle()) continue;
    // Swap-outs and frees in flight will give their memory back: evict more only when they are
    // not enough, otherwise wait for the earliest (the only stall a budget forces).
    std::uint64_t in_flight = g->evicting + g->freeing;
    if (g->used() - in_flight + bytes > g->budget || g->pending.empty()) {
      if (Region* victim = pick_victim(exclude)) {
        evict(victim);
        continue;
      }
    }
    if (!g->pending.empty()) {
      if (t_lock && g->helper_running) {
        // Wait for the reclaim thread, releasing the mutex meanwhile (vDNN++: only an
        // allocation over budget waits, and only for the earliest swap-out).
        std::uint64_t t0 = now_ns();
        g->done_cv.wait_for(*t_lock, std::chrono::milliseconds(5));
        std::uint64_t dt = now_ns() - t0;
        if (t_in_scope) {
          t_waited_ns += dt;
        } else {
          g->stalls++;
          g->stall_ns += dt;
        }
      } else {
        wait_event(static_cast<CUevent>(g->pending.front().region->evict_event));
      }
      continue;
    }
    // Regions pinned by launches of other threads are only held between their check and their
    // enqueue: give them a moment before calling it out of memory.
    if (t_lock && transient_retries++ < 200 && pinned_by_others(exclude)) {
      g->done_cv.wait_for(*t_lock, std::chrono::microseconds(500));
      continue;
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
}

// Brings r back (at the same address) or rescues it from a swap-out still in flight.
CUresult restore(Region* r, const TouchSet* exclude) {
  std::uint32_t st = r->state.load();
  if (st == kRegionResident) return CUDA_SUCCESS;
  if (st == kRegionEvicting) {
    // Still mapped and unchanged: cancel the release. The copy in flight only fills r's own host
    // buffer, which the next swap-out (same stream, FIFO) overwrites.
    for (auto it = g->pending.begin(); it != g->pending.end(); ++it) {
      if (it->region == r && !it->is_free) {
        g->pending.erase(it);
        break;
      }
    }
    g->evicting -= r->mapped;
    g->resident += r->mapped;
    r->state.store(kRegionResident);
    return CUDA_SUCCESS;
  }
  GSWAP_CHECK(st == kRegionEvicted);
  if (g->config.debug_skip_restore) {
    // Test-only fault injection: claim residency without mapping, so the next touch faults.
    g->resident += r->mapped;
    r->state.store(kRegionResident);
    return CUDA_SUCCESS;
  }
  CUmemGenericAllocationHandle h = 0;
  CUresult e = make_room(r->mapped, exclude, &h);
  if (e != CUDA_SUCCESS) return e;
  if (r->state.load() != kRegionEvicted) {
    // Another thread brought it back while make_room waited: keep the handle for later.
    g->handle_pool.emplace_back(h, r->mapped);
    g->pooled += r->mapped;
    return restore(r, exclude);
  }
  if (!map_physical(r, h)) {
    R().cuMemRelease(h);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (!r->restore_event)
    R().cuEventCreate(reinterpret_cast<CUevent*>(&r->restore_event), CU_EVENT_DISABLE_TIMING);
  if (r->host_pinned) {
    R().cuMemcpyHtoDAsync_v2(r->base, r->host, r->size, g->restore_stream);
  } else {
    staged_h2d(r->base, r->host, r->size, g->restore_stream);
  }
  R().cuEventRecord(static_cast<CUevent>(r->restore_event), g->restore_stream);
  r->restore_pending.store(1);
  g->resident += r->mapped;
  g->swapped_in += r->size;
  note_peak();
  telemetry::restore(r->id, r->size, false);
  r->state.store(kRegionResident);
  return CUDA_SUCCESS;
}

CUstream caller_stream(CUstream s, bool per_thread) {
  if (per_thread && s == nullptr) return CU_STREAM_PER_THREAD;
  return s;
}

// Restores of t that may still be in flight: the caller's stream waits (or the host, for
// synchronous calls).
void wait_restores(TouchSet& t, CUstream stream, bool per_thread, bool sync) {
  for (std::size_t i = 0; i < t.n; ++i) {
    Region* r = t.regions[i];
    if (!r->restore_pending.load()) continue;
    CUevent ev = static_cast<CUevent>(r->restore_event);
    if (R().cuEventQuery(ev) == CUDA_SUCCESS) {
      r->restore_pending.store(0);
    } else if (sync) {
      wait_event(ev);
      r->restore_pending.store(0);
    } else {
      R().cuStreamWaitEvent(caller_stream(stream, per_thread), ev, 0);
    }
  }
}

}  // namespace

// The state exists from the moment the library is loaded, so a hook called before (or after a
// failed) cuInit finds it empty rather than null. Never destroyed (see g_state_storage).
__attribute__((constructor)) static void construct_state() {
  g_fast = new (g_fast_storage) FastState();
  g = new (g_state_storage) State();
}

FastState& fast() {
  return *g_fast;
}

CUresult init_process() {
  std::lock_guard<std::mutex> lock(g->mutex);
  if (g->inited) return g->init_result;
  g->inited = true;
  g->owner_pid = ::getpid();
  char err[256];
  if (!load_config([](const char* n) -> const char* { return std::getenv(n); }, &g->config, err,
                   sizeof err)) {
    log_configure(LogLevel::kError, 2);
    GSWAP_LOG(kError, "refusing to start: %s; every cuInit fails with CUDA_ERROR_INVALID_VALUE",
              err);
    g->init_result = CUDA_ERROR_INVALID_VALUE;
    return g->init_result;
  }
  int fd = 2;
  if (g->config.log_file[0] != '\0') {
    int f = ::open(g->config.log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (f >= 0) fd = f;
  }
  log_configure(g->config.log_level, fd);

  // Framework allocators (frameworks.h): expandable segments are refused like a bad setting;
  // a caching allocator is named once and gswap works at segment granularity.
  FrameworkCheck fw;
  check_frameworks([](const char* n) -> const char* { return std::getenv(n); }, loaded_frameworks(),
                   &fw);
  if (fw.refuse) {
    GSWAP_LOG(kError, "%s; every cuInit fails with CUDA_ERROR_NOT_SUPPORTED", fw.error);
    g->init_result = CUDA_ERROR_NOT_SUPPORTED;
    return g->init_result;
  }
  for (unsigned i = 0; i < fw.warnings; ++i) GSWAP_LOG(kWarn, "%s", fw.warning[i]);

  CUdevice dev = 0;
  size_t total = 0;
  if (R().cuDeviceGet(&dev, 0) == CUDA_SUCCESS &&
      R().cuDeviceTotalMem_v2(&total, dev) == CUDA_SUCCESS) {
    g->physical_total = total;
  }
  std::uint64_t b = g->config.budget.resolve(g->physical_total);
  if (g->physical_total && b > g->physical_total) {
    char x[32], y[32];
    GSWAP_LOG(kWarn, "GSWAP_BUDGET %s is above the device's %s; using the device size",
              format_bytes(b, x, 32), format_bytes(g->physical_total, y, 32));
    b = g->physical_total;
  }
  g->budget = b;
  std::atexit(at_exit);
  pthread_atfork(fork_prepare, fork_parent, fork_child);

  CUuuid uuid = {};
  R().cuDeviceGetUuid_v2(&uuid, dev);
  telemetry::StartInfo info;
  info.gpu_uuid = uuid.bytes;
  info.device_ordinal = dev;
  info.device_total_bytes = g->physical_total;
  info.budget_bytes = g->budget;
  info.on_budget = apply_budget;
  info.on_connect = announce_live_regions;
  telemetry::start(info);
  return CUDA_SUCCESS;
}

CUresult region_alloc(CUdeviceptr* out, std::size_t bytes, CUstream stream, bool per_thread,
                      bool* handled) {
  *handled = false;
  if (!g || !out) return CUDA_SUCCESS;
  SlowLock lock;
  if (!g->inited || g->init_result != CUDA_SUCCESS || !ensure_device()) return CUDA_SUCCESS;
  if (bytes < g->threshold || bytes == 0) return CUDA_SUCCESS;
  std::uint64_t mapped = round_up(bytes, g->granularity);
  CUdeviceptr va = g->va.alloc(mapped);
  if (!va) {
    GSWAP_LOG_ONCE(
        kWarn,
        "device address reservation exhausted: large allocations now go to the driver unswappable");
    return CUDA_SUCCESS;
  }
  *handled = true;
  ScopedContext sc;
  StallScope stall;  // an allocation over the budget waits for the earliest swap-out
  Region* r = new_region();
  r->base = va;
  r->size = bytes;
  r->mapped = mapped;
  CUmemGenericAllocationHandle h = 0;
  CUresult e = make_room(mapped, nullptr, &h);
  if (e == CUDA_SUCCESS && !map_physical(r, h)) {
    R().cuMemRelease(h);
    e = CUDA_ERROR_OUT_OF_MEMORY;
  }
  if (e != CUDA_SUCCESS) {
    if (e == CUDA_ERROR_OUT_OF_MEMORY) log_oom(mapped);
    g->va.release(va, mapped);
    recycle(r);
    return e;
  }
  g->resident += mapped;
  note_peak();
  r->streams.store(g_fast->streams.bit(reinterpret_cast<std::uintptr_t>(stream), per_thread) &
                   (stream ? ~0ull : 0ull));
  r->state.store(kRegionResident);
  g->live.push_back(r);
  g_fast->map.set(va, mapped, r);
  g_fast->active.store(true, std::memory_order_release);
  *out = va;
  r->alloc_seq = g_fast->seq.fetch_add(1, std::memory_order_relaxed);
  telemetry::region_alloc(r->id, va, bytes, r->alloc_seq, 0);
  telemetry::publish_counters(counters());
  return CUDA_SUCCESS;
}

CUresult arena_alloc(CUdeviceptr* out, std::size_t bytes, CUstream stream, bool async,
                     bool per_thread, CUmemoryPool pool) {
  auto forward = [&]() -> CUresult {
    if (!async) return R().cuMemAlloc_v2(out, bytes);
    if (pool)
      return per_thread ? R().cuMemAllocFromPoolAsync_ptsz(out, bytes, pool, stream)
                        : R().cuMemAllocFromPoolAsync(out, bytes, pool, stream);
    return per_thread ? R().cuMemAllocAsync_ptsz(out, bytes, stream)
                      : R().cuMemAllocAsync(out, bytes, stream);
  };
  if (!g || !g->inited || g->init_result != CUDA_SUCCESS) return forward();
  SlowLock lock;
  if (!g->device_ready && !ensure_device()) return forward();
  ScopedContext sc;
  StallScope stall;
  // Arena memory is never evicted but counts against the budget, so make room first.
  CUresult e = make_room(bytes, nullptr, nullptr);
  if (e != CUDA_SUCCESS) {
    log_oom(bytes);
    return e;
  }
  e = forward();
  if (e == CUDA_SUCCESS && out) {
    g->arena[*out] = bytes;
    g->arena_bytes += bytes;
    note_peak();
  }
  return e;
}

CUresult arena_alloc_pitch(CUdeviceptr* out, std::size_t* pitch, std::size_t width,
                           std::size_t height, unsigned elem) {
  auto forward = [&]() { return R().cuMemAllocPitch_v2(out, pitch, width, height, elem); };
  if (!g || !g->inited || g->init_result != CUDA_SUCCESS) return forward();
  SlowLock lock;
  if (!g->device_ready && !ensure_device()) return forward();
  ScopedContext sc;
  StallScope stall;
  // The driver picks the pitch; room is made for a 512-byte-aligned row (the usual pitch
  // alignment) and the real size is what gets counted.
  std::uint64_t estimate = round_up(width, 512) * height;
  CUresult e = make_room(estimate, nullptr, nullptr);
  if (e != CUDA_SUCCESS) {
    log_oom(estimate);
    return e;
  }
  e = forward();
  if (e == CUDA_SUCCESS && out && pitch) {
    std::uint64_t bytes = static_cast<std::uint64_t>(*pitch) * height;
    g->arena[*out] = bytes;
    g->arena_bytes += bytes;
    note_peak();
  }
  return e;
}

CUresult free_any(CUdeviceptr p, CUstream stream, bool async, bool per_thread) {
  auto forward = [&]() -> CUresult {
    if (!async) return R().cuMemFree_v2(p);
    return per_thread ? R().cuMemFreeAsync_ptsz(p, stream) : R().cuMemFreeAsync(p, stream);
  };
  if (!g || !g->inited) return forward();
  Region* r = g_fast->map.find(p);
  std::lock_guard<std::mutex> lock(g->mutex);
  if (!r || r->base != p || r->state.load() == kRegionFree) {
    auto it = g->arena.find(p);
    CUresult e = forward();
    if (it != g->arena.end() && e == CUDA_SUCCESS) {
      g->arena_bytes -= it->second;
      g->arena.erase(it);
    }
    return e;
  }
  ScopedContext sc;
  g_fast->map.clear(r->base, r->mapped);
  g->live.erase(std::find(g->live.begin(), g->live.end(), r));
  telemetry::region_free(r->id, g_fast->seq.fetch_add(1, std::memory_order_relaxed));
  std::uint32_t st = r->state.load();
  if (st == kRegionEvicting) {
    r->free_requested = true;  // reclaim() finishes it after the copy
  } else if (st == kRegionEvicted) {
    finish_free(r);
  } else {
    // Stream-ordered: the memory is reused only after every stream that used the region (and
    // the freeing stream) has passed this point (fact 7). No device-wide synchronisation.
    if (async && stream)
      r->streams.fetch_or(
          g_fast->streams.bit(reinterpret_cast<std::uintptr_t>(stream), per_thread));
    else if (async && per_thread)
      r->streams.fetch_or(StreamTable::kPerThreadBit);
    order_after_users(r);
    if (!r->evict_event)
      R().cuEventCreate(reinterpret_cast<CUevent*>(&r->evict_event), CU_EVENT_DISABLE_TIMING);
    R().cuEventRecord(static_cast<CUevent>(r->evict_event), g->evict_stream);
    r->state.store(kRegionFree);
    g->resident -= r->mapped;
    g->freeing += r->mapped;
    g->pending.push_back({r, true});
    wake_helper();
  }
  telemetry::publish_counters(counters());
  return CUDA_SUCCESS;
}

std::uint64_t budget_total(std::uint64_t physical) {
  if (!g || !g->inited || g->init_result != CUDA_SUCCESS) return physical;
  return std::min(physical, g->budget ? g->budget : physical);
}

bool memory_info(std::size_t* free, std::size_t* total) {
  if (!g || !g->inited || g->init_result != CUDA_SUCCESS) return false;
  std::lock_guard<std::mutex> lock(g->mutex);
  ScopedContext sc;  // reclaim() may unmap
  reclaim();
  std::uint64_t t = g->physical_total ? std::min(g->budget, g->physical_total) : g->budget;
  std::uint64_t in_use = g->used() - g->pooled;  // pooled handles are free to the application
  if (total) *total = t;
  if (free) *free = in_use >= t ? 0 : t - in_use;
  return true;
}

bool region_range(CUdeviceptr p, CUdeviceptr* base, std::size_t* size) {
  if (!g_fast) return false;
  Region* r = g_fast->map.find(p);
  if (!r || r->state.load() == kRegionFree || p >= r->base + r->size) return false;
  if (base) *base = r->base;
  if (size) *size = r->size;
  return true;
}

bool region_owner(CUcontext* ctx, CUdevice* device) {
  if (!g || !g->device_ready) return false;
  *ctx = g->ctx;
  *device = g->device;
  return true;
}

CUresult prepare_slow(TouchSet& t, CUstream stream, bool per_thread, bool sync) {
  std::lock_guard<std::mutex> one_restorer(g->restore_mutex);
  SlowLock lock;
  ScopedContext sc;
  StallScope stall;
  // Pin first: make_room may release the mutex while it waits, and another thread must not
  // evict what this call has already made resident.
  for (std::size_t i = 0; i < t.n; ++i) t.regions[i]->pins.fetch_add(1, std::memory_order_seq_cst);
  bool restored = false;
  for (std::size_t i = 0; i < t.n; ++i) {
    Region* r = t.regions[i];
    std::uint32_t st = r->state.load();
    if (st == kRegionFree || st == kRegionResident) continue;
    restored = true;
    stall.restored();
    CUresult e = restore(r, &t);
    if (e != CUDA_SUCCESS) {
      for (std::size_t j = 0; j < t.n; ++j)
        t.regions[j]->pins.fetch_sub(1, std::memory_order_release);
      std::uint64_t need = 0;
      for (std::size_t j = 0; j < t.n; ++j) need += t.regions[j]->mapped;
      log_oom(need);
      return e;
    }
  }
  if (!g->config.debug_skip_restore) wait_restores(t, stream, per_thread, sync);
  if (restored) telemetry::publish_counters(counters());
  return CUDA_SUCCESS;
}

CUresult keep_resident(TouchSet& t, CUstream stream, bool per_thread) {
  std::lock_guard<std::mutex> one_restorer(g->restore_mutex);
  SlowLock lock;
  ScopedContext sc;
  for (std::size_t i = 0; i < t.n; ++i) t.regions[i]->must_stay = true;
  for (std::size_t i = 0; i < t.n; ++i) {
    CUresult e = restore(t.regions[i], &t);
    if (e != CUDA_SUCCESS) {
      log_oom(t.regions[i]->mapped);
      return e;
    }
  }
  // The host waits: the caller's stream may be capturing, and a capture must not depend on an
  // event recorded outside it.
  wait_restores(t, stream, per_thread, true);
  return CUDA_SUCCESS;
}

CUresult keep_all_resident(const char* why) {
  if (!g || !g_fast->active.load()) return CUDA_SUCCESS;
  // Once everything stays, regions created later stay too (new_region) and are born resident:
  // graph replays then cost one load.
  if (g_fast->all_stay.load(std::memory_order_acquire)) return CUDA_SUCCESS;
  std::lock_guard<std::mutex> one_restorer(g->restore_mutex);
  SlowLock lock;
  ScopedContext sc;
  if (!g->untrackable_seen) {
    GSWAP_LOG(kWarn, "%s: every allocation now stays resident (accesses cannot be seen)", why);
    g->untrackable_seen = true;
  }
  for (Region* r : g->live) r->must_stay = true;
  for (Region* r : g->live) {
    CUresult e = restore(r, nullptr);
    if (e != CUDA_SUCCESS) {
      log_oom(r->mapped);
      return e;
    }
  }
  // The untracked work may run on any stream: the host waits for every restore.
  for (Region* r : g->live) {
    if (r->restore_pending.load()) {
      wait_event(static_cast<CUevent>(r->restore_event));
      r->restore_pending.store(0);
    }
  }
  g_fast->all_stay.store(true, std::memory_order_release);
  return CUDA_SUCCESS;
}

CUresult keep_resident_at(CUdeviceptr addr, const char* why) {
  if (!g_fast || !g_fast->active.load()) return CUDA_SUCCESS;
  Region* r = g_fast->map.find(addr);
  if (!r) return CUDA_SUCCESS;
  GSWAP_LOG(kInfo, "%s: region at 0x%llx stays resident", why, (unsigned long long)r->base);
  TouchSet t;
  t.add(r);
  CUresult e = keep_resident(t, nullptr, false);
  if (e != CUDA_SUCCESS) return e;
  std::lock_guard<std::mutex> lock(g->mutex);
  if (r->restore_pending.load()) {
    wait_event(static_cast<CUevent>(r->restore_event));
    r->restore_pending.store(0);
  }
  return CUDA_SUCCESS;
}

void stream_destroyed(CUstream stream) {
  if (!g || !g->device_ready || !stream) return;
  std::lock_guard<std::mutex> lock(g->mutex);
  // Work already queued on the stream still runs after destroy: order later swap-outs and frees
  // after it before the stream's slot is forgotten.
  CUevent ev = nullptr;
  if (R().cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
    if (R().cuEventRecord(ev, stream) == CUDA_SUCCESS)
      R().cuStreamWaitEvent(g->evict_stream, ev, 0);
    R().cuEventDestroy_v2(ev);
  }
  g_fast->streams.release(reinterpret_cast<std::uintptr_t>(stream));
}

void capture_begin(CUstream, CUstreamCaptureMode) {
  g_fast->capturing.fetch_add(1);
}
void capture_end(CUstream) {
  if (g_fast->capturing.load() > 0) g_fast->capturing.fetch_sub(1);
}

void announce_live_regions() {
  if (!g || !g->inited) {
    telemetry::open_events();
    return;
  }
  // Under the mutex region_alloc and region_free emit under: a region allocated before this
  // point is announced here, one allocated after is reported by its own event, and a region
  // freed meanwhile is neither. One pass over the live list, no CUDA calls: the application
  // waits for it only if it takes the slow path at this moment.
  std::lock_guard<std::mutex> lock(g->mutex);
  telemetry::open_events();
  for (Region* r : g->live) telemetry::announce_region(r->id, r->base, r->size, r->alloc_seq, 0);
}

void apply_budget(std::uint64_t bytes) {
  if (!g || !g->inited) return;
  std::lock_guard<std::mutex> lock(g->mutex);
  ScopedContext sc;
  std::uint64_t b = g->physical_total ? std::min(bytes, g->physical_total) : bytes;
  char x[32];
  GSWAP_LOG(kInfo, "new budget %s", format_bytes(b, x, 32));
  g->budget = b;
  if (g->device_ready && g->used() > g->budget) {
    // Evict down to the new budget; what cannot leave now leaves on later slow paths.
    while (g->used() - g->evicting - g->freeing > g->budget) {
      reclaim();
      if (release_pooled_handle()) continue;
      Region* v = pick_victim(nullptr);
      if (!v || !evict(v)) break;
    }
  }
  telemetry::publish_counters(counters());
}

}  // namespace gswap::interpose
