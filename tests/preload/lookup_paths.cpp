// lookup_paths.cpp: proves libgswap intercepts the two ways programs find driver entry points
// without linking libcuda: cuGetProcAddress (as the CUDA runtime does) and dlsym on libcuda.so.1
// (as Triton does). Through the chosen path it checks that cuMemGetInfo and cuDeviceTotalMem
// report the budget, then writes three budgets' worth of buffers and reads them all back, which
// only works if the copies were seen and regions swapped. The CUDA 2.0 ABIs of cuMemGetInfo,
// cuDeviceTotalMem (32-bit sizes) and cuStreamDestroy, found the same way, are intercepted too:
// the first buffers are written on a stream destroyed through the old cuStreamDestroy, which
// gswap must forget, or their swap-outs (ordered after that stream) fail.
//
// Usage: lookup_paths procaddress|dlsym BUDGET_BYTES
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#undef cuGetProcAddress

namespace {

struct Api {
  CUresult (*init)(unsigned);
  CUresult (*device_get)(CUdevice*, int);
  CUresult (*retain)(CUcontext*, CUdevice);
  CUresult (*set_current)(CUcontext);
  CUresult (*mem_info)(size_t*, size_t*);
  CUresult (*total_mem)(size_t*, CUdevice);
  CUresult (*alloc)(CUdeviceptr*, size_t);
  CUresult (*free)(CUdeviceptr);
  CUresult (*htod)(CUdeviceptr, const void*, size_t);
  CUresult (*dtoh)(void*, CUdeviceptr, size_t);
  CUresult (*stream_create)(CUstream*, unsigned);
  CUresult (*htod_async)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*stream_sync)(CUstream);
  // The CUDA 2.0 ABIs.
  CUresult (*mem_info_v1)(unsigned*, unsigned*);
  CUresult (*total_mem_v1)(unsigned*, CUdevice);
  CUresult (*stream_destroy_v1)(CUstream);
};

int fail(const char* what) {
  std::fprintf(stderr, "lookup_paths: %s\n", what);
  return 1;
}

}  // namespace

