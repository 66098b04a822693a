// one_past_end.cpp: kernels given only the end of their buffer.
//
//   one_past_end MODULE.so REGION-MiB   (MODULE: pointer_kernels.so; budget from GSWAP_BUDGET)
//
// Three regions whose sizes are multiples of the granularity, over a budget of two; each kernel
// gets only the end of its region (one past the last byte) and works backwards from it. That end
// lies in the next granule, so unless libgswap counts it as an access of the region ending there,
// the region the kernel reads may be swapped out when it runs (on simcuda a SIGSEGV, on a GPU a
// fatal fault).
#include <cstdio>
#include <cstdlib>

#include "preload_common.h"

namespace {

CUfunction g_add_before;

int run_end(unsigned long long region_bytes) {
  unsigned long long n = region_bytes / 4;
  CUdeviceptr b[3];
  for (auto& p : b) {
    PCHECK(cuMemAlloc(&p, region_bytes));
    PCHECK(cuMemsetD32(p, 7u, n));
  }
  for (int round = 0; round < 3; ++round) {
    for (auto& p : b) {
      CUdeviceptr end = p + region_bytes;  // the only pointer the kernel gets
      unsigned v = 1;
      void* params[] = {&end, &n, &v};
      PCHECK(cuLaunchKernel(g_add_before, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    }
  }
  PCHECK(cuCtxSynchronize());
  for (auto& p : b) PEXPECT(all_equal(p, n, 10u, nullptr));
  std::printf("end: kernels given only one-past-the-end pointers found their regions resident\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: one_past_end MODULE.so [region-MiB]\n");
    return 2;
  }
  unsigned long long region_bytes = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 6ull) << 20;
  preload_init();
  CUmodule mod;
  PCHECK(cuModuleLoad(&mod, argv[1]));
  PCHECK(cuModuleGetFunction(&g_add_before, mod, "add_before"));
  return run_end(region_bytes);
}
