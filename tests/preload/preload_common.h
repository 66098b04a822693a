// preload_common.h: small helpers shared by the preload test programs (which run under
// LD_PRELOAD=libgswap.so on simcuda and report failures with a message and exit code 1).
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

#define PCHECK(call)                                                                            \
  do {                                                                                          \
    CUresult pcheck_e = (call);                                                                 \
    if (pcheck_e != CUDA_SUCCESS) {                                                             \
      std::fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, (int)pcheck_e); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

#define PEXPECT(cond)                                                          \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond); \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

// cuInit, device 0, primary context made current.
inline CUcontext preload_init() {
  PCHECK(cuInit(0));
  CUdevice dev;
  PCHECK(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  PCHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  PCHECK(cuCtxSetCurrent(ctx));
  return ctx;
}

// Launch helpers for preload_kernels.c.
struct AddArgs {
  CUdeviceptr buf;
  unsigned long long n;
  unsigned v;
};

inline CUresult launch_add(CUfunction f, CUstream s, CUdeviceptr buf, unsigned long long n,
                           unsigned v) {
  void* params[] = {&buf, &n, &v};
  return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

inline CUresult launch_add_from(CUfunction f, CUstream s, CUdeviceptr dst, CUdeviceptr src,
                                unsigned long long n) {
  void* params[] = {&dst, &src, &n};
  return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

// Every element of buf (n uint32) equals want.
inline bool all_equal(CUdeviceptr buf, unsigned long long n, unsigned want, unsigned* got) {
  unsigned* host = static_cast<unsigned*>(std::malloc(n * 4));
  if (cuMemcpyDtoH(host, buf, n * 4) != CUDA_SUCCESS) {
    std::free(host);
    return false;
  }
  bool ok = true;
  for (unsigned long long i = 0; i < n; ++i) {
    if (host[i] != want) {
      if (got) *got = host[i];
      ok = false;
      break;
    }
  }
  std::free(host);
  return ok;
}
