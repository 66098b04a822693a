// module_reuse.cpp: a kernel handle handed out again after its module was unloaded.
//
//   module_reuse MODULE_A.so MODULE_B.so
//
// Under SIMCUDA_REUSE_HANDLES=1 and a budget of two 2 MiB regions: A's kernel `count` (one 4-byte
// parameter) is launched, so its layout is cached; A is unloaded and B loaded, whose `fill` gets
// the same CUfunction and takes a pointer after a 4-byte word. fill is launched on a region that
// was swapped out meanwhile: gswap must scan it with fill's layout, not count's, and restore the
// region (else the kernel writes to unmapped memory). The same is done for libraries
// (cuLibraryLoadFromFile, cuLibraryGetKernel, cuLibraryUnload).
#include <cstdint>
#include <cstdio>
#include <vector>

#include "preload_common.h"

namespace {

constexpr std::uint64_t kBytes = 2ull << 20;
constexpr std::uint64_t kWords = kBytes / 4;

// Fills three regions with `base`, base+1, base+2 (under the budget of two, the first is swapped
// out by the third).
void make_regions(CUdeviceptr r[3], unsigned base) {
  for (int k = 0; k < 3; ++k) {
    PCHECK(cuMemAlloc(&r[k], kBytes));
    PCHECK(cuMemsetD32(r[k], base + k, kWords));
  }
}

// Every word of p equals want.
bool holds(CUdeviceptr p, unsigned want, const char* what) {
  std::vector<std::uint32_t> host(kWords);
  PCHECK(cuMemcpyDtoH(host.data(), p, kBytes));
  for (std::uint32_t v : host)
    if (v != want) {
      std::fprintf(stderr, "module_reuse: %s holds %u, expected %u\n", what, v, want);
      return false;
    }
  return true;
}

struct FillArgs {
  std::uint32_t v;
  CUdeviceptr buf;
  std::uint64_t n;
};

CUresult launch_fill(CUfunction f, CUdeviceptr buf, std::uint32_t v) {
  std::uint32_t value = v;
  std::uint64_t n = kWords;
  void* args[] = {&value, &buf, &n};
  return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr);
}

CUresult launch_count(CUfunction f) {
  std::uint32_t n = 1;
  void* args[] = {&n};
  return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: module_reuse MODULE_A.so MODULE_B.so\n");
    return 2;
  }
  preload_init();
  // Modules.
  CUmodule a, b;
  CUfunction count, fill;
  CUdeviceptr r[3];
  make_regions(r, 10);  // regions first: gswap reads no layout while it has none
  PCHECK(cuModuleLoad(&a, argv[1]));
  PCHECK(cuModuleGetFunction(&count, a, "count"));
  PCHECK(launch_count(count));
  PCHECK(cuModuleUnload(a));
  PCHECK(cuModuleLoad(&b, argv[2]));
  PCHECK(cuModuleGetFunction(&fill, b, "fill"));
  if (fill != count) {
    std::fprintf(stderr, "module_reuse: the driver did not hand the handle out again\n");
    return 1;
  }
  PCHECK(launch_fill(fill, r[0], 5));
  PCHECK(cuCtxSynchronize());
  if (!holds(r[0], 15, "a region filled through a reused module handle")) return 1;
  PCHECK(cuModuleUnload(b));
  // Libraries: the kernel handle is launched as a CUfunction.
  CUlibrary la, lb;
  CUkernel kcount, kfill;
  CUdeviceptr s[3];
  make_regions(s, 20);  // r[1] and r[2] out, s[0] too
  PCHECK(cuLibraryLoadFromFile(&la, argv[1], nullptr, nullptr, 0, nullptr, nullptr, 0));
  PCHECK(cuLibraryGetKernel(&kcount, la, "count"));
  PCHECK(launch_count(reinterpret_cast<CUfunction>(kcount)));
  PCHECK(cuLibraryUnload(la));
  PCHECK(cuLibraryLoadFromFile(&lb, argv[2], nullptr, nullptr, 0, nullptr, nullptr, 0));
  PCHECK(cuLibraryGetKernel(&kfill, lb, "fill"));
  if (reinterpret_cast<void*>(kfill) != reinterpret_cast<void*>(kcount)) {
    std::fprintf(stderr, "module_reuse: the driver did not hand the kernel out again\n");
    return 1;
  }
  PCHECK(launch_fill(reinterpret_cast<CUfunction>(kfill), s[0], 7));
  PCHECK(cuCtxSynchronize());
  if (!holds(s[0], 27, "a region filled through a reused library kernel")) return 1;
  for (int k = 1; k < 3; ++k)
    if (!holds(r[k], 10u + k, "a module-test region") ||
        !holds(s[k], 20u + k, "a library-test region"))
      return 1;
  PCHECK(cuLibraryUnload(lb));
  std::printf("module_reuse: reused handles are scanned with their new kernels' layouts\n");
  return 0;
}
