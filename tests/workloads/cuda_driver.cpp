// cuda_driver.cpp: loads the CUDA driver's entry points once (see cuda_driver.h for why this way).
#include "cuda_driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace minitrain {
namespace {

Driver g_driver;

// cuda.h maps cuGetProcAddress to cuGetProcAddress_v2 (the form with a symbol-status argument);
// the driver exports that ABI under this name.
constexpr const char kGetProcAddressSymbol[] = "cuGetProcAddress_v2";

// The version each entry point is asked for. cuGetProcAddress returns the newest ABI at or below
// the version asked for, and CUDA 13.0 gave two base names a new ABI that cuda.h's plain
// declaration (the member's type) does not describe: cuCtxSynchronize and cuCtxGetDevice take a
// context there (cuCtxSynchronize_v2). Asked for at 13.0, the real driver hands back that form, and
// a call without the context fails with CUDA_ERROR_CONTEXT_IS_DESTROYED. Those are asked for
// at 12.9.
constexpr int LookupVersion(std::string_view name) {
  return name == "cuCtxSynchronize" || name == "cuCtxGetDevice" ? std::min(CUDA_VERSION, 12090)
                                                                : CUDA_VERSION;
}

}  // namespace

const Driver& drv() {
  return g_driver;
}

bool LoadDriver(std::string* error) {
  // RTLD_GLOBAL is not needed: nothing else resolves driver symbols through the global scope.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    *error = std::string("cannot load libcuda.so.1: ") + (why != nullptr ? why : "unknown error");
    return false;
  }
  auto get_proc =
      reinterpret_cast<decltype(&::cuGetProcAddress)>(dlsym(lib, kGetProcAddressSymbol));
  if (get_proc == nullptr) {
    *error = std::string("libcuda.so.1 has no ") + kGetProcAddressSymbol;
    return false;
  }
  Driver d;
  bool ok = true;
  // #name is the base name ("cuMemAlloc"), which is what cuGetProcAddress looks up; the driver
  // picks the version that matches LookupVersion (CUDA_VERSION but for the two above).
#define MT_DRIVER_RESOLVE(name)                                                         \
  {                                                                                     \
    void* fn = nullptr;                                                                 \
    CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;       \
    const int version = LookupVersion(#name);                                           \
    CUresult rc = get_proc(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &status);  \
    if (rc != CUDA_SUCCESS || fn == nullptr || status != CU_GET_PROC_ADDRESS_SUCCESS) { \
      if (ok)                                                                           \
        *error = "cuGetProcAddress(\"" #name "\", " + std::to_string(version) +         \
                 ") failed: result " + std::to_string(int(rc)) + ", status " +          \
                 std::to_string(int(status));                                           \
      ok = false;                                                                       \
    }                                                                                   \
    d.name = reinterpret_cast<decltype(d.name)>(fn);                                    \
  }
  MT_DRIVER_ENTRY_POINTS(MT_DRIVER_RESOLVE)
#undef MT_DRIVER_RESOLVE
  if (!ok) return false;
  g_driver = d;
  return true;
}

void CheckResult(CUresult rc, const char* call, const char* file, int line) {
  if (rc == CUDA_SUCCESS) return;
  const char* name = nullptr;
  const char* text = nullptr;
  if (g_driver.cuGetErrorName == nullptr || g_driver.cuGetErrorName(rc, &name) != CUDA_SUCCESS)
    name = "unknown error";
  if (g_driver.cuGetErrorString == nullptr || g_driver.cuGetErrorString(rc, &text) != CUDA_SUCCESS)
    text = "";
  std::fprintf(stderr, "minitrain: %s failed at %s:%d -> %d %s (%s)\n", call, file, line, int(rc),
               name, text);
  std::exit(1);
}

}  // namespace minitrain
