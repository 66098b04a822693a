// process.cpp: the process's residency manager and everything process-wide around it (see
// process.h): settings and init at cuInit, framework refusal, the daemon callbacks, fork and the
// summary at exit.
//
// Threads: g_init_mutex serialises init; the residency manager has its own locks. The objects
// live in static storage that is never destroyed: hooks may run from other libraries'
// destructors after ours.
#include "interpose/process.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "interpose/clock.h"
#include "interpose/config.h"
#include "interpose/cupti_timing.h"
#include "interpose/device_cuda.h"
#include "interpose/driver.h"
#include "interpose/frameworks.h"
#include "interpose/hook_profile.h"
#include "interpose/layout_cache.h"
#include "interpose/log.h"
#include "interpose/residency.h"
#include "interpose/telemetry.h"
#include "interpose/timeline.h"

namespace gswap::interpose {
namespace {

struct Process {
  std::mutex init_mutex;
  bool settings_checked = false;  // check_settings ran, with settings_result
  CUresult settings_result = CUDA_SUCCESS;
  bool inited = false;
  CUresult init_result = CUDA_SUCCESS;
  Config config;
  pid_t owner_pid = 0;
  std::uint64_t physical_total = 0;
};

// What following a plan does: residency's lock-free commands and telemetry's reports.
class ProcessPlanActions final : public PlanActions {
 public:
  Region* region_by_id(std::uint64_t id) override;
  bool evict(Region* r, std::uint64_t id, std::uint64_t tag, bool drop) override;
  bool prefetch(Region* r, std::uint64_t id, std::uint64_t tag, std::uint64_t due) override;
  void lateness(std::uint64_t generation, std::uint64_t entry, std::uint64_t late_ns,
                bool missed) override {
    telemetry::lateness(generation, entry, late_ns, missed);
  }
  void divergence(std::uint64_t generation, std::uint64_t offset, std::uint64_t expected,
                  std::uint64_t got) override {
    // The same kernel on both sides: the iteration ran on past its end and the next one's
    // signature, which begins with that kernel, was not seen (plan_executor.cpp).
    if (expected == got)
      GSWAP_LOG(kInfo,
                "left plan generation %llu at offset %llu: the next iteration's signature (from "
                "kernel 0x%llx) did not come",
                (unsigned long long)generation, (unsigned long long)offset,
                (unsigned long long)expected);
    else
      GSWAP_LOG(kInfo,
                "left plan generation %llu at offset %llu: expected kernel 0x%llx, got 0x%llx",
                (unsigned long long)generation, (unsigned long long)offset,
                (unsigned long long)expected, (unsigned long long)got);
    telemetry::divergence(generation, offset, expected, got);
  }
  void iteration_started() override { timeline::iteration(monotonic_ns()); }
};

alignas(FastState) unsigned char g_fast_storage[sizeof(FastState)];
alignas(Process) unsigned char g_process_storage[sizeof(Process)];
alignas(Residency) unsigned char g_residency_storage[sizeof(Residency)];
alignas(LruVictims) unsigned char g_victims_storage[sizeof(LruVictims)];
alignas(ProcessPlanActions) unsigned char g_actions_storage[sizeof(ProcessPlanActions)];
alignas(PlanExecutor) unsigned char g_executor_storage[sizeof(PlanExecutor)];
FastState* g_fast = nullptr;
Process* g = nullptr;
Residency* g_res = nullptr;
LruVictims* g_victims = nullptr;
ProcessPlanActions* g_actions = nullptr;
PlanExecutor* g_exec = nullptr;
bool g_time_all = false;  // GSWAP_TIMELINE: every access timed, guided iterations too

Region* ProcessPlanActions::region_by_id(std::uint64_t id) {
  return g_res->find_by_id(id);
}
bool ProcessPlanActions::evict(Region* r, std::uint64_t id, std::uint64_t tag, bool drop) {
  return drop ? g_res->plan_drop(r, id, tag) : g_res->plan_evict(r, id, tag);
}
bool ProcessPlanActions::prefetch(Region* r, std::uint64_t id, std::uint64_t tag,
                                  std::uint64_t due) {
  return g_res->plan_prefetch(r, id, tag, due);
}

bool ready() {
  return g && g->inited && g->init_result == CUDA_SUCCESS;
}

telemetry::Counters counters() {
  ResidencyStats s = g_res->stats();
  telemetry::Counters c;
  c.budget = s.budget;
  c.resident = s.used;
  c.peak_resident = s.peak;
  c.swapped_out = s.swapped_out;
  c.swapped_in = s.swapped_in;
  c.stalls = s.stalls;
  c.stall_ns = s.stall_ns;
  c.pinned = s.pinned;
  c.regions = s.regions;
  c.launches = g_fast->launches.total();
  c.mode = g_exec->mode();
  c.plan_generation = g_exec->generation();
  c.planned_evictions = s.planned_evictions;
  c.prefetches = s.prefetches;
  c.late_restores = s.late_restores;
  c.divergences = g_exec->counters().divergences.load(std::memory_order_relaxed);
  c.device_stall_ns = s.device_stall_ns;
  c.h2d_bytes_per_s = s.h2d_bytes_per_s;
  c.d2h_bytes_per_s = s.d2h_bytes_per_s;
  c.guided_iterations = g_exec->counters().guided_iterations.load(std::memory_order_relaxed);
  c.fixed_bytes = s.fixed;
  c.planned_drops = s.planned_drops;
  c.recomputes = s.recomputes;
  c.recomputed_bytes = s.recomputed_bytes;
  c.recompute_ns = s.recompute_ns;
  c.recompute_failures = s.recompute_failures;
  c.timing_skips = g_res->timings().skipped();
  c.timing_source = static_cast<std::uint64_t>(cupti::active() ? proto::TimingSource::kCupti
                                                               : proto::TimingSource::kEvents);
  return c;
}

// Telemetry's PlanCallback: a new plan, or passive again (also when the daemon went away). With
// GSWAP_TIMELINE on, "passive" still times kernels: the timeline shows them.
void load_plan(const proto::PlanHeader& h, const proto::PlanEntry* entries, std::uint32_t n) {
  if (h.mode == static_cast<std::uint32_t>(proto::PlanMode::kPassive) && timeline::enabled()) {
    proto::PlanHeader measure{};
    measure.mode = static_cast<std::uint32_t>(proto::PlanMode::kMeasure);
    g_exec->load(measure, nullptr, 0);
  } else {
    g_exec->load(h, entries, n);
  }
  bool active = g_exec->active();
  g_res->set_guided(g_exec->mode() == static_cast<std::uint32_t>(proto::PlanMode::kGuided));
  g_fast->plan_active.store(active, std::memory_order_release);
}

void publish_tick(void*) {
  telemetry::publish_counters(counters());
}

void print_summary() {
  if (!g || !g->inited || g->owner_pid != ::getpid() || !g->config.summary) return;
  if (!g_res->device_ready()) return;
  ResidencyStats s = g_res->stats();
  telemetry::Counters k = counters();
  static const char* const kModes[] = {"passive", "measured", "guided"};
  const char* mode = k.mode < 3 ? kModes[k.mode] : "passive";
  char a[32], b[32], c[32], d[32], e[32];
  char line[1024];
  int n = std::snprintf(
      line, sizeof line,
      "gswap summary: peak_resident=%llu (%s) budget=%llu (%s) swapped_out=%llu (%s) "
      "swapped_in=%llu (%s) stalls=%llu stall_ms=%.1f device_stall_ms=%.1f oom=%llu "
      "swap_errors=%llu mode=%s planned_evictions=%llu prefetches=%llu late_restores=%llu "
      "divergences=%llu guided_iterations=%llu recomputed=%llu (%s) recomputes=%llu "
      "recompute_ms=%.1f recompute_failures=%llu timing_skips=%llu dropped_events=%llu "
      "timing=%s\n",
      (unsigned long long)s.peak, format_bytes(s.peak, a, 32), (unsigned long long)s.budget,
      format_bytes(s.budget, b, 32), (unsigned long long)s.swapped_out,
      format_bytes(s.swapped_out, c, 32), (unsigned long long)s.swapped_in,
      format_bytes(s.swapped_in, d, 32), (unsigned long long)s.stalls, s.stall_ns / 1e6,
      s.device_stall_ns / 1e6, (unsigned long long)s.oom, (unsigned long long)s.swap_errors, mode,
      (unsigned long long)k.planned_evictions, (unsigned long long)k.prefetches,
      (unsigned long long)k.late_restores, (unsigned long long)k.divergences,
      (unsigned long long)k.guided_iterations, (unsigned long long)s.recomputed_bytes,
      format_bytes(s.recomputed_bytes, e, 32), (unsigned long long)s.recomputes,
      s.recompute_ns / 1e6, (unsigned long long)s.recompute_failures,
      (unsigned long long)k.timing_skips, (unsigned long long)telemetry::dropped_events(),
      k.timing_source == static_cast<std::uint64_t>(proto::TimingSource::kCupti) ? "cupti"
                                                                                 : "events");
  if (n > 0) {
    ssize_t w = ::write(2, line, std::min<size_t>(static_cast<size_t>(n), sizeof line - 1));
    (void)w;
  }
}

// Whether the residency mutex can be taken within a second at exit. A thread that calls exit()
// from a signal handler may have been interrupted inside a call under gswap, holding it: the
// swapper, the summary and telemetry's callbacks would then wait for it for ever.
bool residency_free_at_exit() {
  for (int i = 0; i < 100; ++i) {
    if (g_res->mutex().try_lock()) {
      g_res->mutex().unlock();
      return true;
    }
    ::usleep(10'000);
  }
  return false;
}

void at_exit() {
  if (g && g->owner_pid == ::getpid() && g->inited && !residency_free_at_exit()) {
    GSWAP_LOG(kWarn,
              "exiting while a call under gswap holds its state (exit() from a signal handler?): "
              "no summary, and the swapper and gswapd's connection are not waited for");
    return;
  }
  // The swapper may be inside the driver: let it finish before the driver's own destructors run
  // (they run after this handler, which was registered after the driver loaded).
  if (g && g->owner_pid == ::getpid()) g_res->stop_swapper();
  if (g && g->owner_pid == ::getpid()) timeline::write();
  print_summary();
  if (g && g->owner_pid == ::getpid()) hook_profile::report();
  telemetry::stop();
}

void fork_prepare() {
  g_res->mutex().lock();
}
void fork_parent() {
  g_res->mutex().unlock();
}
void fork_child() {
  // The child has one thread and no usable CUDA state of its parent's (CUDA does not survive
  // fork). Start over: a child that uses CUDA initialises again on its own cuInit. The old
  // objects are left behind, not destroyed: their locks and condition variables may still count
  // the parent's threads.
  Config cfg = g->config;
  g = new (g_process_storage) Process();
  g->config = cfg;
  g_fast = new (g_fast_storage) FastState();
  g_res = new (g_residency_storage) Residency(cuda_device(), *g_fast, *g_victims);
  g_exec = new (g_executor_storage) PlanExecutor(*g_actions);
  layout_cache_reset();
  cupti::forget_after_fork();
  telemetry::after_fork_child();
  hook_profile::after_fork_child();
}

// Opens GSWAP_LOG_FILE; false (with errno) when it cannot be written. Non-blocking, so that a
// FIFO nobody reads is refused (ENXIO) instead of blocking cuInit for ever; then blocking again,
// so that no line is dropped while a reader is slow.
bool open_log(const char* path, int* fd) {
  *fd = 2;
  if (!path || !*path) return true;
  int f = ::open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
  if (f < 0) return false;
  const int flags = ::fcntl(f, F_GETFL);
  if (flags < 0 || ::fcntl(f, F_SETFL, flags & ~O_NONBLOCK) < 0) {
    const int why = errno;
    ::close(f);
    errno = why;
    return false;
  }
  *fd = f;
  return true;
}

// Whether GSWAP_TIMELINE's file can be written at exit (false with errno otherwise): opened for
// writing now, created empty if it is not there, as the writer opens it at exit, so that a bad
// path is refused at cuInit like a bad log file, not found out when the run is over.
bool timeline_writable(const char* path) {
  if (!path || !*path) return true;
  int f = ::open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
  if (f < 0) return false;
  ::close(f);
  return true;
}

}  // namespace

// The state exists from the moment the library is loaded, so a hook called before (or after a
// failed) cuInit finds it empty rather than null.
__attribute__((constructor)) static void construct_process() {
  g_fast = new (g_fast_storage) FastState();
  g = new (g_process_storage) Process();
  g_victims = new (g_victims_storage) LruVictims();
  g_res = new (g_residency_storage) Residency(cuda_device(), *g_fast, *g_victims);
  g_actions = new (g_actions_storage) ProcessPlanActions();
  g_exec = new (g_executor_storage) PlanExecutor(*g_actions);
}

FastState& fast() {
  return *g_fast;
}

CUresult check_settings() {
  std::lock_guard<std::mutex> lock(g->init_mutex);
  if (g->settings_checked) return g->settings_result;
  g->settings_checked = true;
  auto refuse = [](CUresult e) {
    g->settings_result = e;
    return e;
  };
  char err[512];
  if (!load_config([](const char* n) -> const char* { return std::getenv(n); }, &g->config, err,
                   sizeof err)) {
    log_configure(LogLevel::kError, 2);
    GSWAP_LOG(kError, "refusing to start: %s; every cuInit fails with CUDA_ERROR_INVALID_VALUE",
              err);
    return refuse(CUDA_ERROR_INVALID_VALUE);
  }
  // The staging ring is pinned when first needed: one larger than the host's memory could never
  // be, and every swap past the pinned cap would fail then.
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0 &&
      g->config.staging_bytes / static_cast<std::uint64_t>(page) >=
          static_cast<std::uint64_t>(pages)) {
    char x[32], y[32];
    log_configure(LogLevel::kError, 2);
    GSWAP_LOG(
        kError,
        "refusing to start: GSWAP_STAGING_BYTES=%s is not less than the host's %s of "
        "memory; every cuInit fails with CUDA_ERROR_INVALID_VALUE",
        format_bytes(g->config.staging_bytes, x, 32),
        format_bytes(static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page), y, 32));
    return refuse(CUDA_ERROR_INVALID_VALUE);
  }
  // A file setting whose file cannot be written (errno says why) refuses every cuInit.
  auto refuse_file = [&](const char* setting, const char* path) {
    const int why = errno;
    char shown[4 * 64 + 4];
    GSWAP_LOG(kError,
              "refusing to start: %s=\"%s\" cannot be written (%s); every cuInit fails with "
              "CUDA_ERROR_INVALID_VALUE",
              setting, shown_value(path, shown, sizeof shown), strerror(why));
    return refuse(CUDA_ERROR_INVALID_VALUE);
  };
  int fd = 2;
  if (!open_log(g->config.log_file, &fd)) {
    const int why = errno;
    log_configure(LogLevel::kError, 2);
    errno = why;
    return refuse_file("GSWAP_LOG_FILE", g->config.log_file);
  }
  log_configure(g->config.log_level, fd);
  if (!timeline_writable(g->config.timeline))
    return refuse_file("GSWAP_TIMELINE", g->config.timeline);
  if (!timeline::configure(g->config.timeline, g->config.timeline_events)) {
    char x[32];
    GSWAP_LOG(kError,
              "refusing to start: GSWAP_TIMELINE_EVENTS=%llu needs %s of host memory for its "
              "ring, which cannot be allocated; every cuInit fails with CUDA_ERROR_OUT_OF_MEMORY",
              static_cast<unsigned long long>(g->config.timeline_events),
              format_bytes(timeline::ring_bytes(g->config.timeline_events), x, 32));
    return refuse(CUDA_ERROR_OUT_OF_MEMORY);
  }

