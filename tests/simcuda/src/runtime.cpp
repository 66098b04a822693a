// runtime.cpp: initialisation, settings, devices, contexts, error strings and fork handling.
//
// Each thread's context stack is thread-local; contexts themselves are guarded by handles_mu for
// creation and destruction. Settings are read once, by the first cuInit.
#include <pthread.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "internal.h"

namespace simcuda {

Global& g() {
  static Global* G = new Global;  // never destroyed: worker threads may outlive main()
  return *G;
}

bool live(const std::unordered_set<const void*>& set, const void* p) {
  std::shared_lock lk(g().handles_mu);
  return p && set.count(p) != 0;
}
void add_handle(std::unordered_set<const void*>& set, const void* p) {
  std::lock_guard lk(g().handles_mu);
  set.insert(p);
}
bool remove_handle(std::unordered_set<const void*>& set, const void* p) {
  std::lock_guard lk(g().handles_mu);
  return set.erase(p) != 0;
}

// Parses "2GiB", "512MiB", "1e9", "4096": bytes with an optional binary or decimal unit.
static uint64_t parse_bytes(const char* s, uint64_t dflt) {
  if (!s || !*s) return dflt;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  if (end == s || v < 0) return dflt;
  std::string unit(end);
  while (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  double mul = 1;
  if (unit.empty() || unit == "B")
    mul = 1;
  else if (unit == "KiB" || unit == "K" || unit == "k")
    mul = 1024.0;
  else if (unit == "MiB" || unit == "M")
    mul = 1024.0 * 1024;
  else if (unit == "GiB" || unit == "G")
    mul = 1024.0 * 1024 * 1024;
  else if (unit == "TiB" || unit == "T")
    mul = 1024.0 * 1024 * 1024 * 1024;
  else if (unit == "KB" || unit == "kB")
    mul = 1e3;
  else if (unit == "MB")
    mul = 1e6;
  else if (unit == "GB")
    mul = 1e9;
  else if (unit == "TB")
    mul = 1e12;
  else {
    std::fprintf(stderr, "simcuda: cannot parse size '%s', using default\n", s);
    return dflt;
  }
  return static_cast<uint64_t>(std::llround(v * mul));
}
static double parse_rate(const char* s) {
  if (!s || !*s) return 0;
  double v = std::strtod(s, nullptr);
  return v > 0 ? v : 0;
}

static void atfork_prepare() {
  g().handles_mu.lock();
  g().mem_mu.lock();
  g().capture_mu.lock();
}
static void atfork_release() {
  g().capture_mu.unlock();
  g().mem_mu.unlock();
  g().handles_mu.unlock();
}

CUresult check_init() {
  return g().initialized.load(std::memory_order_acquire) ? CUDA_SUCCESS
                                                         : CUDA_ERROR_NOT_INITIALIZED;
}

static void parse_setting(const char* env, const char* dflt, Size* out) {
  *out = parse_bytes(dflt, 0);
  *out = parse_bytes(std::getenv(env), *out);
}
static void parse_setting(const char* env, const char* dflt, Rate* out) {
  const char* v = std::getenv(env);
  *out = parse_rate(v && *v ? v : dflt);
}
static void parse_setting(const char* env, const char* dflt, Count* out) {
  const char* v = std::getenv(env);
  *out = std::atoi(v && *v ? v : dflt);
}
static void parse_setting(const char* env, const char* dflt, Text* out) {
  const char* v = std::getenv(env);
  *out = v ? v : dflt;
}

// Reads every setting once, at the first cuInit, before that call is counted, so that
// SIMCUDA_FAIL can already fail it. False when SIMCUDA_FAIL is malformed: cuInit then fails.
static bool read_settings() {
  Config& c = g().cfg;
#define SC_SETTING(ident, env, type, dflt, doc) parse_setting(env, dflt, &c.ident);
#include "settings.def"
#undef SC_SETTING
  // Left unset, the variable keeps whatever a program armed with simcudaInjectFailure.
  return c.fail.empty() || arm_failures_from_env(c.fail);
}

static void init_once() {
  Global& G = g();
  Config& c = G.cfg;
  if (c.granularity == 0 || (c.granularity & (c.granularity - 1)) || c.granularity % 4096) {
    std::fprintf(stderr,
                 "simcuda: SIMCUDA_GRANULARITY must be a power of two >= 4KiB; using 2MiB\n");
    c.granularity = 2ull << 20;
  }
  if (c.device_count < 1 || c.device_count > 16) {
    std::fprintf(stderr, "simcuda: SIMCUDA_DEVICE_COUNT must be 1..16; using 1\n");
    c.device_count = 1;
  }
  for (int i = 0; i < c.device_count; ++i) {
    auto* d = new Device;
    d->primary = new Ctx;
    d->primary->device = i;
    d->primary->primary = true;
    G.ctxs.insert(d->primary);
    G.devices.push_back(d);
  }
  pthread_atfork(atfork_prepare, atfork_release, atfork_release);
  register_stats_file();
  G.initialized.store(true, std::memory_order_release);
}

// ---- per-thread context stack ----
static thread_local std::vector<Ctx*> t_ctx_stack;

Ctx* current_ctx() {
  return t_ctx_stack.empty() ? nullptr : t_ctx_stack.back();
}

CUresult need_ctx(Ctx** out) {
  if (CUresult r = check_init()) return r;
  Ctx* c = current_ctx();
  if (!c || !live(g().ctxs, c)) return CUDA_ERROR_INVALID_CONTEXT;
  *out = c;
  return CUDA_SUCCESS;
}

static CUresult check_dev(CUdevice d) {
  if (CUresult r = check_init()) return r;
  if (d < 0 || d >= static_cast<int>(g().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext* pctx, unsigned flags, CUdevice dev) {
  if (CUresult r = check_dev(dev)) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  auto* c = new Ctx;
  c->device = dev;
  c->flags = flags;
  add_handle(g().ctxs, c);
  t_ctx_stack.push_back(c);
  *pctx = reinterpret_cast<CUcontext>(c);
  return CUDA_SUCCESS;
}

}  // namespace simcuda

using namespace simcuda;

SC_EXPORT CUresult cuInit(unsigned int flags) {
  static std::once_flag settings_once;
  static bool settings_ok = false;
  std::call_once(settings_once, [] { settings_ok = read_settings(); });
  SC_ENTRY(cuInit);
  if (!settings_ok || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  static std::once_flag once;
  std::call_once(once, init_once);
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuDriverGetVersion(int* v) {
  SC_ENTRY(cuDriverGetVersion);
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = 13000;
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuDeviceGet(CUdevice* d, int ordinal) {
  SC_ENTRY(cuDeviceGet);
  if (CUresult r = check_init()) return r;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (ordinal < 0 || ordinal >= static_cast<int>(g().devices.size()))
    return CUDA_ERROR_INVALID_DEVICE;
  *d = ordinal;
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuDeviceGetCount(int* n) {
  SC_ENTRY(cuDeviceGetCount);
  if (CUresult r = check_init()) return r;
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = static_cast<int>(g().devices.size());
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  SC_ENTRY(cuDeviceGetName);
  if (CUresult r = check_dev(dev)) return r;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  std::snprintf(name, static_cast<size_t>(len), "%s simulated GPU %d", SIMCUDA_DEVICE_NAME_PREFIX,
                dev);
  return CUDA_SUCCESS;
}

static CUresult device_uuid(CUuuid* uuid, CUdevice dev) {
  if (CUresult r = check_dev(dev)) return r;
  if (!uuid) return CUDA_ERROR_INVALID_VALUE;
  // Deterministic per ordinal: "simcuda" tag, then the ordinal.
  static const char tag[8] = {'s', 'i', 'm', 'c', 'u', 'd', 'a', 0};
  std::memcpy(uuid->bytes, tag, 8);
  for (int i = 0; i < 8; ++i) uuid->bytes[8 + i] = static_cast<char>((dev >> (8 * (i % 4))) & 0xff);
  uuid->bytes[15] = static_cast<char>(0x5c);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  SC_ENTRY(cuDeviceGetUuid_v2);
  return device_uuid(uuid, dev);
}
SC_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  SC_ENTRY(cuDeviceGetUuid);
  return device_uuid(uuid, dev);
}

static CUresult device_total_mem(size_t* bytes, CUdevice dev) {
  if (CUresult r = check_dev(dev)) return r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  *bytes = g().cfg.capacity;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  SC_ENTRY(cuDeviceTotalMem_v2);
  return device_total_mem(bytes, dev);
}
SC_EXPORT CUresult cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  SC_ENTRY(cuDeviceTotalMem);
  size_t b = 0;
  CUresult r = device_total_mem(&b, dev);
  if (r == CUDA_SUCCESS) *bytes = b > 0xffffffffu ? 0xffffffffu : static_cast<unsigned>(b);
  return r;
}

SC_EXPORT CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  SC_ENTRY(cuDeviceGetAttribute);
  if (CUresult r = check_dev(dev)) return r;
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  int v = 0;
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      v = 64;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      v = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      v = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      v = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      v = 49152;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      v = 232448;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR:
      v = 233472;
      break;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY:
      v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH:
      v = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      v = 1980000;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE:
      v = 2619000;
      break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH:
      v = 5120;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      v = 50 << 20;
      break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT:
      v = 512;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      v = 132;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR:
      v = 2048;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR:
      v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      v = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT:
      v = 2;
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR:
      v = 1;  // memops.cpp
      break;
    case CU_DEVICE_ATTRIBUTE_INTEGRATED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_TCC_DRIVER:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_ECC_ENABLED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID:
      v = dev + 1;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_MODE:
      v = CU_COMPUTEMODE_DEFAULT;
      break;
    case CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED:
      v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
      v = 1;
      break;
    case CU_DEVICE_ATTRIBUTE_GENERIC_COMPRESSION_SUPPORTED:
      v = 0;
      break;
    default:
      v = 0;
      break;
  }
  *pi = v;
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  SC_ENTRY(cuDevicePrimaryCtxRetain);
  if (CUresult r = check_dev(dev)) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  g().devices[dev]->primary_refs.fetch_add(1);
  *pctx = reinterpret_cast<CUcontext>(g().devices[dev]->primary);
  return CUDA_SUCCESS;
}
static CUresult primary_ctx_release(CUdevice dev) {
  if (CUresult r = check_dev(dev)) return r;
  // The primary context stays usable after the last release (its resources are simulated
  // host memory that the process keeps), which is enough for every caller we serve.
  int prev = g().devices[dev]->primary_refs.load();
  while (prev > 0 && !g().devices[dev]->primary_refs.compare_exchange_weak(prev, prev - 1)) {
  }
  return prev > 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
SC_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  SC_ENTRY(cuDevicePrimaryCtxRelease_v2);
  return primary_ctx_release(dev);
}
SC_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  SC_ENTRY(cuDevicePrimaryCtxRelease);
  return primary_ctx_release(dev);
}
SC_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  SC_ENTRY(cuDevicePrimaryCtxGetState);
  if (CUresult r = check_dev(dev)) return r;
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  *flags = g().devices[dev]->primary->flags;
  *active = g().devices[dev]->primary_refs.load() > 0;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  SC_ENTRY(cuDevicePrimaryCtxSetFlags_v2);
  if (CUresult r = check_dev(dev)) return r;
  g().devices[dev]->primary->flags = flags;
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* params, unsigned int flags,
                                  CUdevice dev) {
  SC_ENTRY(cuCtxCreate_v4);
  return ctx_create(pctx, flags, dev);
}
SC_EXPORT CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* params, int n,
                                  unsigned int flags, CUdevice dev) {
  SC_ENTRY(cuCtxCreate_v3);
  return ctx_create(pctx, flags, dev);
}
SC_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  SC_ENTRY(cuCtxCreate_v2);
  return ctx_create(pctx, flags, dev);
}
SC_EXPORT CUresult cuCtxCreate(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  SC_ENTRY(cuCtxCreate);
  return ctx_create(pctx, flags, dev);
}

