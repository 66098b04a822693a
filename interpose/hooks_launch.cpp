// hooks_launch.cpp: kernel launches. Each launch's parameter bytes are scanned for region
// addresses (param_scan.h) with the layout cached per function; then access.h makes the regions
// resident before the launch is enqueued (fact 4: a GPU touching an unmapped page kills the
// context, so there is no fault to catch afterwards).
#include "interpose/access.h"
#include "interpose/driver.h"
#include "interpose/hooks.h"
#include "interpose/layout_cache.h"

namespace gswap::interpose {
namespace {

template <class Enqueue>
CUresult launch(CUfunction f, CUstream stream, bool per_thread, void** params, void** extra,
                Enqueue&& enqueue) {
  FastState& fs = fast();
  fs.launches.add();
  if (!fs.active.load(std::memory_order_acquire)) return enqueue();
  TouchSet t;
  bool tracked = true;
  bool ordered = fs.ordered.load(std::memory_order_relaxed);
  const CachedLayout* c = params || ordered ? layout_of(f) : nullptr;
  if (ordered && c->name)
    send_kernel_name(reinterpret_cast<std::uint64_t>(f) | 1, c->name, &c->name_sent);
  if (params) {
    if (c->known)
      scan_kernel_params(fs.map, c->layout, params, &t);
    else if (c->invalid_handle)
      return CUDA_ERROR_INVALID_HANDLE;  // as the driver answers a launch of it
    else
      tracked = false;
  } else if (extra && !scan_extra(fs.map, extra, &t)) {
    // The driver refuses it (param_scan.h) and runs nothing: answer as it does, before anything
    // is made resident.
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (!tracked || t.overflow) {
    CUresult e =
        keep_all_resident(tracked ? "a launch naming more regions than gswap found memory to list"
                                  : "a launch whose parameter layout the driver cannot describe");
    if (e != CUDA_SUCCESS) return e;
    return enqueue();
  }
  if (fs.capturing.load(std::memory_order_relaxed) > 0) {
    // Captured launches replay later without passing through gswap: keep what they touch.
    CUresult e = keep_resident_captured(t);
    if (e != CUDA_SUCCESS) return e;
  }
  return with_access(t, stream, per_thread, false, enqueue, reinterpret_cast<std::uint64_t>(f) | 1,
                     c ? c->name : nullptr);
}

}  // namespace

CUresult hook_cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by, unsigned bz, unsigned shmem, CUstream s, void** params,
                             void** extra) {
  return launch(f, s, false, params, extra, [&] {
    return real().cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
  });
}

CUresult hook_cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                  unsigned by, unsigned bz, unsigned shmem, CUstream s,
                                  void** params, void** extra) {
  return launch(f, s, true, params, extra, [&] {
    return real().cuLaunchKernel_ptsz(f, gx, gy, gz, bx, by, bz, shmem, s, params, extra);
  });
}

CUresult hook_cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                               void** extra) {
  CUstream s = config ? config->hStream : nullptr;
  return launch(f, s, false, params, extra,
                [&] { return real().cuLaunchKernelEx(config, f, params, extra); });
}

CUresult hook_cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** params,
                                    void** extra) {
  CUstream s = config ? config->hStream : nullptr;
  return launch(f, s, true, params, extra,
                [&] { return real().cuLaunchKernelEx_ptsz(config, f, params, extra); });
}

CUresult hook_cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                        unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                        CUstream s, void** params) {
  return launch(f, s, false, params, nullptr, [&] {
    return real().cuLaunchCooperativeKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params);
  });
}

CUresult hook_cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                             unsigned bx, unsigned by, unsigned bz, unsigned shmem,
                                             CUstream s, void** params) {
  return launch(f, s, true, params, nullptr, [&] {
    return real().cuLaunchCooperativeKernel_ptsz(f, gx, gy, gz, bx, by, bz, shmem, s, params);
  });
}

// Modules and libraries: the layouts cached for their handles are forgotten before the driver
// unloads them (it may hand the same handles out again for other kernels, whose parameters sit
// elsewhere), while it can still say which handles are theirs.
CUresult hook_cuModuleUnload(CUmodule hmod) {
  if (hmod && real().cuFuncGetModule)
    layout_cache_forget(
        [](CUfunction f, void* ctx) {
          CUmodule m = nullptr;
          return real().cuFuncGetModule(&m, f) == CUDA_SUCCESS && m == static_cast<CUmodule>(ctx);
        },
        hmod);
  return real().cuModuleUnload(hmod);
}

CUresult hook_cuLibraryUnload(CUlibrary library) {
  struct Owner {
    CUlibrary library;
    CUmodule module = nullptr;  // its module in this context, for handles from cuKernelGetFunction
  } owner{library};
  if (real().cuLibraryGetModule &&
      real().cuLibraryGetModule(&owner.module, library) != CUDA_SUCCESS)
    owner.module = nullptr;
  if (library)
    layout_cache_forget(
        [](CUfunction f, void* ctx) {
          const auto* o = static_cast<const Owner*>(ctx);
          CUlibrary l = nullptr;
          CUmodule m = nullptr;
          // A CUkernel launched as a CUfunction (fact 3), or a function of the library's module.
          if (real().cuKernelGetLibrary &&
              real().cuKernelGetLibrary(&l, reinterpret_cast<CUkernel>(f)) == CUDA_SUCCESS)
            return l == o->library;
          return o->module && real().cuFuncGetModule &&
                 real().cuFuncGetModule(&m, f) == CUDA_SUCCESS && m == o->module;
        },
        &owner);
  return real().cuLibraryUnload(library);
}

}  // namespace gswap::interpose