  // Framework allocators (frameworks.h): expandable segments are refused like a bad setting;
  // a caching allocator is named once and gswap works at segment granularity.
  FrameworkCheck fw;
  check_frameworks([](const char* n) -> const char* { return std::getenv(n); }, loaded_frameworks(),
                   &fw);
  if (fw.refuse) {
    GSWAP_LOG(kError, "%s; every cuInit fails with CUDA_ERROR_NOT_SUPPORTED", fw.error);
    return refuse(CUDA_ERROR_NOT_SUPPORTED);
  }
  for (unsigned i = 0; i < fw.warnings; ++i) GSWAP_LOG(kWarn, "%s", fw.warning[i]);
  return CUDA_SUCCESS;
}

CUresult init_process() {
  if (CUresult e = check_settings(); e != CUDA_SUCCESS) return e;
  std::lock_guard<std::mutex> lock(g->init_mutex);
  if (g->inited) return g->init_result;
  g->inited = true;
  g->owner_pid = ::getpid();

  CUdevice dev = 0;
  size_t total = 0;
  CUresult de = real().cuDeviceGet(&dev, 0);
  const char* failed = "cuDeviceGet";
  if (de == CUDA_SUCCESS) {
    de = real().cuDeviceTotalMem_v2(&total, dev);
    failed = "cuDeviceTotalMem_v2";
  }
  if (de == CUDA_SUCCESS) {
    g->physical_total = total;
  } else if (g->config.budget.is_percent) {
    // A share of a device whose size is unknown: nothing to budget against.
    GSWAP_LOG(kError,
              "refusing to start: %s -> %d (%s), so the device's size is unknown and GSWAP_BUDGET "
              "%g%% cannot be resolved; every cuInit fails with %d (%s)",
              failed, static_cast<int>(de), driver_error_name(de), g->config.budget.percent,
              static_cast<int>(de), driver_error_name(de));
    g->init_result = de;
    return g->init_result;
  } else {
    GSWAP_LOG(kWarn,
              "%s -> %d (%s): the device's size is unknown; the budget is not checked "
              "against it",
              failed, static_cast<int>(de), driver_error_name(de));
  }
  std::uint64_t b = g->config.budget.resolve(g->physical_total);
  if (b == 0 && g->config.budget.is_percent) {
    // A percentage so small that it leaves no byte, refused as 0 and 0% are.
    char x[32];
    GSWAP_LOG(kError,
              "refusing to start: GSWAP_BUDGET %g%% of the device's %s is less than one byte; "
              "every cuInit fails with CUDA_ERROR_INVALID_VALUE",
              g->config.budget.percent, format_bytes(g->physical_total, x, 32));
    g->init_result = CUDA_ERROR_INVALID_VALUE;
    return g->init_result;
  }
  if (g->physical_total && b > g->physical_total) {
    char x[32], y[32];
    GSWAP_LOG(kWarn, "GSWAP_BUDGET %s is above the device's %s; using the device size",
              format_bytes(b, x, 32), format_bytes(g->physical_total, y, 32));
    b = g->physical_total;
  }
  ResidencySettings rs;
  rs.budget = b;
  rs.physical_total = g->physical_total;
  rs.swap_threshold = g->config.swap_threshold.bytes;
  rs.pinned_cap = g->config.pinned_cap;
  rs.staging_bytes = g->config.staging_bytes;
  rs.debug_skip_restore = g->config.debug_skip_restore;
  rs.recompute_keep_copy = g->config.recompute_keep_copy;
  g_res->configure(rs);
  g_res->set_tick(publish_tick, nullptr);
  cupti::configure(g->config.timing == Config::Timing::kCupti, g->config.cupti_path);
  g_res->set_external_timings(&cupti::service());
  hook_profile::enable(g->config.hook_profile);
  static std::atomic<bool> daemon_recording{false};
  if (timeline::enabled()) {
    // Every call numbered and every kernel timed from the start, daemon or not.
    g_time_all = true;
    g_fast->ordered.store(true, std::memory_order_relaxed);
    load_plan(proto::PlanHeader{}, nullptr, 0);
  }
  std::atexit(at_exit);
  pthread_atfork(fork_prepare, fork_parent, fork_child);

  CUuuid uuid = {};
  real().cuDeviceGetUuid_v2(&uuid, dev);
  telemetry::StartInfo info;
  switch (g->config.daemon) {
    case Config::Daemon::kOff:
      info.mode = telemetry::DaemonMode::kOff;
      break;
    case Config::Daemon::kConnect:
      info.mode = telemetry::DaemonMode::kConnect;
      break;
    case Config::Daemon::kSpawn:
      info.mode = telemetry::DaemonMode::kSpawn;
      break;
  }
  info.runtime_dir = g->config.runtime_dir;
  info.daemon_path = g->config.daemon_path;
  info.gpu_uuid = uuid.bytes;
  info.device_ordinal = dev;
  info.device_total_bytes = g->physical_total;
  info.budget_bytes = b;
  info.on_budget = apply_budget;
  info.on_connect = announce_live_regions;
  info.recording = timeline::enabled() ? &daemon_recording : &g_fast->ordered;
  info.on_plan = load_plan;
  telemetry::start(info);
  return CUDA_SUCCESS;
}