#define CHECK(call)                                                          \
  do {                                                                       \
    CUresult e_ = (call);                                                    \
    if (e_ != CUDA_SUCCESS) {                                                \
      std::fprintf(stderr, "lookup_paths: %s failed: %d\n", #call, (int)e_); \
      return 1;                                                              \
    }                                                                        \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 3) return fail("usage: lookup_paths procaddress|dlsym BUDGET_BYTES");
  std::string mode = argv[1];
  size_t budget = std::strtoull(argv[2], nullptr, 10);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fail("cannot dlopen libcuda.so.1");
  Api api = {};
  if (mode == "procaddress") {
    using GetProc =
        CUresult (*)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
    auto get = reinterpret_cast<GetProc>(dlsym(lib, "cuGetProcAddress_v2"));
    if (!get) return fail("no cuGetProcAddress_v2");
    auto load = [&](const char* name, void* slot) -> bool {
      CUdriverProcAddressQueryResult status;
      return get(name, static_cast<void**>(slot), CUDA_VERSION, CU_GET_PROC_ADDRESS_DEFAULT,
                 &status) == CUDA_SUCCESS &&
             *static_cast<void**>(slot) != nullptr;
    };
    if (!load("cuInit", &api.init) || !load("cuDeviceGet", &api.device_get) ||
        !load("cuDevicePrimaryCtxRetain", &api.retain) ||
        !load("cuCtxSetCurrent", &api.set_current) || !load("cuMemGetInfo", &api.mem_info) ||
        !load("cuDeviceTotalMem", &api.total_mem) || !load("cuMemAlloc", &api.alloc) ||
        !load("cuMemFree", &api.free) || !load("cuMemcpyHtoD", &api.htod) ||
        !load("cuMemcpyDtoH", &api.dtoh) || !load("cuStreamCreate", &api.stream_create) ||
        !load("cuMemcpyHtoDAsync", &api.htod_async) ||
        !load("cuStreamSynchronize", &api.stream_sync))
      return fail("cuGetProcAddress could not find an entry point");
    auto load_v1 = [&](const char* name, void* slot) -> bool {
      CUdriverProcAddressQueryResult status;
      return get(name, static_cast<void**>(slot), 2000, CU_GET_PROC_ADDRESS_DEFAULT, &status) ==
                 CUDA_SUCCESS &&
             *static_cast<void**>(slot) != nullptr;
    };
    if (!load_v1("cuMemGetInfo", &api.mem_info_v1) ||
        !load_v1("cuDeviceTotalMem", &api.total_mem_v1) ||
        !load_v1("cuStreamDestroy", &api.stream_destroy_v1))
      return fail("cuGetProcAddress could not find a CUDA 2.0 entry point");
    // The requested ABI is honoured: the per-thread-stream flag gives the _ptsz wrapper, the
    // legacy flag the plain one, and an old version the old ABI (which gswap does not wrap).
    void *pt = nullptr, *legacy = nullptr, *v1 = nullptr;
    CUdriverProcAddressQueryResult st;
    if (get("cuLaunchKernel", &pt, CUDA_VERSION, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
            &st) ||
        get("cuLaunchKernel", &legacy, CUDA_VERSION, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st))
      return fail("cuGetProcAddress(cuLaunchKernel) failed");
    if (pt != dlsym(lib, "cuLaunchKernel_ptsz") || legacy != dlsym(lib, "cuLaunchKernel") ||
        pt == legacy)
      return fail("the per-thread-stream flag was not honoured");
    if (get("cuMemAlloc", &v1, 3000, CU_GET_PROC_ADDRESS_DEFAULT, &st) == CUDA_SUCCESS &&
        v1 == reinterpret_cast<void*>(api.alloc))
      return fail("cudaVersion 3000 got the _v2 ABI");
  } else if (mode == "dlsym") {
    auto load = [&](const char* name, void* slot) -> bool {
      *static_cast<void**>(slot) = dlsym(lib, name);
      return *static_cast<void**>(slot) != nullptr;
    };
    if (!load("cuInit", &api.init) || !load("cuDeviceGet", &api.device_get) ||
        !load("cuDevicePrimaryCtxRetain", &api.retain) ||
        !load("cuCtxSetCurrent", &api.set_current) || !load("cuMemGetInfo_v2", &api.mem_info) ||
        !load("cuDeviceTotalMem_v2", &api.total_mem) || !load("cuMemAlloc_v2", &api.alloc) ||
        !load("cuMemFree_v2", &api.free) || !load("cuMemcpyHtoD_v2", &api.htod) ||
        !load("cuMemcpyDtoH_v2", &api.dtoh) || !load("cuStreamCreate", &api.stream_create) ||
        !load("cuMemcpyHtoDAsync_v2", &api.htod_async) ||
        !load("cuStreamSynchronize", &api.stream_sync) || !load("cuMemGetInfo", &api.mem_info_v1) ||
        !load("cuDeviceTotalMem", &api.total_mem_v1) ||
        !load("cuStreamDestroy", &api.stream_destroy_v1))
      return fail("dlsym could not find an entry point");
  } else {
    return fail("mode must be procaddress or dlsym");
  }

  CHECK(api.init(0));
  CUdevice dev;
  CHECK(api.device_get(&dev, 0));
  CUcontext ctx;
  CHECK(api.retain(&ctx, dev));
  CHECK(api.set_current(ctx));
  size_t free_b = 0, total = 0, dev_total = 0;
  CHECK(api.mem_info(&free_b, &total));
  CHECK(api.total_mem(&dev_total, dev));
  std::printf("%s: cuMemGetInfo total %zu free %zu, cuDeviceTotalMem %zu, budget %zu\n",
              mode.c_str(), total, free_b, dev_total, budget);
  if (total != budget || dev_total != budget || free_b > total)
    return fail("memory figures do not report the budget: the path was not intercepted");
  unsigned free_v1 = 0, total_v1 = 0, dev_total_v1 = 0;
  CHECK(api.mem_info_v1(&free_v1, &total_v1));
  CHECK(api.total_mem_v1(&dev_total_v1, dev));
  std::printf("%s: CUDA 2.0 ABIs: cuMemGetInfo total %u free %u, cuDeviceTotalMem %u\n",
              mode.c_str(), total_v1, free_v1, dev_total_v1);
  if (total_v1 != budget || dev_total_v1 != budget || free_v1 > total_v1)
    return fail("the CUDA 2.0 memory figures do not report the budget");

  // Three budgets' worth of 1/4-budget buffers, each with its own pattern.
  size_t chunk = budget / 4;
  std::vector<CUdeviceptr> bufs(12);
  std::vector<unsigned> host(chunk / 4);
  // The first two on a stream of their own, then destroyed through the CUDA 2.0 ABI.
  CUstream s;
  CHECK(api.stream_create(&s, CU_STREAM_NON_BLOCKING));
  for (size_t k = 0; k < bufs.size(); ++k) {
    CHECK(api.alloc(&bufs[k], chunk));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned>(k * 1000003u + i);
    if (k < 2) {
      CHECK(api.htod_async(bufs[k], host.data(), chunk, s));
      CHECK(api.stream_sync(s));
      if (k == 1) CHECK(api.stream_destroy_v1(s));
    } else {
      CHECK(api.htod(bufs[k], host.data(), chunk));
    }
  }
  for (size_t k = 0; k < bufs.size(); ++k) {
    CHECK(api.dtoh(host.data(), bufs[k], chunk));
    for (size_t i = 0; i < host.size(); ++i)
      if (host[i] != static_cast<unsigned>(k * 1000003u + i))
        return fail("data mismatch after swapping");
  }
  for (CUdeviceptr b : bufs) CHECK(api.free(b));
  std::printf("%s: 3x the budget written and verified\n", mode.c_str());
  return 0;
}
