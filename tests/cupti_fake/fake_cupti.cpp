// fake_cupti.cpp: a stand-in libcupti for the tests of GSWAP_TIMING=cupti on simcuda (real CUPTI
// needs NVIDIA's driver). It implements the activity API calls libgswap makes, with CUDA 13's
// record layouts: each pop of an external correlation id becomes a call to cuLaunchKernel with a
// correlation id, and a kernel record whose start and end are the push and pop times on the
// registered timestamp clock. As real CUPTI does, it writes the external correlation record only
// beside a driver API record (CUpti_ActivityAPI), so only when CUPTI_ACTIVITY_KIND_DRIVER is
// enabled. To exercise the join, odd calls' kernel records come before their
// external records and every third call's external record waits for the next flush.
//
// With FAKE_CUPTI_RUNTIME=1, every bracketed access is made as if inside a CUDA runtime call
// (cudaLaunchKernel calling cuLaunchKernel), as a PyTorch program makes them: the push calls the
// runtime domain's API_ENTER callback of a cuptiSubscribe subscriber first, the pop its API_EXIT
// with the call's correlation id, and, as real CUPTI does for a driver call inside a runtime
// call, no driver API record and so no external correlation record is written; the kernel
// record carries the runtime call's correlation id.
//
// Environment (all optional):
//   FAKE_CUPTI_VERSION          what cuptiGetVersion says (default CUPTI_API_VERSION)
//   FAKE_CUPTI_REGISTER_RESULT  what cuptiActivityRegisterCallbacks returns (default 0)
//   FAKE_CUPTI_STOP_AFTER       deliver nothing after this many calls (another client took over)
//   FAKE_CUPTI_INCOMPLETE_EVERY every Nth call's kernel record has no timestamps (work still
//                               running, as a forced flush returns it)
//   FAKE_CUPTI_FORCED_ONLY      1: a flush without CUPTI_ACTIVITY_FLAG_FLUSH_FORCED delivers
//                               nothing (as on a busy GPU, where the buffer being filled always
//                               holds work still running)
//   FAKE_CUPTI_RUNTIME          N > 0: accesses are made inside runtime calls (above), N in
//                               each (API_ENTER before the first, API_EXIT after the last), whose
//                               kernel records all carry the call's correlation id
//   FAKE_CUPTI_DUR_FROM_ID      1: a kernel record lasts (external id % 1000 + 1) us, so a time
//                               given to the wrong access shows
//   FAKE_CUPTI_SUBSCRIBE_RESULT what cuptiSubscribe returns (default 0; 39: another subscriber)
//   FAKE_CUPTI_REPORT           a file that gets "calls=N delivered=M flushes=F forced=G
//                               api_kind=0|1 runtime_exits=R subscribed=0|1" at exit (calls:
//                               correlation ids given; api_kind 1: CUPTI_ACTIVITY_KIND_DRIVER
//                               enabled; R: API_EXIT callbacks made to a subscriber; subscribed
//                               1: a subscriber still held at exit)
#include <cupti_activity.h>
#include <cupti_callbacks.h>
#include <cupti_driver_cbid.h>
#include <cupti_result.h>
#include <cupti_runtime_cbid.h>
#include <cupti_version.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

struct Call {
  std::uint64_t external;
  std::uint32_t correlation;
  std::uint64_t start, end;
  bool runtime;  // made inside a runtime call: no driver API or external record
};

std::mutex g_mutex;
CUpti_BuffersCallbackRequestFunc g_request = nullptr;
CUpti_BuffersCallbackCompleteFunc g_complete = nullptr;
CUpti_TimestampCallbackFunc g_clock = nullptr;
std::vector<Call> g_calls;  // made since the last flush
std::vector<Call> g_held;   // external records held back one flush
std::uint32_t g_correlation = 0;
std::uint64_t g_delivered = 0, g_flushes = 0, g_forced = 0;
bool g_api_kind = false;  // CUPTI_ACTIVITY_KIND_DRIVER enabled
CUpti_CallbackFunc g_subscriber = nullptr;
void* g_subscriber_data = nullptr;
bool g_runtime_domain = false;  // the subscriber enabled CUPTI_CB_DOMAIN_RUNTIME_API
std::uint64_t g_runtime_exits = 0;
thread_local std::vector<std::pair<std::uint64_t, std::uint64_t>> t_stack;  // (id, start)

std::uint64_t env_u64(const char* name, std::uint64_t fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::strtoull(v, nullptr, 0) : fallback;
}

std::uint64_t now() {
  if (g_clock) return g_clock();
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);  // another clock than the library's, as CUPTI's own is
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// Records are laid out back to back, 8-byte aligned, each behind its size.
void put(std::vector<std::uint8_t>* out, const void* rec, std::uint32_t size) {
  std::size_t at = out->size();
  out->resize(at + 8 + ((size + 7) & ~7u));
  std::memcpy(out->data() + at, &size, sizeof size);
  std::memcpy(out->data() + at + 8, rec, size);
}

