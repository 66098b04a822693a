// meminfo_test: the memory figures a process sees agree with each other and with the budget.
//
// PyTorch's cudaMallocAsync backend asserts when cuMemGetInfo and cuDeviceTotalMem disagree, and
// cuDNN sizes its workspaces from free memory (design brief, fact 10). Under a budget the library
// must report a total equal to the budget and never above the physical device, the same through
// the driver and the runtime, with free memory that moves as allocations come and go.
//
// Usage: meminfo_test [--alloc 1GiB]   (the budget comes from GSWAP_BUDGET, as the library reads
// it)
#include "gpu_check.h"

using namespace gswap::gpu_test;

int main(int argc, char** argv) {
  Args args(argc, argv);
  maybe_print_physical_total(args);
  const bool gswap = under_gswap();
  const std::uint64_t physical = physical_total_bytes();
  CUdevice dev = init_primary_context();
  const std::uint64_t alloc = args.u64("--alloc", 1ull << 30);

  size_t free0 = 0, total = 0, dev_total = 0, rt_free = 0, rt_total = 0;
  GT_CU(cuMemGetInfo(&free0, &total));
  GT_CU(cuDeviceTotalMem(&dev_total, dev));
  const bool runtime = !args.flag("--driver-only");
  if (runtime) GT_RT(cudaMemGetInfo(&rt_free, &rt_total));
  std::printf("meminfo_test: under gswap: %s, GSWAP_BUDGET=%s, physical %s, total %s, free %s\n",
              gswap ? "yes" : "no", std::getenv("GSWAP_BUDGET") ? std::getenv("GSWAP_BUDGET") : "",
              mib(physical).c_str(), mib(total).c_str(), mib(free0).c_str());

  GT_CHECK(physical > 0, "the physical size was learned from a bare-driver child", "");
  GT_CHECK(total == dev_total, "cuMemGetInfo total == cuDeviceTotalMem",
           fmt("%llu vs %llu", total, dev_total));
  if (runtime)
    GT_CHECK(rt_total == total, "cudaMemGetInfo total == cuMemGetInfo total",
             fmt("%llu vs %llu", rt_total, total));
  GT_CHECK(free0 <= total, "free <= total", fmt("%llu <= %llu", free0, total));
  GT_CHECK(total <= physical, "total never above the physical device",
           fmt("%llu <= %llu", total, physical));

  const char* budget = std::getenv("GSWAP_BUDGET");
  if (gswap && budget && *budget) {
    std::uint64_t want = 0;
    if (std::strchr(budget, '%'))
      want = static_cast<std::uint64_t>(static_cast<double>(physical) *
                                        std::min(100.0, std::strtod(budget, nullptr)) / 100.0);
    else
      want = std::min<std::uint64_t>(Args::parse_size(budget), physical);
    // Rounding to the VMM granularity is allowed, nothing more.
    const std::uint64_t slack = 8u << 20;
    GT_CHECK(total <= want + slack && total + slack >= want, "total is the budget",
             fmt("got %llu, budget %llu", total, want));
  }

  // Free memory moves with an allocation that is resident, and comes back when it is freed.
  CUdeviceptr p = 0;
  GT_CU(cuMemAlloc(&p, alloc));
  GT_CU(cuMemsetD8(p, 1, alloc));  // touch it, so a lazy library has made it resident
  GT_CU(cuCtxSynchronize());
  size_t free1 = 0, total1 = 0;
  GT_CU(cuMemGetInfo(&free1, &total1));
  GT_CHECK(total1 == total, "total is stable across an allocation",
           fmt("%llu vs %llu", total1, total));
  GT_CHECK(free1 <= free0 && free0 - free1 >= alloc - (4u << 20),
           "free drops by at least the allocation",
           fmt("drop %llu for an allocation of %llu", free0 - free1, alloc));
  GT_CU(cuMemFree(p));
  GT_CU(cuCtxSynchronize());
  size_t free2 = 0, total2 = 0;
  GT_CU(cuMemGetInfo(&free2, &total2));
  GT_CHECK(free2 + (64u << 20) >= free0, "free comes back after cuMemFree",
           fmt("%llu vs %llu before", free2, free0));
  GT_CHECK(free2 <= total2, "free <= total after the free", fmt("%llu <= %llu", free2, total2));
  return finish("meminfo_test");
}