static CUresult ctx_destroy(CUcontext h) {
  if (CUresult r = check_init()) return r;
  auto* c = reinterpret_cast<Ctx*>(h);
  if (!c || c->primary || !live(g().ctxs, c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // it waits for the device
  sync_ctx(c);
  std::vector<Stream*> streams;
  {
    std::lock_guard lk(c->order_mu);
    streams = c->streams;
  }
  for (Stream* s : streams) destroy_stream(s);
  remove_handle(g().ctxs, c);
  std::erase(t_ctx_stack, c);
  // The Ctx object is kept (not deleted): other threads' stacks may still name it, and a
  // stale handle must read as invalid rather than crash.
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuCtxDestroy_v2(CUcontext h) {
  SC_ENTRY(cuCtxDestroy_v2);
  return ctx_destroy(h);
}
SC_EXPORT CUresult cuCtxDestroy(CUcontext h) {
  SC_ENTRY(cuCtxDestroy);
  return ctx_destroy(h);
}

SC_EXPORT CUresult cuCtxSetCurrent(CUcontext h) {
  SC_ENTRY(cuCtxSetCurrent);
  if (CUresult r = check_init()) return r;
  auto* c = reinterpret_cast<Ctx*>(h);
  if (!c) {
    if (!t_ctx_stack.empty()) t_ctx_stack.pop_back();
    return CUDA_SUCCESS;
  }
  if (!live(g().ctxs, c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (t_ctx_stack.empty())
    t_ctx_stack.push_back(c);
  else
    t_ctx_stack.back() = c;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx) {
  SC_ENTRY(cuCtxGetCurrent);
  if (CUresult r = check_init()) return r;
  if (!pctx) return CUDA_ERROR_INVALID_VALUE;
  *pctx = reinterpret_cast<CUcontext>(current_ctx());
  return CUDA_SUCCESS;
}
static CUresult ctx_push(CUcontext h) {
  if (CUresult r = check_init()) return r;
  auto* c = reinterpret_cast<Ctx*>(h);
  if (!c || !live(g().ctxs, c)) return CUDA_ERROR_INVALID_CONTEXT;
  t_ctx_stack.push_back(c);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext h) {
  SC_ENTRY(cuCtxPushCurrent_v2);
  return ctx_push(h);
}
SC_EXPORT CUresult cuCtxPushCurrent(CUcontext h) {
  SC_ENTRY(cuCtxPushCurrent);
  return ctx_push(h);
}
static CUresult ctx_pop(CUcontext* pctx) {
  if (CUresult r = check_init()) return r;
  if (t_ctx_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (pctx) *pctx = reinterpret_cast<CUcontext>(t_ctx_stack.back());
  t_ctx_stack.pop_back();
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  SC_ENTRY(cuCtxPopCurrent_v2);
  return ctx_pop(pctx);
}
SC_EXPORT CUresult cuCtxPopCurrent(CUcontext* pctx) {
  SC_ENTRY(cuCtxPopCurrent);
  return ctx_pop(pctx);
}
// The CUDA 13.0 forms name their context; nullptr means the current one. cuGetProcAddress hands
// them out for the base names from version 13000 on, as the real driver does.
static CUresult named_or_current_ctx(CUcontext h, Ctx** out) {
  if (!h) return need_ctx(out);
  if (CUresult r = check_init()) return r;
  auto* c = reinterpret_cast<Ctx*>(h);
  if (!live(g().ctxs, c)) return CUDA_ERROR_INVALID_CONTEXT;
  *out = c;
  return CUDA_SUCCESS;
}
static CUresult ctx_get_device(Ctx* c, CUdevice* dev) {
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  *dev = c->device;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuCtxGetDevice(CUdevice* dev) {
  SC_ENTRY(cuCtxGetDevice);
  Ctx* c = nullptr;
  if (CUresult r = need_ctx(&c)) return r;
  return ctx_get_device(c, dev);
}
SC_EXPORT CUresult cuCtxGetDevice_v2(CUdevice* dev, CUcontext h) {
  SC_ENTRY(cuCtxGetDevice_v2);
  Ctx* c = nullptr;
  if (CUresult r = named_or_current_ctx(h, &c)) return r;
  return ctx_get_device(c, dev);
}
SC_EXPORT CUresult cuCtxGetFlags(unsigned int* flags) {
  SC_ENTRY(cuCtxGetFlags);
  Ctx* c = nullptr;
  if (CUresult r = need_ctx(&c)) return r;
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  *flags = c->flags;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuCtxGetApiVersion(CUcontext h, unsigned int* version) {
  SC_ENTRY(cuCtxGetApiVersion);
  if (CUresult r = check_init()) return r;
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = 3020;
  return CUDA_SUCCESS;
}
static CUresult ctx_synchronize(Ctx* c) {
  // Synchronising a context that holds captured work is refused in every mode; otherwise the
  // call is one of the potentially unsafe ones.
  if (ctx_sync_conflict(c) || capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  count(Counter::ctx_synchronize);
  sync_ctx(c);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuCtxSynchronize() {
  SC_ENTRY(cuCtxSynchronize);
  Ctx* c = nullptr;
  if (CUresult r = need_ctx(&c)) return r;
  return ctx_synchronize(c);
}
SC_EXPORT CUresult cuCtxSynchronize_v2(CUcontext h) {
  SC_ENTRY(cuCtxSynchronize_v2);
  Ctx* c = nullptr;
  if (CUresult r = named_or_current_ctx(h, &c)) return r;
  return ctx_synchronize(c);
}

// ---- errors ----
namespace {
struct ErrInfo {
  CUresult code;
  const char* name;
  const char* text;
};
const ErrInfo kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_INVALID_SOURCE, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
    {CUDA_ERROR_FILE_NOT_FOUND, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_STREAM_CAPTURE_MERGE, "CUDA_ERROR_STREAM_CAPTURE_MERGE",
     "operation would result in a merge of separate capture sequences"},
    {CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "CUDA_ERROR_STREAM_CAPTURE_UNMATCHED",
     "capture was not ended in the same stream as it began"},
    {CUDA_ERROR_STREAM_CAPTURE_UNJOINED, "CUDA_ERROR_STREAM_CAPTURE_UNJOINED",
     "capturing stream has unjoined work"},
    {CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT",
     "operation would make the legacy stream depend on a capturing blocking stream"},
    {CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT",
     "operation not permitted on an event last recorded in a capturing stream"},
    {CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD",
     "attempt to terminate a thread-local capture sequence from another thread"},
    {CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "CUDA_ERROR_STREAM_CAPTURE_ISOLATION",
     "dependency created on uncaptured work in another stream"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE",
     "the operation is not permitted in the current state"},
    {CUDA_ERROR_INVALID_PTX, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};
}  // namespace

bool simcuda::error_by_name(std::string_view name, CUresult* code) {
  for (const auto& i : kErrors)
    if (name == i.name) {
      *code = i.code;
      return true;
    }
  return false;
}

SC_EXPORT CUresult cuGetErrorString(CUresult e, const char** s) {
  SC_ENTRY(cuGetErrorString);
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  for (const auto& i : kErrors)
    if (i.code == e) {
      *s = i.text;
      return CUDA_SUCCESS;
    }
  *s = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}
SC_EXPORT CUresult cuGetErrorName(CUresult e, const char** s) {
  SC_ENTRY(cuGetErrorName);
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  for (const auto& i : kErrors)
    if (i.code == e) {
      *s = i.name;
      return CUDA_SUCCESS;
    }
  *s = nullptr;
  return CUDA_ERROR_INVALID_VALUE;
}
SC_EXPORT CUresult cuGetExportTable(const void** table, const CUuuid* id) {
  SC_ENTRY(cuGetExportTable);
  // simcuda does not host libcudart: the runtime's private tables do not exist here.
  if (table) *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}
