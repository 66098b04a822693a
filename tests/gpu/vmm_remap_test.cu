// vmm_remap_test: evicting an allocation and bringing it back keeps its address and its data.
//
// gswap's whole design rests on one mechanism (design brief, fact 5): a reserved virtual range
// whose physical backing can be unmapped and released, then re-created and mapped at the same
// address, with the application's pointers still valid. Part 1 checks that mechanism directly on
// the driver, with the chunking gswap uses (a range backed by several handles, re-backed by one).
// Part 2 (--through-library, under LD_PRELOAD) checks the library's use of it: allocations whose
// total exceeds the budget are filled, then verified through the pointers cuMemAlloc returned;
// every one must come back at its address with its data, in both orders of access.
//
// Usage: vmm_remap_test [--size 64MiB] [--cycles 3]
//        vmm_remap_test --through-library --total 3GiB [--chunk 256MiB]
#include <vector>

#include "gpu_check.h"
#include "gpu_kernels.cuh"

using namespace gswap::gpu_test;

namespace {

unsigned long long* g_bad = nullptr;  // device counter of mismatches

unsigned long long verify(CUdeviceptr p, std::uint64_t bytes, std::uint32_t seed, CUstream s) {
  GT_CU(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(g_bad), 0, sizeof *g_bad, s));
  count_mismatches<<<kGrid, kBlock, 0, s>>>(reinterpret_cast<const std::uint32_t*>(p), bytes / 4,
                                            seed, g_bad);
  GT_RT(cudaGetLastError());
  unsigned long long bad = 0;
  GT_CU(cuMemcpyDtoHAsync(&bad, reinterpret_cast<CUdeviceptr>(g_bad), sizeof bad, s));
  GT_CU(cuStreamSynchronize(s));
  return bad;
}

void fill(CUdeviceptr p, std::uint64_t bytes, std::uint32_t seed, CUstream s) {
  fill_pattern<<<kGrid, kBlock, 0, s>>>(reinterpret_cast<std::uint32_t*>(p), bytes / 4, seed);
  GT_RT(cudaGetLastError());
}

CUmemAllocationProp device_prop(CUdevice dev) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = dev;
  return prop;
}

void map_rw(CUdeviceptr va, size_t bytes, CUmemGenericAllocationHandle h, size_t offset,
            CUdevice dev) {
  GT_CU(cuMemMap(va, bytes, 0, h, offset));
  CUmemAccessDesc acc{};
  acc.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  acc.location.id = dev;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  GT_CU(cuMemSetAccess(va, bytes, &acc, 1));
}

// Part 1: the driver mechanism, no library involved.
void direct(CUdevice dev, std::uint64_t size, int cycles, CUstream s) {
  CUmemAllocationProp prop = device_prop(dev);
  size_t gran = 0;
  GT_CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size = (size + 2 * gran - 1) / (2 * gran) * (2 * gran);  // two equal halves, each aligned
  std::printf("direct: granularity %s, range %s, %d cycles\n", mib(gran).c_str(), mib(size).c_str(),
              cycles);

  CUdeviceptr va = 0;
  GT_CU(cuMemAddressReserve(&va, size, 0, 0, 0));
  // Back the range with two handles, as a region grown from pool chunks would be.
  CUmemGenericAllocationHandle h[2];
  for (int i = 0; i < 2; ++i) {
    GT_CU(cuMemCreate(&h[i], size / 2, &prop, 0));
    map_rw(va + i * (size / 2), size / 2, h[i], 0, dev);
  }
  const std::uint32_t seed = 0x5eed;
  fill(va, size, seed, s);
  GT_CHECK(verify(va, size, seed, s) == 0, "direct: data written through the first mapping", "");

  void* host = nullptr;
  GT_CU(cuMemAllocHost(&host, size));
  bool two_handles = true;
  for (int c = 0; c < cycles; ++c) {
    // Evict: copy out, unmap, release. The virtual range stays reserved.
    GT_CU(cuMemcpyDtoHAsync(host, va, size, s));
    GT_CU(cuStreamSynchronize(s));
    if (two_handles) {
      for (int i = 0; i < 2; ++i) GT_CU(cuMemUnmap(va + i * (size / 2), size / 2));
      for (int i = 0; i < 2; ++i) GT_CU(cuMemRelease(h[i]));
    } else {
      GT_CU(cuMemUnmap(va, size));
      GT_CU(cuMemRelease(h[0]));
    }
    // Let other memory take the physical pages meanwhile, and scribble on it, so a restore that
    // silently kept the old pages would not pass by luck.
    CUdeviceptr other = 0;
    GT_CU(cuMemAlloc(&other, size));
    GT_CU(cuMemsetD32Async(other, 0xDEADBEEF, size / 4, s));
    GT_CU(cuStreamSynchronize(s));
    GT_CU(cuMemFree(other));

    // Restore at the same address, with one handle for the whole range this time.
    GT_CU(cuMemCreate(&h[0], size, &prop, 0));
    map_rw(va, size, h[0], 0, dev);
    two_handles = false;
    GT_CU(cuMemcpyHtoDAsync(va, host, size, s));
    unsigned long long bad = verify(va, size, seed, s);
    GT_CHECK(bad == 0,
             ("direct: cycle " + std::to_string(c) + " restored at the same address").c_str(),
             fmt("%llu of %llu words differ", bad, size / 4));
  }
  GT_CU(cuMemUnmap(va, size));
  GT_CU(cuMemRelease(h[0]));
  GT_CU(cuMemAddressFree(va, size));
  GT_CU(cuMemFreeHost(host));
}

