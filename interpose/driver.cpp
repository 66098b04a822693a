// driver.cpp: loads the real driver table (see driver.h).
//
// Locking: g_load_mutex serialises the one-time load; after g_loaded is set the table is
// immutable and read without locks.
#include "interpose/driver.h"

#include <dlfcn.h>

#include <atomic>
#include <mutex>

#include "interpose/log.h"

namespace gswap::interpose {
namespace detail {
std::atomic<bool> g_driver_loaded{false};
}
namespace {
using detail::g_driver_loaded;
Real g_real;
std::atomic<void*> g_handle{nullptr};
std::mutex g_load_mutex;
thread_local bool t_loading = false;

using DlsymFn = void* (*)(void*, const char*);

DlsymFn find_real_dlsym() {
  // glibc 2.34 moved dlsym into libc with a new default version; older binaries still bind the
  // 2.2.5 (x86-64) / 2.17 (aarch64) one. Either is the real implementation.
  static const char* const kVersions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17"};
  for (const char* v : kVersions) {
    if (void* p = dlvsym(RTLD_NEXT, "dlsym", v)) return reinterpret_cast<DlsymFn>(p);
  }
  return nullptr;
}
}  // namespace

void* real_dlsym(void* handle, const char* name) {
  static DlsymFn fn = find_real_dlsym();
  return fn ? fn(handle, name) : nullptr;
}

bool loading_driver_on_this_thread() {
  return t_loading;
}

bool load_driver() {
  if (g_driver_loaded.load(std::memory_order_acquire)) return true;
  if (t_loading) return false;
  std::lock_guard<std::mutex> lock(g_load_mutex);
  if (g_driver_loaded.load(std::memory_order_relaxed)) return true;
  t_loading = true;
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    t_loading = false;
    // Info only: programs probe for CUDA this way, and one without a driver is not an error.
    GSWAP_LOG(kInfo, "cannot open libcuda.so.1: %s", dlerror());
    return false;
  }
#define GSWAP_HOOK(sym, api, ver, pt, ret, params, args) \
  g_real.sym = reinterpret_cast<decltype(g_real.sym)>(real_dlsym(h, #sym));
#include "interpose/hooks.def"
#undef GSWAP_HOOK
#define GSWAP_LOAD_INTERNAL(sym) \
  g_real.sym = reinterpret_cast<decltype(g_real.sym)>(real_dlsym(h, #sym));
  GSWAP_INTERNAL_DRIVER(GSWAP_LOAD_INTERNAL)
#undef GSWAP_LOAD_INTERNAL
  g_real.cuEventElapsedTime_v1 =
      reinterpret_cast<decltype(g_real.cuEventElapsedTime_v1)>(real_dlsym(h, "cuEventElapsedTime"));
  g_real.cuStreamIsCapturing_ptsz = reinterpret_cast<decltype(g_real.cuStreamIsCapturing_ptsz)>(
      real_dlsym(h, "cuStreamIsCapturing_ptsz"));
  g_handle.store(h, std::memory_order_release);
  t_loading = false;
  g_driver_loaded.store(true, std::memory_order_release);
  return true;
}

const Real& real() {
  return g_real;
}

void* driver_handle() {
  return g_handle.load(std::memory_order_acquire);
}

}  // namespace gswap::interpose
