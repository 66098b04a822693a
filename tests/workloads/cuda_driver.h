// cuda_driver.h: the CUDA driver entry points minitrain uses, loaded once at run time.
//
// minitrain never links libcuda. It dlopens libcuda.so.1 (the real driver, or simcuda when
// LD_LIBRARY_PATH points there), finds cuGetProcAddress with dlsym, and asks it for every other
// entry point with the CUDA_VERSION of the cuda.h it was built against: the way the CUDA runtime
// does it, so an LD_PRELOADed interposer that hooks dlsym and cuGetProcAddress sees exactly the
// lookups a framework would make. The table is written once, before any other thread exists, and
// is read-only afterwards.
#pragma once

#include <cuda.h>

#include <string>

namespace minitrain {

// Every entry point, by its cuda.h name. The member's type is that of the declaration cuda.h
// selects for CUDA_VERSION (cuMemAlloc means cuMemAlloc_v2, and so on), which is the ABI that
// cuGetProcAddress returns for the base name at that version, except for cuCtxSynchronize, whose
// 13.0 ABI takes a context: cuda_driver.cpp asks for that one at 12.9.
#define MT_DRIVER_ENTRY_POINTS(X) \
  X(cuGetErrorName)               \
  X(cuGetErrorString)             \
  X(cuInit)                       \
  X(cuDriverGetVersion)           \
  X(cuDeviceGet)                  \
  X(cuDeviceGetCount)             \
  X(cuDeviceGetName)              \
  X(cuDevicePrimaryCtxRetain)     \
  X(cuDevicePrimaryCtxRelease)    \
  X(cuCtxSetCurrent)              \
  X(cuCtxSynchronize)             \
  X(cuMemAlloc)                   \
  X(cuMemFree)                    \
  X(cuMemAllocAsync)              \
  X(cuMemFreeAsync)               \
  X(cuMemAllocHost)               \
  X(cuMemFreeHost)                \
  X(cuMemcpyHtoD)                 \
  X(cuMemcpyDtoH)                 \
  X(cuMemcpyHtoDAsync)            \
  X(cuMemcpyDtoHAsync)            \
  X(cuStreamCreate)               \
  X(cuStreamDestroy)              \
  X(cuStreamSynchronize)          \
  X(cuStreamWaitEvent)            \
  X(cuEventCreate)                \
  X(cuEventRecord)                \
  X(cuEventDestroy)               \
  X(cuModuleLoad)                 \
  X(cuModuleUnload)               \
  X(cuModuleGetFunction)          \
  X(cuFuncGetParamInfo)           \
  X(cuLaunchKernel)

struct Driver {
#define MT_DRIVER_MEMBER(name) decltype(&::name) name = nullptr;
  MT_DRIVER_ENTRY_POINTS(MT_DRIVER_MEMBER)
#undef MT_DRIVER_MEMBER
};

// The process-wide table; valid after LoadDriver has succeeded.
const Driver& drv();

// Loads libcuda.so.1 and resolves every entry point. On failure returns false and says why in
// *error (which library or symbol was missing, with the lookup's result code).
bool LoadDriver(std::string* error);

// Checks a driver call's result. On failure prints the call, the code and its name, and exits with
// status 1: a workload that cannot trust its device has nothing useful left to do.
void CheckResult(CUresult rc, const char* call, const char* file, int line);

}  // namespace minitrain

#define MT_CU(call) ::minitrain::CheckResult((call), #call, __FILE__, __LINE__)
