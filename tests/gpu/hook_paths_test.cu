// hook_paths_test: every way a CUDA program reaches the driver is intercepted by libgswap.
//
// The CUDA runtime, cuBLAS/cuDNN's static runtimes, Triton and PyTorch do not call the exported
// driver symbols; they look entry points up with dlsym and cuGetProcAddress (design brief, fact 1).
// A hook that only covers the exported symbols passes simcuda tests that link libcuda directly and
// still misses everything a real framework does. So this program asks the device's total memory
// through each path and checks that every path reports the budget, not the physical size:
//   1. the exported symbols (cuMemGetInfo_v2, cuDeviceTotalMem_v2), linked against libcuda;
//   2. cuGetProcAddress with a CUDA 12.0 and a 13.0 ABI request, and the per-thread-stream flag;
//   3. dlopen("libcuda.so.1") + dlsym of the symbols and of cuGetProcAddress_v2 (the runtime's
//   way);
//   4. the runtime: cudaMemGetInfo and cudaGetDriverEntryPointByVersion (PyTorch's way).
// Without the library (no LD_PRELOAD) the same program checks that the paths agree with each other
// and with the physical size, which validates the test itself.
//
// Usage: hook_paths_test [--expect-total BYTES] [--driver-only]
//   --expect-total  what every path must report as total; by default the GSWAP_BUDGET in bytes form
//                   when under gswap (a % budget is checked against the physical size instead).
//   --driver-only   skip the runtime paths (for the simulated driver, which cannot host libcudart)
#include <dlfcn.h>

#include <string>
#include <vector>

#include "gpu_check.h"

using namespace gswap::gpu_test;

namespace {

using MemGetInfoFn = CUresult (*)(size_t*, size_t*);
using TotalMemFn = CUresult (*)(size_t*, CUdevice);
using GetProcFn = CUresult (*)(const char*, void**, int, cuuint64_t,
                               CUdriverProcAddressQueryResult*);

struct Report {
  std::string path;
  size_t free = 0;
  size_t total = 0;      // from the path's cuMemGetInfo
  size_t total_dev = 0;  // from the path's cuDeviceTotalMem (0 when the path has none)
};

Report via(const std::string& path, MemGetInfoFn info, TotalMemFn totalmem, CUdevice dev) {
  Report r{path};
  GT_CHECK(info != nullptr, (path + ": cuMemGetInfo resolved").c_str(), "");
  if (!info) return r;
  GT_CU(info(&r.free, &r.total));
  if (totalmem) GT_CU(totalmem(&r.total_dev, dev));
  return r;
}

template <class Fn>
Fn proc(GetProcFn get, const char* sym, int version, cuuint64_t flags) {
  void* p = nullptr;
  CUdriverProcAddressQueryResult st{};
  CUresult r = get(sym, &p, version, flags, &st);
  if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS) {
    std::printf("note  cuGetProcAddress(%s, %d) -> %d status %d\n", sym, version, (int)r, (int)st);
    return nullptr;
  }
  return reinterpret_cast<Fn>(p);
}

// Parses GSWAP_BUDGET when it is a byte count; 0 for a percentage or when unset.
std::uint64_t budget_bytes_from_env() {
  const char* b = std::getenv("GSWAP_BUDGET");
  if (!b || !*b || std::strchr(b, '%')) return 0;
  return Args::parse_size(b);
}