void put_external(std::vector<std::uint8_t>* out, const Call& c) {
  CUpti_ActivityExternalCorrelation r{};
  r.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  r.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
  r.externalId = c.external;
  r.correlationId = c.correlation;
  put(out, &r, sizeof r);
}

// The driver API record of the call, which the external correlation record precedes.
void put_api(std::vector<std::uint8_t>* out, const Call& c) {
  CUpti_ActivityAPI r{};
  r.kind = CUPTI_ACTIVITY_KIND_DRIVER;
  r.cbid = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
  r.start = c.start;
  r.end = c.start + 1;
  r.correlationId = c.correlation;
  put(out, &r, sizeof r);
}

// A call's external correlation and API records: written only when the driver kind is enabled.
void put_call(std::vector<std::uint8_t>* out, const Call& c) {
  if (!g_api_kind || c.runtime) return;
  put_external(out, c);
  put_api(out, c);
}

void put_kernel(std::vector<std::uint8_t>* out, const Call& c) {
  CUpti_ActivityKernel10 r{};
  r.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  // A record of work still running, as a forced flush delivers it: no timestamps.
  const std::uint64_t every = env_u64("FAKE_CUPTI_INCOMPLETE_EVERY", 0);
  const bool incomplete = every && c.correlation % every == 0;
  r.start = incomplete ? 0 : c.start;
  r.end = incomplete ? 0 : c.end;
  r.correlationId = c.correlation;
  r.name = "fake_kernel";
  put(out, &r, sizeof r);
}

struct Report {
  ~Report() {
    const char* path = std::getenv("FAKE_CUPTI_REPORT");
    if (!path || !*path) return;
    if (FILE* f = std::fopen(path, "w")) {
      std::fprintf(f,
                   "calls=%u delivered=%llu flushes=%llu forced=%llu api_kind=%d "
                   "runtime_exits=%llu subscribed=%d\n",
                   g_correlation, (unsigned long long)g_delivered, (unsigned long long)g_flushes,
                   (unsigned long long)g_forced, g_api_kind ? 1 : 0,
                   (unsigned long long)g_runtime_exits, g_subscriber ? 1 : 0);
      std::fclose(f);
    }
  }
} g_report;

}  // namespace