CUresult region_alloc(CUdeviceptr* out, std::size_t bytes, CUstream stream, bool async,
                      bool per_thread, bool* handled) {
  *handled = false;
  if (!ready() || !out) return CUDA_SUCCESS;
  return g_res->alloc_region(out, bytes, stream, async, per_thread, handled);
}

namespace {
struct ArenaCall {
  CUdeviceptr* out;
  std::size_t bytes;
  CUstream stream;
  bool async, per_thread;
  CUmemoryPool pool;
  std::size_t* pitch;
  std::size_t width, height;
  unsigned elem;
};

CUresult forward_alloc(void* p, CUdeviceptr* out, std::uint64_t* bytes) {
  auto* a = static_cast<ArenaCall*>(p);
  if (!a->async) return real().cuMemAlloc_v2(out, a->bytes);
  if (a->pool)
    return a->per_thread ? real().cuMemAllocFromPoolAsync_ptsz(out, a->bytes, a->pool, a->stream)
                         : real().cuMemAllocFromPoolAsync(out, a->bytes, a->pool, a->stream);
  (void)bytes;
  return a->per_thread ? real().cuMemAllocAsync_ptsz(out, a->bytes, a->stream)
                       : real().cuMemAllocAsync(out, a->bytes, a->stream);
}

CUresult forward_pitch(void* p, CUdeviceptr* out, std::uint64_t* bytes) {
  auto* a = static_cast<ArenaCall*>(p);
  CUresult e = real().cuMemAllocPitch_v2(out, a->pitch, a->width, a->height, a->elem);
  if (e == CUDA_SUCCESS && a->pitch) *bytes = static_cast<std::uint64_t>(*a->pitch) * a->height;
  return e;
}
}  // namespace

