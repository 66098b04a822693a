// cupti_timing.cpp: CUPTI's activity API as a source of access timings (see cupti_timing.h).
#include "interpose/cupti_timing.h"

#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_result.h>
#include <cupti_version.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "interpose/clock.h"
#include "interpose/command_queue.h"
#include "interpose/cupti_join.h"
#include "interpose/driver.h"
#include "interpose/log.h"

namespace gswap::interpose::cupti {
namespace {

constexpr CUpti_ExternalCorrelationKind kKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
constexpr std::size_t kBufferBytes = 256u << 10;  // about 1,200 kernel records
constexpr std::uint64_t kFlushEveryNs = 100'000'000;
// Measured launches with no record back for this long: CUPTI does not deliver to us with the
// default flush; after as long again with forced flushes (which return every buffer at once),
// it no longer delivers at all.
constexpr std::uint64_t kSilenceNs = 3'000'000'000;
constexpr std::uint64_t kForcedSilenceNs = 1'000'000'000;
constexpr std::uint64_t kSilenceLaunches = 256;
// The activity kinds gswap enables. The kernel, copy and memset records of CUDA 13's CUPTI
// (CUpti_ActivityKernel10, Memcpy6, Memset4) are the layouts read below. CUPTI writes an external
// correlation record only beside the driver API record of the call
// (cuptiActivityPushExternalCorrelationId: "when a CUPTI activity API record is created while
// within an external API region"), so the driver kind is enabled too, and its records skipped.
// Without it, an H200 delivered thousands of kernel records and no external one; with the API
// records of the timed calls alone (cuptiActivityEnableDriverApi, by callback id), neither.
constexpr CUpti_ActivityKind kKinds[] = {
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, CUPTI_ACTIVITY_KIND_DRIVER,
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};

struct Api {
  CUptiResult (*get_version)(std::uint32_t*);
  CUptiResult (*result_string)(CUptiResult, const char**);
  CUptiResult (*register_callbacks)(CUpti_BuffersCallbackRequestFunc,
                                    CUpti_BuffersCallbackCompleteFunc);
  CUptiResult (*register_timestamp)(CUpti_TimestampCallbackFunc);  // may be missing
  CUptiResult (*get_timestamp)(std::uint64_t*);
  CUptiResult (*enable)(CUpti_ActivityKind);
  CUptiResult (*disable)(CUpti_ActivityKind);
  CUptiResult (*flush_all)(std::uint32_t);
  CUptiResult (*next_record)(std::uint8_t*, std::size_t, CUpti_Activity**);
  CUptiResult (*push)(CUpti_ExternalCorrelationKind, std::uint64_t);
  CUptiResult (*pop)(CUpti_ExternalCorrelationKind, std::uint64_t*);
  // The callback API, for the accesses the CUDA runtime makes (may be missing).
  CUptiResult (*subscribe)(CUpti_SubscriberHandle*, CUpti_CallbackFunc, void*);
  CUptiResult (*enable_domain)(std::uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle);
};

bool g_wanted = false;
bool g_forked = false;  // a child after fork: never
char g_path[1024] = {};
Api g_api = {};
std::atomic<bool> g_active{false};
std::atomic<std::uint64_t> g_begun{0};
// CUPTI's timestamps plus this are CLOCK_MONOTONIC (0 when CUPTI was given that clock).
std::atomic<std::int64_t> g_offset_ns{0};

// The buffer callbacks' state.
std::mutex g_join_mutex;
Join g_join;
std::uint64_t g_lost_reported = 0;              // g_join_mutex
CommandQueue<Timing, 16384> g_done;             // callback -> swapper
std::atomic<std::uint64_t> g_done_overflow{0};  // timings the queue had no room for
std::atomic<std::uint64_t> g_incomplete{0};     // activity records without their timestamps
// Accesses of runtime calls that made several (none of them timed: see t_runtime_depth).
std::atomic<std::uint64_t> g_unpaired{0};
// What the callback was given, for the log line that says why CUPTI was given up.
struct Delivered {
  std::atomic<std::uint64_t> buffers{0}, kernels{0}, copies{0}, memsets{0}, externals{0}, apis{0},
      runtime_accesses{0}, joined{0};
};
Delivered g_delivered;

// An access made inside a CUDA runtime call (cudaLaunchKernel calling our cuLaunchKernel): CUPTI
// writes no driver API record for a driver call the runtime makes, so no external correlation
// record either, and the kernel's record carries the runtime call's correlation id. The runtime
// domain's callbacks (cuptiSubscribe) say when a runtime call begins and ends on this thread and
// give its correlation id at the end; begin() notes the accesses made in between. A call that
// made exactly one is paired with it; one that made several is paired with none (their records
// may share the call's correlation id, and one access must never get another's time): all are
// counted as skipped. Nested runtime calls: the innermost call the first access was made in.
thread_local int t_runtime_depth __attribute__((tls_model("initial-exec"))) = 0;
thread_local int t_pending_depth __attribute__((tls_model("initial-exec"))) = 0;
thread_local std::uint32_t t_pending __attribute__((tls_model("initial-exec"))) = 0;  // accesses
thread_local std::uint64_t t_pending_seq __attribute__((tls_model("initial-exec"))) = 0;

// Runtime calls paired with their access, from application threads to whichever thread holds
// g_join_mutex next (buffer_completed, poll): an application thread never waits for a buffer
// being parsed.
struct Pair {
  std::uint32_t correlation = 0;
  std::uint64_t seq = 0;
};
CommandQueue<Pair, 16384> g_pairs;
std::atomic<std::uint64_t> g_pairs_overflow{0};  // pairs the queue had no room for
CUpti_SubscriberHandle g_subscriber = nullptr;   // held while CUPTI times accesses

std::uint64_t CUPTIAPI host_clock() {
  return monotonic_ns();
}

// A joined timing, to the swapper (g_join_mutex held).
void deliver(const Timing& t) {
  g_delivered.joined.fetch_add(1, std::memory_order_relaxed);
  if (!g_done.push(t)) g_done_overflow.fetch_add(1, std::memory_order_relaxed);
}

// The runtime calls paired since the last call, into the join (g_join_mutex held).
void join_pairs() {
  Pair p;
  Timing t;
  while (g_pairs.pop(&p))
    if (g_join.external(p.correlation, p.seq, &t)) deliver(t);
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  void* p = nullptr;
  if (posix_memalign(&p, 8, kBufferBytes) != 0) p = nullptr;
  *buffer = static_cast<std::uint8_t*>(p);
  *size = p ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t,
                               std::size_t valid) {
  if (!buffer) return;
  g_delivered.buffers.fetch_add(1, std::memory_order_relaxed);
  auto count = [](std::atomic<std::uint64_t>& c) { c.fetch_add(1, std::memory_order_relaxed); };
  if (valid && g_api.next_record) {
    std::lock_guard<std::mutex> lock(g_join_mutex);
    join_pairs();
    CUpti_Activity* rec = nullptr;
    while (g_api.next_record(buffer, valid, &rec) == CUPTI_SUCCESS) {
      Timing t;
      bool got = false;
      // An activity's times, or false (counted) for a record delivered before its work ended.
      auto times = [&](std::uint64_t start, std::uint64_t end, std::uint32_t correlation) {
        if (start == 0 || end < start) {
          g_incomplete.fetch_add(1, std::memory_order_relaxed);
          return false;
        }
        return g_join.activity(correlation, start, end, &t);
      };
      switch (rec->kind) {
        case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
          count(g_delivered.externals);
          auto* r = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(rec);
          if (r->externalKind == kKind) got = g_join.external(r->correlationId, r->externalId, &t);
          break;
        }
        case CUPTI_ACTIVITY_KIND_DRIVER:  // enabled for the external records beside them
          count(g_delivered.apis);
          break;
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          count(g_delivered.kernels);
          auto* r = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
          got = times(r->start, r->end, r->correlationId);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          count(g_delivered.copies);
          auto* r = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
          got = times(r->start, r->end, r->correlationId);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          count(g_delivered.memsets);
          auto* r = reinterpret_cast<const CUpti_ActivityMemset4*>(rec);
          got = times(r->start, r->end, r->correlationId);
          break;
        }
        default:
          break;
      }
      if (got) deliver(t);
    }
  }
  std::free(buffer);
}

