// lookup.cpp: the three ways a program finds driver entry points, all answered with libgswap's
// wrappers (fact 1): exported symbols (wrappers.cpp), dlsym (entered through dlsym_entry.cpp),
// and cuGetProcAddress.
#include "interpose/lookup.h"

#include <dlfcn.h>

#include <atomic>
#include <cstring>

#include "interpose/hooks.h"
#include "interpose/log.h"
#include "interpose/process.h"

namespace gswap::interpose {

const HookEntry* hook_by_symbol(const char* symbol) {
  // Linear over about a hundred names; dlsym is never on a hot path.
  for (std::size_t i = 0; i < kNumHooks; ++i)
    if (std::strcmp(kHooks[i].symbol, symbol) == 0) return &kHooks[i];
  return nullptr;
}

namespace {

// Maps what the real cuGetProcAddress returned to our wrapper of the same ABI. The real driver
// has already chosen the ABI for the requested version and stream flavour; matching on the
// pointer keeps that choice exactly.
void* wrap_proc(const char* symbol, void* p, int version, cuuint64_t flags) {
  for (std::size_t i = 0; i < kNumHooks; ++i)
    if (real_pointer(kHooks[i]) == p) return kHooks[i].wrapper;
  // Not one of the real pointers we loaded (a driver whose table hands out other addresses):
  // name the pointer exactly with dladdr. Guessing from the API name and version could pick an
  // ABI with another signature (cuGraphInstantiate at 12.0 is cuGraphInstantiateWithFlags).
  const HookEntry* best = nullptr;
  Dl_info info;
  if (dladdr(p, &info) != 0 && info.dli_saddr == p && info.dli_sname) {
    best = hook_by_symbol(info.dli_sname);
    if (best && real_pointer(*best) != nullptr) {
      GSWAP_LOG(kDebug, "cuGetProcAddress(%s, %d, %llu): %s by address", symbol, version,
                (unsigned long long)flags, best->symbol);
      return best->wrapper;
    }
  }
  bool ours = false;
  for (std::size_t i = 0; i < kNumHooks && !ours; ++i)
    ours = std::strcmp(kHooks[i].api, symbol) == 0;
  if (ours || std::strncmp(symbol, "cuMemcpy", 8) == 0 ||
      std::strncmp(symbol, "cuMemset", 8) == 0 || std::strncmp(symbol, "cuLaunch", 8) == 0) {
    // Info, not warn: the runtime resolves every entry point at start, used or not.
    GSWAP_LOG(kInfo,
              "cuGetProcAddress(%s, %d) returned an ABI gswap does not hook; its accesses are not "
              "tracked",
              symbol, version);
  }
  return p;
}

// The handle names libcuda.so.1 (or the global scope). Cheap: no library is loaded here.
bool is_driver_handle(void* handle) {
  if (handle == RTLD_DEFAULT || handle == RTLD_NEXT) return true;
  if (void* h = driver_handle()) return handle == h;
  void* h = dlopen("libcuda.so.1", RTLD_NOLOAD | RTLD_LAZY);
  if (h) dlclose(h);  // NOLOAD took a reference; give it back
  return h != nullptr && handle == h;
}

}  // namespace

CUresult hook_cuInit(unsigned int flags) {
  if (!load_driver() || !real().cuInit) return CUDA_ERROR_NOT_INITIALIZED;
  if (CUresult e = check_settings(); e != CUDA_SUCCESS) return e;
  CUresult e = real().cuInit(flags);
  if (e != CUDA_SUCCESS) return e;
  return init_process();
}

CUresult hook_cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  if (!load_driver() || !real().cuGetProcAddress) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult e = real().cuGetProcAddress(symbol, pfn, version, flags);
  if (e == CUDA_SUCCESS && symbol && pfn && *pfn) *pfn = wrap_proc(symbol, *pfn, version, flags);
  return e;
}

CUresult hook_cuGetProcAddress_v2(const char* symbol, void** pfn, int version, cuuint64_t flags,
                                  CUdriverProcAddressQueryResult* status) {
  if (!load_driver() || !real().cuGetProcAddress_v2) return CUDA_ERROR_NOT_INITIALIZED;
  CUresult e = real().cuGetProcAddress_v2(symbol, pfn, version, flags, status);
  if (e == CUDA_SUCCESS && symbol && pfn && *pfn) *pfn = wrap_proc(symbol, *pfn, version, flags);
  return e;
}

// dlsym: for hooked names asked of libcuda (or of the global scope), our wrapper; nullptr for
// everything else, which dlsym_entry.cpp passes to the real dlsym as if libgswap were not there.
// No heavy work: one dlopen the first time, then compares.
void* dlsym_answer(void* handle, const char* name) {
  if (name && name[0] == 'c' && name[1] == 'u' && !loading_driver_on_this_thread()) {
    if (const HookEntry* e = hook_by_symbol(name)) {
      if (is_driver_handle(handle) && load_driver() && real_pointer(*e) != nullptr)
        return e->wrapper;
    }
  }
  return nullptr;
}

}  // namespace gswap::interpose
