// many_kernels.cpp: more distinct kernels than the layout cache's first table holds (16,384).
//
//   many_kernels MODULE.so   (MODULE: many_kernels.so, 20,000 kernels; budget from GSWAP_BUDGET)
//
// Four threads, each with its own stream and region (the budget holds three, so regions swap),
// launch every kernel once, all of them while the cache fills and grows; then they do it again.
// The second pass must not ask the driver for any parameter layout (simcuda counts
// cuFuncGetParamInfo calls): every function stayed cached. Each region must hold exactly the
// number of launches made on it.
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "preload_common.h"
#include "simcuda.h"

namespace {

constexpr unsigned kKernels = 20000;
constexpr int kThreads = 4;
constexpr unsigned long long kWords = 16;  // touched per launch
constexpr std::size_t kRegionBytes = 256 << 10;

std::vector<CUfunction> g_fn(kKernels);
CUdeviceptr g_region[kThreads];
CUcontext g_ctx;

unsigned long long param_info_calls() {
  unsigned long long v = 0;
  if (simcudaGetCounter("calls:cuFuncGetParamInfo", &v) != 0) {
    std::fprintf(stderr, "many_kernels: simcuda has no cuFuncGetParamInfo counter\n");
    std::exit(1);
  }
  return v;
}

// Thread t launches kernels t, t + kThreads, ... on its own region and stream.
void pass() {
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t] {
      PCHECK(cuCtxSetCurrent(g_ctx));
      CUstream s;
      PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
      for (unsigned k = t; k < kKernels; k += kThreads)
        PCHECK(launch_add(g_fn[k], s, g_region[t], kWords, 1));
      PCHECK(cuStreamSynchronize(s));
      PCHECK(cuStreamDestroy(s));
    });
  }
  for (auto& th : threads) th.join();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: many_kernels MODULE.so\n");
    return 2;
  }
  g_ctx = preload_init();
  CUmodule mod;
  PCHECK(cuModuleLoad(&mod, argv[1]));
  for (unsigned k = 0; k < kKernels; ++k) {
    char name[16];
    std::snprintf(name, sizeof name, "k%u", k);
    PCHECK(cuModuleGetFunction(&g_fn[k], mod, name));
  }
  for (auto& r : g_region) {
    PCHECK(cuMemAlloc(&r, kRegionBytes));
    PCHECK(cuMemsetD32(r, 0u, kRegionBytes / 4));
  }
  pass();
  unsigned long long after_first = param_info_calls();
  pass();
  unsigned long long after_second = param_info_calls();
  if (after_second != after_first) {
    std::fprintf(stderr,
                 "many_kernels: the second pass asked the driver %llu more times for parameter "
                 "layouts: functions fell out of the cache\n",
                 after_second - after_first);
    return 1;
  }
  for (int t = 0; t < kThreads; ++t) {
    unsigned want = 2 * (kKernels / kThreads), got = 0;
    if (!all_equal(g_region[t], kWords, want, &got)) {
      std::fprintf(stderr, "many_kernels: region %d holds %u, expected %u\n", t, got, want);
      return 1;
    }
  }
  std::printf(
      "many_kernels: %u kernels launched twice from %d threads; %llu layout queries, all "
      "in the first pass; results verified\n",
      kKernels, kThreads, after_first);
  return 0;
}