CUresult arena_alloc(CUdeviceptr* out, std::size_t bytes, CUstream stream, bool async,
                     bool per_thread, CUmemoryPool pool) {
  ArenaCall a{out, bytes, stream, async, per_thread, pool, nullptr, 0, 0, 0};
  if (!ready()) return forward_alloc(&a, out, nullptr);
  return g_res->alloc_arena(bytes, forward_alloc, &a, out, async ? stream : nullptr);
}

CUresult arena_alloc_pitch(CUdeviceptr* out, std::size_t* pitch, std::size_t width,
                           std::size_t height, unsigned elem) {
  ArenaCall a{out, 0, nullptr, false, false, nullptr, pitch, width, height, elem};
  std::uint64_t ignored = 0;
  if (!ready()) return forward_pitch(&a, out, &ignored);
  // The driver picks the pitch; room is made for a 512-byte-aligned row (the usual pitch
  // alignment) and the real size is what gets counted.
  std::uint64_t estimate = (width + 511) / 512 * 512 * height;
  return g_res->alloc_arena(estimate, forward_pitch, &a, out);
}

CUresult free_any(CUdeviceptr p, CUstream stream, bool async, bool per_thread) {
  if (ready()) {
    bool handled = false;
    CUresult e = g_res->free_allocation(p, stream, async, per_thread, &handled);
    if (handled) return e;
  }
  CUresult e = !async ? real().cuMemFree_v2(p)
                      : (per_thread ? real().cuMemFreeAsync_ptsz(p, stream)
                                    : real().cuMemFreeAsync(p, stream));
  if (e == CUDA_SUCCESS && ready()) g_res->forget_arena(p);
  return e;
}

