/* dlopen_smoke.c: loads simcuda the way libcudart does (dlopen("libcuda.so.1"), dlsym one entry
 * point, everything else through cuGetProcAddress) and runs a copy round trip. It links no CUDA
 * library; the test sets LD_LIBRARY_PATH to simcuda's directory. Exit status 0 means success. */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "simcuda.h"

typedef CUresult (*gpa_v2_t)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
typedef CUresult (*gpa_v1_t)(const char*, void**, int, cuuint64_t);

#define FAIL(...)                 \
  do {                            \
    fprintf(stderr, __VA_ARGS__); \
    fputc('\n', stderr);          \
    return 1;                     \
  } while (0)

int main(void) {
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!h) FAIL("dlopen: %s", dlerror());
  gpa_v1_t gpa1 = (gpa_v1_t)dlsym(h, "cuGetProcAddress");
  if (!gpa1) FAIL("no cuGetProcAddress");
  gpa_v2_t gpa = NULL;
  if (gpa1("cuGetProcAddress", (void**)&gpa, 12000, 0) != CUDA_SUCCESS || !gpa)
    FAIL("cuGetProcAddress did not give its _v2 form");

  CUresult (*init)(unsigned) = NULL;
  CUresult (*get_name)(char*, int, CUdevice) = NULL;
  CUresult (*retain)(CUcontext*, CUdevice) = NULL;
  CUresult (*set_current)(CUcontext) = NULL;
  CUresult (*alloc)(CUdeviceptr*, size_t) = NULL;
  CUresult (*memset32)(CUdeviceptr, unsigned, size_t, CUstream) = NULL;
  CUresult (*dtoh)(void*, CUdeviceptr, size_t) = NULL;
  CUresult (*mfree)(CUdeviceptr) = NULL;
  CUdriverProcAddressQueryResult st;
  struct {
    const char* name;
    void** fn;
    cuuint64_t flags;
  } want[] = {
      {"cuInit", (void**)&init, 0},
      {"cuDeviceGetName", (void**)&get_name, 0},
      {"cuDevicePrimaryCtxRetain", (void**)&retain, 0},
      {"cuCtxSetCurrent", (void**)&set_current, 0},
      {"cuMemAlloc", (void**)&alloc, 0},
      {"cuMemsetD32Async", (void**)&memset32, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuMemcpyDtoH", (void**)&dtoh, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM},
      {"cuMemFree", (void**)&mfree, 0},
  };
  for (size_t i = 0; i < sizeof want / sizeof want[0]; ++i)
    if (gpa(want[i].name, want[i].fn, 13000, want[i].flags, &st) != CUDA_SUCCESS || !*want[i].fn)
      FAIL("cuGetProcAddress(%s) failed", want[i].name);

  if (init(0) != CUDA_SUCCESS) FAIL("cuInit");
  char name[64];
  if (get_name(name, sizeof name, 0) != CUDA_SUCCESS ||
      strncmp(name, SIMCUDA_DEVICE_NAME_PREFIX, strlen(SIMCUDA_DEVICE_NAME_PREFIX)) != 0)
    FAIL("device name does not say simcuda");
  CUcontext ctx;
  if (retain(&ctx, 0) != CUDA_SUCCESS || set_current(ctx) != CUDA_SUCCESS) FAIL("context");
  CUdeviceptr d;
  if (alloc(&d, 4096) != CUDA_SUCCESS) FAIL("cuMemAlloc");
  /* Per-thread forms: the NULL stream is this thread's own stream, and the sync copy follows it. */
  if (memset32(d, 0xabcdef01u, 1024, NULL) != CUDA_SUCCESS) FAIL("cuMemsetD32Async_ptsz");
  unsigned out[1024];
  if (dtoh(out, d, sizeof out) != CUDA_SUCCESS) FAIL("cuMemcpyDtoH_v2_ptds");
  if (out[0] != 0xabcdef01u || out[1023] != 0xabcdef01u) FAIL("wrong bytes");
  if (mfree(d) != CUDA_SUCCESS) FAIL("cuMemFree");
  puts("ok");
  return 0;
}