// Part 2: through the library. More is allocated than the budget holds; the verify passes make
// the library evict and restore, and the kernels read through the original pointers.
void through_library(std::uint64_t total, std::uint64_t chunk, CUstream s) {
  size_t free_b = 0, budget = 0;
  GT_CU(cuMemGetInfo(&free_b, &budget));
  std::printf("through library: budget (reported total) %s, allocating %s in %s chunks\n",
              mib(budget).c_str(), mib(total).c_str(), mib(chunk).c_str());
  GT_CHECK(under_gswap(), "running under LD_PRELOAD=libgswap.so", "");
  GT_CHECK(total > budget, "the allocations exceed the budget, so swapping must happen",
           fmt("%llu > %llu", total, budget));

  const size_t n = total / chunk;
  std::vector<CUdeviceptr> p(n);
  for (size_t i = 0; i < n; ++i) {
    CUresult r = cuMemAlloc(&p[i], chunk);
    if (!GT_CHECK(r == CUDA_SUCCESS, "cuMemAlloc beyond the budget succeeds",
                  fmt("chunk %llu -> %llu", i, r)))
      return;
    fill(p[i], chunk, static_cast<std::uint32_t>(i), s);
  }
  GT_CU(cuStreamSynchronize(s));
  for (int pass = 0; pass < 2; ++pass) {
    unsigned long long bad_total = 0;
    for (size_t k = 0; k < n; ++k) {
      size_t i = pass == 0 ? k : n - 1 - k;  // forward, then backward: both LRU orders
      bad_total += verify(p[i], chunk, static_cast<std::uint32_t>(i), s);
      CUdeviceptr base = 0;
      size_t len = 0;
      GT_CU(cuMemGetAddressRange(&base, &len, p[i] + chunk / 2));
      if (base != p[i] || len < chunk)
        GT_CHECK(false, "cuMemGetAddressRange still names the allocation",
                 fmt("base %llx, expected %llx", base, p[i]));
    }
    GT_CHECK(bad_total == 0,
             (std::string("every allocation intact at its address, ") +
              (pass ? "backward" : "forward") + " pass")
                 .c_str(),
             fmt("%llu words differ (of %llu)", bad_total, total / 4));
  }
  for (CUdeviceptr q : p) GT_CU(cuMemFree(q));
}

}  // namespace

int main(int argc, char** argv) {
  Args args(argc, argv);
  maybe_print_physical_total(args);
  CUdevice dev = init_primary_context();
  CUstream s;
  GT_CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  GT_RT(cudaMalloc(&g_bad, sizeof *g_bad));

  if (args.flag("--through-library"))
    through_library(args.u64("--total", 3ull << 30), args.u64("--chunk", 256ull << 20), s);
  else
    direct(dev, args.u64("--size", 64ull << 20), static_cast<int>(args.u64("--cycles", 3)), s);

  GT_RT(cudaFree(g_bad));
  GT_CU(cuStreamDestroy(s));
  return finish("vmm_remap_test");
}