double budget_percent_from_env() {
  const char* b = std::getenv("GSWAP_BUDGET");
  if (!b || !std::strchr(b, '%')) return 0;
  return std::strtod(b, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  Args args(argc, argv);
  maybe_print_physical_total(args);
  const bool gswap = under_gswap();
  const std::uint64_t physical = physical_total_bytes();
  std::uint64_t expect = args.u64("--expect-total", gswap ? budget_bytes_from_env() : 0);
  const double pct = gswap ? budget_percent_from_env() : 0;
  if (!gswap && !expect) expect = physical;
  std::printf("hook_paths_test: under gswap: %s, physical %s, expected total %s\n",
              gswap ? "yes" : "no", mib(physical).c_str(),
              expect ? mib(expect).c_str() : "(percentage budget)");

  CUdevice dev = init_primary_context();
  std::vector<Report> reports;

  // 1. Exported symbols, bound by the dynamic linker (LD_PRELOAD puts libgswap first).
  reports.push_back(via("exported", &cuMemGetInfo_v2, &cuDeviceTotalMem_v2, dev));

  // 2. cuGetProcAddress, called through the exported symbol, with the ABI versions a CUDA 12 and
  //    a CUDA 13 runtime ask for, and with the per-thread default stream flag.
  GetProcFn exported_get = &cuGetProcAddress_v2;
  for (int version : {12000, 13000}) {
    for (cuuint64_t flags : {(cuuint64_t)CU_GET_PROC_ADDRESS_DEFAULT,
                             (cuuint64_t)CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM}) {
      std::string name = "cuGetProcAddress(v" + std::to_string(version) + (flags ? ", ptds)" : ")");
      reports.push_back(via(name, proc<MemGetInfoFn>(exported_get, "cuMemGetInfo", version, flags),
                            proc<TotalMemFn>(exported_get, "cuDeviceTotalMem", version, flags),
                            dev));
    }
  }

  // 3. dlopen + dlsym, the way libcudart finds the driver. The handle is libcuda's own, so only
  //    a dlsym hook can redirect these lookups.
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  GT_CHECK(h != nullptr, "dlopen(libcuda.so.1)", h ? "" : dlerror());
  if (h) {
    reports.push_back(via("dlsym(libcuda, cuMemGetInfo_v2)",
                          reinterpret_cast<MemGetInfoFn>(dlsym(h, "cuMemGetInfo_v2")),
                          reinterpret_cast<TotalMemFn>(dlsym(h, "cuDeviceTotalMem_v2")), dev));
    auto dl_get = reinterpret_cast<GetProcFn>(dlsym(h, "cuGetProcAddress_v2"));
    GT_CHECK(dl_get != nullptr, "dlsym(libcuda, cuGetProcAddress_v2)", "");
    if (dl_get)
      reports.push_back(via("dlsym(cuGetProcAddress_v2) -> cuGetProcAddress(v12000)",
                            proc<MemGetInfoFn>(dl_get, "cuMemGetInfo", 12000, 0),
                            proc<TotalMemFn>(dl_get, "cuDeviceTotalMem", 12000, 0), dev));
  }
  reports.push_back(via("dlsym(RTLD_DEFAULT, cuMemGetInfo_v2)",
                        reinterpret_cast<MemGetInfoFn>(dlsym(RTLD_DEFAULT, "cuMemGetInfo_v2")),
                        nullptr, dev));

  // 4. The runtime, which reaches the driver only through cuGetProcAddress.
  if (!args.flag("--driver-only")) {
    Report r{"runtime cudaMemGetInfo"};
    GT_RT(cudaMemGetInfo(&r.free, &r.total));
    reports.push_back(r);
    void* p = nullptr;
    cudaDriverEntryPointQueryResult st{};
    GT_RT(cudaGetDriverEntryPointByVersion("cuMemGetInfo", &p, 12000, cudaEnableDefault, &st));
    reports.push_back(via("cudaGetDriverEntryPointByVersion(cuMemGetInfo)",
                          reinterpret_cast<MemGetInfoFn>(p), nullptr, dev));
  }

  const size_t ref = reports.front().total;
  for (const Report& r : reports) {
    std::string d = fmt("total %llu, free %llu", r.total, r.free);
    GT_CHECK(r.total == ref, (r.path + ": total agrees with the exported symbol").c_str(), d);
    GT_CHECK(r.free <= r.total, (r.path + ": free <= total").c_str(), d);
    if (r.total_dev)
      GT_CHECK(r.total_dev == r.total,
               (r.path + ": cuDeviceTotalMem == cuMemGetInfo total").c_str(),
               fmt("%llu vs %llu", r.total_dev, r.total));
    if (physical)
      GT_CHECK(r.total <= physical, (r.path + ": total <= physical").c_str(),
               fmt("%llu vs %llu", r.total, physical));
    if (expect) {
      // The library may round the budget down to the VMM granularity (2 MiB on H100/H200).
      bool ok = r.total <= expect && expect - r.total < (4u << 20);
      GT_CHECK(ok, (r.path + ": total is the expected one").c_str(),
               fmt("got %llu, expected %llu", r.total, expect));
    } else if (pct > 0 && pct < 100 && physical) {
      double want = physical * pct / 100.0;
      bool ok = r.total <= physical && std::abs(static_cast<double>(r.total) - want) < (8u << 20);
      GT_CHECK(
          ok, (r.path + ": total is the % budget").c_str(),
          fmt("got %llu, expected about %llu", r.total, static_cast<unsigned long long>(want)));
    }
  }
  if (h) dlclose(h);
  return finish("hook_paths_test");
}