std::uint64_t budget_total(CUdevice dev, std::uint64_t physical) {
  if (!ready()) return physical;
  // The budget is the device's gswap manages: the one its regions live on once it has them, the
  // one the budget was resolved against (ordinal 0) before.
  const CUdevice managed = g_res->device_ready() ? g_res->device_ordinal() : 0;
  if (dev != managed) return physical;
  std::uint64_t b = g_res->budget();
  return std::min(physical, b ? b : physical);
}

bool memory_info(std::size_t* free, std::size_t* total) {
  if (!ready()) return false;
  // A null pointer is the driver's to refuse (CUDA_ERROR_INVALID_VALUE), as without gswap.
  if (!free || !total) return false;
  // Like the driver: a thread with no current context gets CUDA_ERROR_INVALID_CONTEXT, which the
  // caller's forward to the driver produces.
  if (!cuda_device().current()) return false;
  std::uint64_t f = 0, t = 0;
  if (!g_res->memory_info(&f, &t)) return false;  // another context: the driver answers
  if (free) *free = f;
  if (total) *total = t;
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

bool region_slack(CUdeviceptr p) {
  if (!g_fast) return false;
  Region* r = g_fast->map.find(p);
  return r && r->state.load() != kRegionFree && p >= r->base + r->size;
}

bool region_owner(CUcontext* ctx, CUdevice* device) {
  if (!g_res->device_ready()) return false;
  *ctx = g_res->context();
  *device = g_res->device_ordinal();
  return true;
}

CUresult check_app_stream(CUstream s) {
  if (s == nullptr || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD ||
      !real().cuStreamGetFlags)
    return CUDA_SUCCESS;
  unsigned int flags = 0;
  return real().cuStreamGetFlags(s, &flags);
}

CUresult prepare_slow(TouchSet& t, CUstream stream, bool per_thread, bool sync) {
  if (CUresult e = check_app_stream(stream); e != CUDA_SUCCESS) return e;
  return g_res->prepare(t, stream, per_thread, sync);
}

CUresult wait_restoring(TouchSet& t, CUstream stream, bool per_thread, bool sync) {
  if (CUresult e = check_app_stream(stream); e != CUDA_SUCCESS) return e;
  return g_res->wait_restores(t, stream, per_thread,
                              sync || g_fast->capturing.load(std::memory_order_relaxed) > 0);
}

void plan_before(std::uint64_t seq, std::uint64_t function, const TouchSet& t, CUstream stream,
                 bool, PlanStep* step) {
  g_exec->before(seq, function, t, &step->step);
  // Timing of kernels, copies and memsets (the program's own copies take device time and link
  // time the planner must see): an event on the access's stream on each side of it, never while
  // a stream captures (an event recorded there would join the graph). Stream memory operations
  // are not timed: a wait on a value lasts as long as the host makes it. With GSWAP_TIMELINE on,
  // every access is timed, guided iterations too: the timeline shows them.
  if (!(step->step.measure || g_time_all) || function == proto::kMemOpFunction ||
      g_fast->capturing.load(std::memory_order_relaxed) > 0)
    return;
  if (cupti::active()) {
    g_res->timings().note_access(seq, step->stream_number, step->name);
    cupti::begin(seq);
    step->cupti = true;
    return;
  }
  // A thread with no current context: the program's call fails (CUDA_ERROR_INVALID_CONTEXT), and
  // so would the timing event, with an error line of gswap's own that read as its failure.
  CUcontext current = nullptr;
  if (real().cuCtxGetCurrent(&current) != CUDA_SUCCESS || !current) return;
  Device::Event start = g_res->timings().take();
  if (!start) return;
  if (cuda_device().record(start, stream) != CUDA_SUCCESS) {
    g_res->timings().give_back(start);
    return;
  }
  step->start = start;
  step->seq = seq;
  step->stream = stream;
}

void plan_after(PlanStep* step) {
  // Before the plan's own calls (a planned swap-out's copy): CUPTI would time them as the access.
  if (step->cupti) cupti::end();
  g_exec->after(step->step);
  if (!step->start) return;
  Device::Event end = g_res->timings().take();
  if (end && cuda_device().record(end, step->stream) == CUDA_SUCCESS) {
    g_res->timings().push_kernel(step->seq, step->stream_number, step->name, step->start, end);
    return;
  }
  g_res->timings().give_back(end);
  g_res->timings().give_back(step->start);
}

void send_kernel_name(std::uint64_t function_id, const char* name,
                      std::atomic<std::uint32_t>* sent) {
  std::uint32_t now = telemetry::connection();
  if (sent->load(std::memory_order_relaxed) == now) return;
  if (sent->exchange(now, std::memory_order_relaxed) != now)
    telemetry::kernel_name(function_id, name);
}

CUresult keep_resident(TouchSet& t, CUstream, bool) {
  return g_res->keep_resident(t);
}

CUresult keep_resident_captured(TouchSet& t) {
  return g_res->keep_resident(t, /*for_capture=*/true);
}

std::vector<std::uint64_t> take_captured() {
  return g_res->take_captured();
}

void release_graph(const std::vector<std::uint64_t>& ids) {
  g_res->release_graph(ids);
}

CUresult keep_all_resident(const char* why) {
  return g_res->keep_all_resident(why);
}

CUresult keep_resident_at(CUdeviceptr addr, const char* why) {
  if (!g_fast->active.load()) return CUDA_SUCCESS;
  Region* r = g_fast->map.find(addr);
  if (!r) return CUDA_SUCCESS;
  GSWAP_LOG(kInfo, "%s: region at 0x%llx stays resident", why, (unsigned long long)r->base);
  TouchSet t;
  t.add(r);
  return g_res->keep_resident(t);
}

void stream_created(CUstream stream, unsigned flags) {
  if (ready()) g_res->stream_created(stream, flags);
}

CUcontext stream_destroyed(CUstream stream) {
  return g_res->stream_destroyed(stream);
}
void stream_destroy_failed(CUstream stream, CUcontext tracked) {
  g_res->stream_destroy_failed(stream, tracked);
}

void capture_begin() {
  g_res->capture_begin();
}
void capture_end() {
  g_res->capture_end();
}

int mark_iteration() {
  if (!ready()) return GSWAP_ERROR_NOT_READY;
  telemetry::iteration_mark(g_fast->seq.load(std::memory_order_relaxed));
  timeline::iteration(monotonic_ns());
  return GSWAP_OK;
}

int name_region(std::uint64_t ptr, const char* name) {
  if (!ready()) return GSWAP_ERROR_NOT_READY;
  return g_res->name_region(ptr, name) ? GSWAP_OK : GSWAP_ERROR_INVALID;
}

int register_recompute(std::uint64_t ptr, std::uint64_t bytes, const unsigned long long* sources,
                       int num_sources, double cost_us, gswap_recompute_fn fn, void* ctx) {
  if (!ready()) return GSWAP_ERROR_NOT_READY;
  return g_res->register_recompute(ptr, bytes, sources, num_sources, cost_us, fn, ctx);
}

int unregister_recompute(std::uint64_t ptr) {
  if (!ready()) return GSWAP_ERROR_NOT_READY;
  return g_res->unregister_recompute(ptr);
}

void apply_budget(std::uint64_t bytes) {
  if (!ready()) return;
  g_res->set_budget(bytes);
  telemetry::publish_counters(counters());
}

void announce_live_regions() {
  if (!ready()) {
    telemetry::open_events();
    return;
  }
  // Under the residency mutex region_alloc and region_free emit under: a region allocated before
  // this point is announced here, one allocated after is reported by its own event, and a region
  // freed meanwhile is neither. One pass over the live list, no CUDA calls.
  g_res->for_each_live(
      [](void*) {
        telemetry::open_events();
        std::uint64_t device_ns = 0, host_ns = 0;
        if (g_res->timings().clock_pair(&device_ns, &host_ns)) telemetry::clock(device_ns, host_ns);
      },
      [](const Region& r, void*) {
        telemetry::announce_region(r.id, r.base, r.size, r.alloc_seq, 0);
        if (r.name[0]) telemetry::region_name(r.id, r.name);
        announce_recomputable(r);
      },
      nullptr);
}

}  // namespace gswap::interpose