FAKE_EXPORT CUptiResult cuptiGetVersion(std::uint32_t* version) {
  *version = static_cast<std::uint32_t>(env_u64("FAKE_CUPTI_VERSION", CUPTI_API_VERSION));
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetResultString(CUptiResult result, const char** str) {
  *str = result == CUPTI_SUCCESS ? "CUPTI_SUCCESS" : "CUPTI_ERROR_FAKE";
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterCallbacks(CUpti_BuffersCallbackRequestFunc request,
                                                       CUpti_BuffersCallbackCompleteFunc done) {
  auto r = static_cast<CUptiResult>(env_u64("FAKE_CUPTI_REGISTER_RESULT", 0));
  if (r != CUPTI_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(g_mutex);
  g_request = request;
  g_complete = done;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityRegisterTimestampCallback(CUpti_TimestampCallbackFunc f) {
  g_clock = f;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiGetTimestamp(std::uint64_t* ts) {
  *ts = now();
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityEnable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (kind == CUPTI_ACTIVITY_KIND_DRIVER) g_api_kind = true;
  return CUPTI_SUCCESS;
}
FAKE_EXPORT CUptiResult cuptiActivityDisable(CUpti_ActivityKind kind) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (kind == CUPTI_ACTIVITY_KIND_DRIVER) g_api_kind = false;
  return CUPTI_SUCCESS;
}

// Accesses per runtime call (FAKE_CUPTI_RUNTIME: 0, none made inside one), and how many this
// thread's current call has made.
std::uint64_t per_runtime_call() {
  static const std::uint64_t n = env_u64("FAKE_CUPTI_RUNTIME", 0);
  return n;
}
bool runtime_mode() {
  return per_runtime_call() != 0;
}
thread_local std::uint64_t t_in_call = 0;
thread_local std::uint32_t t_call_correlation = 0;

// The runtime domain's callback at one end of a call, when a subscriber enabled it.
void runtime_callback(CUpti_ApiCallbackSite site, std::uint32_t correlation) {
  CUpti_CallbackFunc f;
  void* data;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (!g_subscriber || !g_runtime_domain) return;
    f = g_subscriber;
    data = g_subscriber_data;
    if (site == CUPTI_API_EXIT) ++g_runtime_exits;
  }
  CUpti_CallbackData cb{};
  cb.callbackSite = site;
  cb.functionName = "cudaLaunchKernel";
  cb.correlationId = correlation;
  f(data, CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, &cb);
}

FAKE_EXPORT CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* subscriber,
                                       CUpti_CallbackFunc callback, void* data) {
  auto r = static_cast<CUptiResult>(env_u64("FAKE_CUPTI_SUBSCRIBE_RESULT", 0));
  if (r != CUPTI_SUCCESS) return r;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_subscriber) return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
  g_subscriber = callback;
  g_subscriber_data = data;
  *subscriber = reinterpret_cast<CUpti_SubscriberHandle>(&g_subscriber);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiUnsubscribe(CUpti_SubscriberHandle) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_subscriber = nullptr;
  g_runtime_domain = false;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiEnableDomain(std::uint32_t enable, CUpti_SubscriberHandle,
                                          CUpti_CallbackDomain domain) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) g_runtime_domain = enable != 0;
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityPushExternalCorrelationId(CUpti_ExternalCorrelationKind,
                                                               std::uint64_t id) {
  // Inside a runtime call, its API_ENTER came before the (first) driver call gswap brackets.
  if (runtime_mode() && t_in_call++ == 0) runtime_callback(CUPTI_API_ENTER, 0);
  t_stack.emplace_back(id, now());
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityPopExternalCorrelationId(CUpti_ExternalCorrelationKind,
                                                              std::uint64_t* last) {
  if (t_stack.empty()) return CUPTI_ERROR_QUEUE_EMPTY;
  auto [id, start] = t_stack.back();
  t_stack.pop_back();
  if (last) *last = id;
  std::uint64_t end = now();
  if (end <= start) end = start + 1000;
  if (env_u64("FAKE_CUPTI_DUR_FROM_ID", 0)) end = start + (id % 1000 + 1) * 1000;
  Call c;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    // The second access of a runtime call shares the call's correlation id.
    const bool same_call = runtime_mode() && t_in_call > 1;
    if (!same_call) t_call_correlation = ++g_correlation;
    c = Call{id, t_call_correlation, start, end, runtime_mode()};
    if (g_correlation <= env_u64("FAKE_CUPTI_STOP_AFTER", ~0ull)) g_calls.push_back(c);
  }
  // The runtime call ends after the (last) driver call gswap bracketed (here, at once).
  if (c.runtime && t_in_call == per_runtime_call()) {
    t_in_call = 0;
    runtime_callback(CUPTI_API_EXIT, c.correlation);
  }
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityFlushAll(std::uint32_t flags) {
  std::vector<std::uint8_t> records;
  CUpti_BuffersCallbackCompleteFunc complete;
  CUpti_BuffersCallbackRequestFunc request;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    ++g_flushes;
    const bool forced = flags & CUPTI_ACTIVITY_FLAG_FLUSH_FORCED;
    if (forced) ++g_forced;
    if (!forced && env_u64("FAKE_CUPTI_FORCED_ONLY", 0)) return CUPTI_SUCCESS;
    request = g_request;
    complete = g_complete;
    for (const Call& c : g_held) put_call(&records, c);
    g_held.clear();
    for (const Call& c : g_calls) {
      if (c.correlation % 3 == 0) {
        put_kernel(&records, c);
        g_held.push_back(c);
      } else if (c.correlation % 2) {
        put_kernel(&records, c);
        put_call(&records, c);
      } else {
        put_call(&records, c);
        put_kernel(&records, c);
      }
    }
    g_delivered += g_calls.size();
    g_calls.clear();
  }
  if (!request || !complete || records.empty()) return CUPTI_SUCCESS;
  // One buffer per flush, as large as the records need (a real client's may be smaller; CUPTI
  // then fills several).
  std::size_t at = 0;
  while (at < records.size()) {
    std::uint8_t* buffer = nullptr;
    std::size_t size = 0, max_records = 0;
    request(&buffer, &size, &max_records);
    if (!buffer || size < 64) return CUPTI_ERROR_OUT_OF_MEMORY;
    std::size_t n = 0;
    while (at + n < records.size()) {
      std::uint32_t rec = 0;
      std::memcpy(&rec, records.data() + at + n, sizeof rec);
      std::size_t len = 8 + ((rec + 7) & ~7u);
      if (n + len > size) break;
      n += len;
    }
    std::memcpy(buffer, records.data() + at, n);
    at += n;
    complete(nullptr, 0, buffer, size, n);
  }
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNextRecord(std::uint8_t* buffer, std::size_t valid,
                                                   CUpti_Activity** record) {
  std::size_t at = 0;
  if (*record) {
    std::uint8_t* cur = reinterpret_cast<std::uint8_t*>(*record);
    std::uint32_t size = 0;
    std::memcpy(&size, cur - 8, sizeof size);
    at = static_cast<std::size_t>(cur - buffer) + ((size + 7) & ~7u);
  }
  if (at + 8 > valid) return CUPTI_ERROR_MAX_LIMIT_REACHED;
  *record = reinterpret_cast<CUpti_Activity*>(buffer + at + 8);
  return CUPTI_SUCCESS;
}

FAKE_EXPORT CUptiResult cuptiActivityGetNumDroppedRecords(CUcontext, std::uint32_t,
                                                          std::size_t* dropped) {
  *dropped = 0;
  return CUPTI_SUCCESS;
}