// The runtime domain's API callback: pairs the runtime call an access was made in with the
// access's seq, as an external correlation record would (see t_runtime_depth).
void CUPTIAPI api_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId, const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RUNTIME_API || !data) return;
  const auto* cb = static_cast<const CUpti_CallbackData*>(data);
  if (cb->callbackSite == CUPTI_API_ENTER) {
    ++t_runtime_depth;
    return;
  }
  // The end of a call whose beginning came before we subscribed leaves the depth at 0.
  if (t_runtime_depth > 0) --t_runtime_depth;
  if (!t_pending || t_runtime_depth >= t_pending_depth) return;  // not the call they were made in
  const std::uint32_t n = t_pending;
  t_pending = 0;
  if (n > 1) {
    g_unpaired.fetch_add(n, std::memory_order_relaxed);
    return;
  }
  if (!g_pairs.push(Pair{cb->correlationId, t_pending_seq}))
    g_pairs_overflow.fetch_add(1, std::memory_order_relaxed);
}

const char* result_name(CUptiResult r) {
  const char* s = nullptr;
  if (g_api.result_string && g_api.result_string(r, &s) == CUPTI_SUCCESS && s) return s;
  return "unknown CUPTI error";
}

// Loads libcupti and resolves what gswap calls; the handle, or nullptr with *why set.
void* load(const char** why) {
  static const char* const kDefaults[] = {"libcupti.so.13", "libcupti.so",
                                          "/usr/local/cuda/lib64/libcupti.so.13",
                                          "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13"};
  // A process has one CUPTI: the one the program loaded already (PyTorch's, say), if any.
  void* h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
  if (h) {
    GSWAP_LOG(kInfo, "GSWAP_TIMING=cupti: the program's libcupti.so.13, loaded already, is used");
  } else if (g_path[0]) {
    h = dlopen(g_path, RTLD_NOW | RTLD_LOCAL);
  } else {
    for (const char* name : kDefaults)
      if ((h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
  }
  if (!h) {
    *why = "libcupti cannot be loaded";
    return nullptr;
  }
  auto sym = [&](const char* name) { return real_dlsym(h, name); };
#define GSWAP_CUPTI_SYM(field, name) \
  g_api.field = reinterpret_cast<decltype(g_api.field)>(sym(name));
  GSWAP_CUPTI_SYM(get_version, "cuptiGetVersion")
  GSWAP_CUPTI_SYM(result_string, "cuptiGetResultString")
  GSWAP_CUPTI_SYM(register_callbacks, "cuptiActivityRegisterCallbacks")
  GSWAP_CUPTI_SYM(register_timestamp, "cuptiActivityRegisterTimestampCallback")
  GSWAP_CUPTI_SYM(get_timestamp, "cuptiGetTimestamp")
  GSWAP_CUPTI_SYM(enable, "cuptiActivityEnable")
  GSWAP_CUPTI_SYM(disable, "cuptiActivityDisable")
  GSWAP_CUPTI_SYM(flush_all, "cuptiActivityFlushAll")
  GSWAP_CUPTI_SYM(next_record, "cuptiActivityGetNextRecord")
  GSWAP_CUPTI_SYM(push, "cuptiActivityPushExternalCorrelationId")
  GSWAP_CUPTI_SYM(pop, "cuptiActivityPopExternalCorrelationId")
  GSWAP_CUPTI_SYM(subscribe, "cuptiSubscribe")
  GSWAP_CUPTI_SYM(enable_domain, "cuptiEnableDomain")
  GSWAP_CUPTI_SYM(unsubscribe, "cuptiUnsubscribe")
#undef GSWAP_CUPTI_SYM
  if (!g_api.get_version || !g_api.register_callbacks || !g_api.get_timestamp || !g_api.enable ||
      !g_api.disable || !g_api.flush_all || !g_api.next_record || !g_api.push || !g_api.pop) {
    *why = "libcupti lacks the activity API";
    return nullptr;
  }
  return h;
}

class Service final : public ExternalTimings {
 public:
  void start() override;
  bool poll(Timings& timings, Timings::Sink& sink) override;

 private:
  std::uint64_t last_flush_ns_ = 0;
  std::uint64_t last_delivery_ns_ = 0, begun_at_delivery_ = 0;
  std::uint64_t overflow_counted_ = 0;
  bool forced_ = false;  // flushing with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
};

// What CUPTI delivered so far, for the log.
void describe_deliveries(char* out, std::size_t size) {
  auto v = [](const std::atomic<std::uint64_t>& c) {
    return (unsigned long long)c.load(std::memory_order_relaxed);
  };
  std::snprintf(out, size,
                "%llu buffers so far: %llu kernel, %llu copy, %llu memset, %llu driver API and "
                "%llu external correlation records, %llu accesses made in runtime calls, %llu "
                "accesses timed",
                v(g_delivered.buffers), v(g_delivered.kernels), v(g_delivered.copies),
                v(g_delivered.memsets), v(g_delivered.apis), v(g_delivered.externals),
                v(g_delivered.runtime_accesses), v(g_delivered.joined));
}

Service g_service;

void Service::start() {
  if (!g_wanted) return;
  g_wanted = false;  // once
  const char* where = g_path[0] ? g_path : "libcupti.so.13";
  const char* why = nullptr;
  if (!load(&why)) {
    GSWAP_LOG(kWarn, "GSWAP_TIMING=cupti: %s (%s): kernels are timed with events", why, where);
    return;
  }
  std::uint32_t version = 0;
  CUptiResult r = g_api.get_version(&version);
  // CUDA 13's CUPTI numbers its API 130000 and up; earlier ones (CUDA 12: 18 to 26) write other
  // record layouts.
  if (r != CUPTI_SUCCESS || version / 10000 != CUPTI_API_VERSION / 10000) {
    GSWAP_LOG(kWarn,
              "GSWAP_TIMING=cupti: %s has CUPTI API version %u, gswap reads version %u's records: "
              "kernels are timed with events",
              where, version, (unsigned)CUPTI_API_VERSION);
    return;
  }
  // CUPTI's records on the library's clock; without that call, an offset measured now.
  if (!g_api.register_timestamp || g_api.register_timestamp(host_clock) != CUPTI_SUCCESS) {
    std::uint64_t cupti_now = 0;
    if (g_api.get_timestamp(&cupti_now) == CUPTI_SUCCESS)
      g_offset_ns.store(
          static_cast<std::int64_t>(monotonic_ns()) - static_cast<std::int64_t>(cupti_now),
          std::memory_order_relaxed);
  }
  r = g_api.register_callbacks(buffer_requested, buffer_completed);
  if (r != CUPTI_SUCCESS) {
    GSWAP_LOG(kWarn,
              "GSWAP_TIMING=cupti: cuptiActivityRegisterCallbacks -> %d (%s), another CUPTI "
              "client may hold them: kernels are timed with events",
              (int)r, result_name(r));
    return;
  }
  std::size_t enabled = 0;
  for (; enabled < sizeof kKinds / sizeof kKinds[0]; ++enabled)
    if ((r = g_api.enable(kKinds[enabled])) != CUPTI_SUCCESS) break;
  if (enabled < sizeof kKinds / sizeof kKinds[0]) {
    GSWAP_LOG(kWarn,
              "GSWAP_TIMING=cupti: cuptiActivityEnable(%d) -> %d (%s): kernels are timed with "
              "events",
              (int)kKinds[enabled], (int)r, result_name(r));
    while (enabled-- > 0) g_api.disable(kKinds[enabled]);
    return;
  }
  // The runtime's calls, for the accesses made inside them. Without them (another subscriber,
  // such as a profiler, holds CUPTI's callbacks), the driver calls a program makes itself are
  // still timed.
  CUpti_SubscriberHandle subscriber = nullptr;
  if (!g_api.subscribe || !g_api.enable_domain || !g_api.unsubscribe) {
    GSWAP_LOG(kWarn,
              "GSWAP_TIMING=cupti: %s lacks the callback API: accesses made through the CUDA "
              "runtime are not timed",
              where);
  } else if ((r = g_api.subscribe(&subscriber, api_callback, nullptr)) != CUPTI_SUCCESS ||
             (r = g_api.enable_domain(1, subscriber, CUPTI_CB_DOMAIN_RUNTIME_API)) !=
                 CUPTI_SUCCESS) {
    if (subscriber) g_api.unsubscribe(subscriber);  // CUPTI has one subscriber: not kept idle
    GSWAP_LOG(kWarn,
              "GSWAP_TIMING=cupti: cuptiSubscribe or cuptiEnableDomain -> %d (%s), another CUPTI "
              "client may hold the callbacks: accesses made through the CUDA runtime are not "
              "timed",
              (int)r, result_name(r));
  } else {
    g_subscriber = subscriber;
  }
  last_delivery_ns_ = monotonic_ns();
  g_active.store(true, std::memory_order_release);
  GSWAP_LOG(kInfo, "kernels, copies and memsets are timed with CUPTI (API version %u)", version);
}

bool Service::poll(Timings& timings, Timings::Sink& sink) {
  if (!g_active.load(std::memory_order_relaxed)) return false;
  const std::uint64_t now = monotonic_ns();
  const std::uint64_t begun = g_begun.load(std::memory_order_relaxed);
  // Buffers reach the callback when flushed. The default flush returns only those whose records
  // are all complete (a forced one also returns records of work still running, without their
  // timestamps); the kernel kind records every kernel, measured or not, so on a busy device a
  // buffer may complete only once it is full. Flushing every 100 ms whatever is being measured
  // gets an iteration's timings to gswapd soon after its work has ended.
  if (now - last_flush_ns_ >= kFlushEveryNs) {
    last_flush_ns_ = now;
    CUptiResult r = g_api.flush_all(forced_ ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
    if (r != CUPTI_SUCCESS)
      GSWAP_LOG_ONCE(kWarn, "cuptiActivityFlushAll -> %d (%s)", (int)r, result_name(r));
  }
  {
    std::lock_guard<std::mutex> lock(g_join_mutex);
    join_pairs();  // those whose records came first pair now
  }
  const std::int64_t offset = g_offset_ns.load(std::memory_order_relaxed);
  bool did = false;
  Timing t;
  while (g_done.pop(&t)) {
    timings.external_access(sink, t.seq, static_cast<std::uint64_t>(t.start_ns + offset),
                            static_cast<std::uint64_t>(t.end_ns + offset));
    did = true;
  }
  if (did) last_delivery_ns_ = now, begun_at_delivery_ = begun;
  std::uint64_t lost = 0;
  {
    std::lock_guard<std::mutex> lock(g_join_mutex);
    lost = g_join.lost() - g_lost_reported;
    g_lost_reported = g_join.lost();
  }
  const std::uint64_t overflow = g_done_overflow.load(std::memory_order_relaxed) +
                                 g_incomplete.load(std::memory_order_relaxed) +
                                 g_unpaired.load(std::memory_order_relaxed) +
                                 g_pairs_overflow.load(std::memory_order_relaxed);
  timings.count_skips(lost + overflow - overflow_counted_);
  overflow_counted_ = overflow;
  if (begun - begun_at_delivery_ >= kSilenceLaunches &&
      now - last_delivery_ns_ >= (forced_ ? kForcedSilenceNs : kSilenceNs)) {
    char delivered[256];
    describe_deliveries(delivered, sizeof delivered);
    if (!forced_) {
      // The default flush returns only buffers whose every record is complete; on a device kept
      // busy the current buffer always holds work still running (seen on an H200). A forced
      // flush returns it anyway: a record of work still running then has no timestamps, and that
      // access goes untimed (counted in timing_skips).
      forced_ = true;
      GSWAP_LOG(kInfo,
                "CUPTI delivered no record for the last %llu measured accesses in %.1f s (%s): "
                "flushing with CUPTI_ACTIVITY_FLAG_FLUSH_FORCED from now on",
                (unsigned long long)(begun - begun_at_delivery_), (now - last_delivery_ns_) / 1e9,
                delivered);
      last_delivery_ns_ = now, begun_at_delivery_ = begun;
      last_flush_ns_ = 0;  // at the next poll
      return true;
    }
    // Our activity kinds stay enabled: the client that took the callbacks may rely on them. The
    // runtime callbacks are given up: CUPTI has one subscriber, which a profiler may want.
    g_active.store(false, std::memory_order_relaxed);
    if (g_subscriber) {
      g_api.unsubscribe(g_subscriber);
      g_subscriber = nullptr;
    }
    GSWAP_LOG(kWarn,
              "CUPTI delivered no record for the last %llu measured accesses in %.1f s, forced "
              "flushes included (%s; another CUPTI client, such as a profiler, may have taken the "
              "activity buffers): kernels are timed with events from now on",
              (unsigned long long)(begun - begun_at_delivery_), (now - last_delivery_ns_) / 1e9,
              delivered);
    did = true;
  }
  return did;
}

}  // namespace

void configure(bool wanted, const char* path) {
  g_wanted = wanted && !g_forked;
  std::strncpy(g_path, path ? path : "", sizeof g_path - 1);
}

bool active() {
  return g_active.load(std::memory_order_acquire);  // g_api was set before
}

void begin(std::uint64_t seq) {
  g_begun.fetch_add(1, std::memory_order_relaxed);
  g_api.push(kKind, seq);
  // Paired when the runtime call it is made in ends (api_callback), if it is that call's only
  // access.
  if (t_runtime_depth > 0) {
    g_delivered.runtime_accesses.fetch_add(1, std::memory_order_relaxed);
    if (t_pending++ == 0) t_pending_seq = seq, t_pending_depth = t_runtime_depth;
  }
}

void end() {
  std::uint64_t last = 0;
  g_api.pop(kKind, &last);
}

void forget_after_fork() {
  g_active.store(false, std::memory_order_relaxed);
  g_wanted = false;
  g_forked = true;
}

ExternalTimings& service() {
  return g_service;
}

}  // namespace gswap::interpose::cupti
