// launch_overhead.cpp: the launch-overhead benchmark. In ONE process it times cuLaunchKernel
// with 8 pointer parameters and 10,000 live regions through the real driver entry point and
// through libgswap's, side by side, and prints the added nanoseconds per launch.
//
// libgswap is dlopen'ed here (not preloaded), so both entry points are reachable: the real one
// from libcuda.so.1, the hooked one from libgswap.so. All allocations go through libgswap so the
// 10,000 regions are live in its region map, and the launch arguments point into 8 of them.
//
// Usage: launch_overhead LIBGSWAP.so MODULE.so [launches-per-batch] [batches]
// (simcuda: set SIMCUDA_GRANULARITY=4KiB so 10,000 regions fit in little memory)
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>

namespace {

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);

template <class T>
T sym(void* lib, const char* name) {
  void* p = dlsym(lib, name);
  if (!p) {
    std::fprintf(stderr, "launch_overhead: no %s\n", name);
    std::exit(1);
  }
  return reinterpret_cast<T>(p);
}

#define OK(call)                                                                \
  do {                                                                          \
    CUresult e_ = (call);                                                       \
    if (e_ != CUDA_SUCCESS) {                                                   \
      std::fprintf(stderr, "launch_overhead: %s failed: %d\n", #call, (int)e_); \
      std::exit(1);                                                             \
    }                                                                           \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: launch_overhead LIBGSWAP.so MODULE.so [launches] [batches]\n");
    return 2;
  }
  int per_batch = argc > 3 ? std::atoi(argv[3]) : 5000;
  int batches = argc > 4 ? std::atoi(argv[4]) : 21;
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  void* gswap = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!cuda || !gswap) {
    std::fprintf(stderr, "launch_overhead: %s\n", dlerror());
    return 1;
  }
  auto g_init = sym<CUresult (*)(unsigned)>(gswap, "cuInit");
  auto g_alloc = sym<CUresult (*)(CUdeviceptr*, size_t)>(gswap, "cuMemAlloc_v2");
  auto g_launch = sym<LaunchFn>(gswap, "cuLaunchKernel");
  auto r_launch = sym<LaunchFn>(cuda, "cuLaunchKernel");
  auto device_get = sym<CUresult (*)(CUdevice*, int)>(cuda, "cuDeviceGet");
  auto retain = sym<CUresult (*)(CUcontext*, CUdevice)>(cuda, "cuDevicePrimaryCtxRetain");
  auto set_current = sym<CUresult (*)(CUcontext)>(cuda, "cuCtxSetCurrent");
  auto module_load = sym<CUresult (*)(CUmodule*, const char*)>(cuda, "cuModuleLoad");
  auto get_function =
      sym<CUresult (*)(CUfunction*, CUmodule, const char*)>(cuda, "cuModuleGetFunction");
  auto stream_create = sym<CUresult (*)(CUstream*, unsigned)>(cuda, "cuStreamCreate");
  auto stream_sync = sym<CUresult (*)(CUstream)>(cuda, "cuStreamSynchronize");
  auto granularity =
      sym<CUresult (*)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags)>(
          cuda, "cuMemGetAllocationGranularity");

  OK(g_init(0));
  CUdevice dev;
  OK(device_get(&dev, 0));
  CUcontext ctx;
  OK(retain(&ctx, dev));
  OK(set_current(ctx));
  CUmodule mod;
  OK(module_load(&mod, argv[2]));
  CUfunction f;
  OK(get_function(&f, mod, "noop8"));
  CUstream s;
  OK(stream_create(&s, CU_STREAM_NON_BLOCKING));
  CUmemAllocationProp prop = {};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  size_t gran = 0;
  OK(granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));

  // 10,000 live regions (each one granule, the swap threshold), 8 of them named by the launch.
  std::vector<CUdeviceptr> regions(10000);
  for (auto& r : regions) OK(g_alloc(&r, gran));
  CUdeviceptr args[8];
  for (int k = 0; k < 8; ++k) args[k] = regions[(k * 1237 + 11) % regions.size()] + 64 * k;
  void* params[8];
  for (int k = 0; k < 8; ++k) params[k] = &args[k];

  // Wall time and the launching thread's CPU time per launch. On a shared machine the thread CPU
  // time is the steadier figure: it leaves out time the thread was preempted.
  struct Sample {
    double wall, cpu;
  };
  auto thread_ns = [] {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
  };
  auto time_batch = [&](LaunchFn fn) {
    double c0 = thread_ns();
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < per_batch; ++i) OK(fn(f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
    auto t1 = std::chrono::steady_clock::now();
    double c1 = thread_ns();
    OK(stream_sync(s));
    return Sample{std::chrono::duration<double, std::nano>(t1 - t0).count() / per_batch,
                  (c1 - c0) / per_batch};
  };
  time_batch(r_launch);  // warm up both paths (the first launch fills gswap's layout cache)
  time_batch(g_launch);
  std::vector<double> real_wall, gswap_wall, real_cpu, gswap_cpu, added_wall, added_cpu;
  for (int b = 0; b < batches; ++b) {  // interleaved pairs, so drift hits both paths alike
    Sample r = time_batch(r_launch), g = time_batch(g_launch);
    real_wall.push_back(r.wall);
    gswap_wall.push_back(g.wall);
    real_cpu.push_back(r.cpu);
    gswap_cpu.push_back(g.cpu);
    added_wall.push_back(g.wall - r.wall);
    added_cpu.push_back(g.cpu - r.cpu);
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf(
      "launch_overhead: %zu live regions, 8 pointer parameters, %d launches x %d batch pairs\n",
      regions.size(), per_batch, batches);
  std::printf("                 wall ns/launch   thread-CPU ns/launch   (medians)\n");
  std::printf("real driver:     %10.1f       %10.1f\n", median(real_wall), median(real_cpu));
  std::printf("with libgswap:   %10.1f       %10.1f\n", median(gswap_wall), median(gswap_cpu));
  std::printf("added (paired):  %10.1f       %10.1f\n", median(added_wall), median(added_cpu));
  return 0;
}
