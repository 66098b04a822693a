// driver.h: the real driver entry points, loaded once from libcuda.so.1.
//
// Hooked entry points come from hooks.def; the others are the ones gswap itself calls (VMM,
// streams, events, contexts). Nothing in the library links libcuda or calls a cu* symbol by name:
// that would resolve to libgswap's own wrappers and recurse. Every call goes through real().
#pragma once

#include <atomic>

#include "interpose/cuda_api.h"

namespace gswap::interpose {

// Driver functions gswap calls but does not hook: X(symbol), one a line (so clang-format is off).
// clang-format off
#define GSWAP_INTERNAL_DRIVER(X)         \
  X(cuDeviceGet)                   \
  X(cuDeviceGetCount)              \
  X(cuDeviceGetUuid_v2)            \
  X(cuCtxGetCurrent)               \
  X(cuCtxGetDevice)                \
  X(cuDeviceGetMemPool)            \
  X(cuDeviceGetDefaultMemPool)     \
  X(cuCtxPushCurrent_v2)           \
  X(cuCtxPopCurrent_v2)            \
  X(cuCtxSynchronize)              \
  X(cuDevicePrimaryCtxRetain)      \
  X(cuMemCreate)                   \
  X(cuMemRelease)                  \
  X(cuMemMap)                      \
  X(cuMemUnmap)                    \
  X(cuMemSetAccess)                \
  X(cuMemAddressReserve)           \
  X(cuMemAddressFree)              \
  X(cuMemGetAllocationGranularity) \
  X(cuMemAllocHost_v2)             \
  X(cuMemFreeHost)                 \
  X(cuStreamWaitEvent)             \
  X(cuStreamSynchronize)           \
  X(cuStreamIsCapturing)           \
  X(cuStreamGetFlags)              \
  X(cuEventCreate)                 \
  X(cuEventDestroy_v2)             \
  X(cuEventRecord)                 \
  X(cuEventQuery)                  \
  X(cuEventSynchronize)            \
  X(cuEventElapsedTime_v2)         \
  X(cuFuncGetParamInfo)            \
  X(cuKernelGetParamInfo)          \
  X(cuFuncGetName)                 \
  X(cuKernelGetName)               \
  X(cuFuncGetModule)               \
  X(cuKernelGetLibrary)            \
  X(cuLibraryGetModule)            \
  X(cuGetErrorName)                \
  X(cuThreadExchangeStreamCaptureMode)
// clang-format on

struct Real {
#define GSWAP_HOOK(sym, api, ver, pt, ret, params, args) ret(*sym) params = nullptr;
#include "interpose/hooks.def"
#undef GSWAP_HOOK
#define GSWAP_DECLARE_INTERNAL(sym) decltype(&::sym) sym = nullptr;
  GSWAP_INTERNAL_DRIVER(GSWAP_DECLARE_INTERNAL)
#undef GSWAP_DECLARE_INTERNAL
  // The pre-12.8 ABI of cuEventElapsedTime, for drivers without the _v2 symbol.
  CUresult (*cuEventElapsedTime_v1)(float*, CUevent, CUevent) = nullptr;
  // cuda.h declares the per-thread forms only under CUDA_API_PER_THREAD_DEFAULT_STREAM.
  CUresult (*cuStreamIsCapturing_ptsz)(CUstream, CUstreamCaptureStatus*) = nullptr;
};

// Loads the table the first time (thread-safe); later calls are one relaxed load. Returns false
// when libcuda.so.1 cannot be opened.
bool load_driver();
namespace detail {
extern std::atomic<bool> g_driver_loaded;
}
// True once the table is loaded: one acquire load, for the exported wrappers, which load it
// before any hook runs (a program may call the driver before cuInit, or never call it).
inline bool driver_loaded() {
  return detail::g_driver_loaded.load(std::memory_order_acquire);
}
const Real& real();
// The handle dlopen gave for libcuda.so.1 (nullptr before load_driver succeeds).
void* driver_handle();
// The real dlsym, found with dlvsym so that libgswap's own dlsym is never involved.
void* real_dlsym(void* handle, const char* name);
// True while load_driver runs on this thread: dlsym calls libcuda's constructors make then pass
// straight through.
bool loading_driver_on_this_thread();

}  // namespace gswap::interpose
