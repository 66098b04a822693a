// frameworks.cpp: a program that looks like a framework process to libgswap's init-time checks.
//
//   frameworks MODULE.so FAKE.so|- [region-MiB]
//
// dlopens FAKE.so (RTLD_GLOBAL, before cuInit, as a framework loads its CUDA libraries; the test
// builds an empty library named libtorch_cuda.so) unless FAKE is "-", then runs three regions over
// a budget of two, each launched in turn, and checks every value: the program must work the same
// whether or not gswap warned about a caching allocator. A refused cuInit exits 1 with its code.
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "preload_common.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: frameworks MODULE.so FAKE.so|- [region-MiB]\n");
    return 2;
  }
  unsigned long long region_bytes = (argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 6ull) << 20;
  if (std::strcmp(argv[2], "-") != 0) {
    void* h = dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      std::fprintf(stderr, "dlopen %s: %s\n", argv[2], dlerror());
      return 2;
    }
    using Marker = int (*)();
    auto marker = reinterpret_cast<Marker>(dlsym(h, "gswap_fake_framework_marker"));
    PEXPECT(marker && marker() == 42);
  }
  CUresult e = cuInit(0);
  if (e != CUDA_SUCCESS) {
    std::fprintf(stderr, "cuInit failed: %d\n", (int)e);
    return 1;
  }
  preload_init();
  CUmodule mod;
  PCHECK(cuModuleLoad(&mod, argv[1]));
  CUfunction add;
  PCHECK(cuModuleGetFunction(&add, mod, "add"));

  unsigned long long n = region_bytes / 4;
  CUdeviceptr b[3];
  for (int k = 0; k < 3; ++k) {
    PCHECK(cuMemAlloc(&b[k], region_bytes));
    PCHECK(cuMemsetD32(b[k], 100u * (k + 1), n));
  }
  for (int round = 0; round < 2; ++round)
    for (int k = 0; k < 3; ++k) PCHECK(launch_add(add, nullptr, b[k], n, 1));
  PCHECK(cuCtxSynchronize());
  for (int k = 0; k < 3; ++k) {
    unsigned got = 0;
    if (!all_equal(b[k], n, 100u * (k + 1) + 2, &got)) {
      std::fprintf(stderr, "frameworks: region %d corrupted (got %u)\n", k, got);
      return 1;
    }
  }
  for (int k = 0; k < 3; ++k) PCHECK(cuMemFree(b[k]));
  std::printf("frameworks: three regions over a budget of two, data verified\n");
  return 0;
}
