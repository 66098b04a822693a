// dlsym_caller.cpp: libgswap's dlsym resolves every lookup relative to its real caller, as glibc's
// does, with another shim preloaded before or after it (malloc_shim.c).
//
//   LD_PRELOAD="libgswap.so libmalloc_shim.so" dlsym_caller BUDGET_BYTES   (and the other order)
//
// The shim's malloc must work: it found the real malloc with dlsym(RTLD_NEXT) (had that lookup
// been made relative to libgswap, the shim would have found itself and recursed to a SIGSEGV).
// From this program, RTLD_NEXT must find the first malloc after the program, as RTLD_DEFAULT does,
// through both glibc versions of dlsym. Driver entry points found through dlsym (on libcuda's
// handle, RTLD_DEFAULT, RTLD_NEXT) must be libgswap's: memory figures report the budget, and three
// budgets' worth of data survive swapping.
#include <cuda.h>
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int fail(const char* what) {
  std::fprintf(stderr, "dlsym_caller: %s\n", what);
  return 1;
}

// The object that defines the code at p.
const char* object_of(void* p) {
  Dl_info info;
  return p && dladdr(p, &info) && info.dli_fname ? info.dli_fname : "?";
}

#if defined(__x86_64__)
// The dlsym that binaries linked against glibc before 2.34 call.
extern "C" void* dlsym_2_2_5(void* handle, const char* name);
__asm__(".symver dlsym_2_2_5, dlsym@GLIBC_2.2.5");
#endif

}  // namespace

#define CHECK(call)                                                          \
  do {                                                                       \
    CUresult e_ = (call);                                                    \
    if (e_ != CUDA_SUCCESS) {                                                \
      std::fprintf(stderr, "dlsym_caller: %s failed: %d\n", #call, (int)e_); \
      return 1;                                                              \
    }                                                                        \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 2) return fail("usage: dlsym_caller BUDGET_BYTES");
  size_t budget = std::strtoull(argv[1], nullptr, 10);

  // The shim is loaded and serves malloc.
  auto shim_calls =
      reinterpret_cast<unsigned long long (*)()>(dlsym(RTLD_DEFAULT, "shim_malloc_calls"));
  if (!shim_calls) return fail("the malloc shim is not preloaded");
  unsigned long long before = shim_calls();
  void* volatile p = std::malloc(1000);
  std::free(p);
  if (shim_calls() <= before) return fail("malloc did not go through the shim");

  // RTLD_NEXT from here is the first malloc after this program: the shim's, which RTLD_DEFAULT
  // finds too; and libc's for a name the shim does not define.
  void* first = dlsym(RTLD_DEFAULT, "malloc");
  void* next = dlsym(RTLD_NEXT, "malloc");
  std::printf("malloc: RTLD_DEFAULT %s, RTLD_NEXT %s\n", object_of(first), object_of(next));
  if (!std::strstr(object_of(first), "malloc_shim")) return fail("RTLD_DEFAULT missed the shim");
  if (next != first) return fail("dlsym(RTLD_NEXT) was not resolved relative to its caller");
  if (!std::strstr(object_of(dlsym(RTLD_NEXT, "getpid")), "libc"))
    return fail("dlsym(RTLD_NEXT, \"getpid\") did not find libc's");
#if defined(__x86_64__)
  if (dlsym_2_2_5(RTLD_NEXT, "malloc") != first)
    return fail("dlsym@GLIBC_2.2.5(RTLD_NEXT) was not resolved relative to its caller");
#endif

  // Driver entry points through dlsym are libgswap's, by every handle.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return fail("cannot dlopen libcuda.so.1");
  auto init = reinterpret_cast<CUresult (*)(unsigned)>(dlsym(lib, "cuInit"));
  auto device_get = reinterpret_cast<CUresult (*)(CUdevice*, int)>(dlsym(lib, "cuDeviceGet"));
  auto retain =
      reinterpret_cast<CUresult (*)(CUcontext*, CUdevice)>(dlsym(lib, "cuDevicePrimaryCtxRetain"));
  auto set_current = reinterpret_cast<CUresult (*)(CUcontext)>(dlsym(lib, "cuCtxSetCurrent"));
  auto mem_info =
      reinterpret_cast<CUresult (*)(size_t*, size_t*)>(dlsym(RTLD_NEXT, "cuMemGetInfo_v2"));
  auto alloc =
      reinterpret_cast<CUresult (*)(CUdeviceptr*, size_t)>(dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  auto free_ = reinterpret_cast<CUresult (*)(CUdeviceptr)>(dlsym(lib, "cuMemFree_v2"));
  auto htod = reinterpret_cast<CUresult (*)(CUdeviceptr, const void*, size_t)>(
      dlsym(lib, "cuMemcpyHtoD_v2"));
  auto dtoh =
      reinterpret_cast<CUresult (*)(void*, CUdeviceptr, size_t)>(dlsym(lib, "cuMemcpyDtoH_v2"));
  if (!init || !device_get || !retain || !set_current || !mem_info || !alloc || !free_ || !htod ||
      !dtoh)
    return fail("dlsym could not find a driver entry point");
  for (void* fn : {reinterpret_cast<void*>(mem_info), reinterpret_cast<void*>(alloc),
                   reinterpret_cast<void*>(htod)})
    if (!std::strstr(object_of(fn), "libgswap")) return fail("a driver entry point bypassed gswap");

  CHECK(init(0));
  CUdevice dev;
  CHECK(device_get(&dev, 0));
  CUcontext ctx;
  CHECK(retain(&ctx, dev));
  CHECK(set_current(ctx));
  size_t free_b = 0, total = 0;
  CHECK(mem_info(&free_b, &total));
  if (total != budget) return fail("cuMemGetInfo does not report the budget");
  // Three budgets' worth of quarter-budget buffers, each with its own pattern.
  size_t chunk = budget / 4;
  std::vector<CUdeviceptr> bufs(12);
  std::vector<unsigned> host(chunk / 4);
  for (size_t k = 0; k < bufs.size(); ++k) {
    CHECK(alloc(&bufs[k], chunk));
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned>(k * 7919u + i);
    CHECK(htod(bufs[k], host.data(), chunk));
  }
  for (size_t k = 0; k < bufs.size(); ++k) {
    CHECK(dtoh(host.data(), bufs[k], chunk));
    for (size_t i = 0; i < host.size(); ++i)
      if (host[i] != static_cast<unsigned>(k * 7919u + i)) return fail("data lost in swapping");
  }
  for (CUdeviceptr b : bufs) CHECK(free_(b));
  std::printf(
      "dlsym_caller: lookups resolved relative to their callers; driver entry points "
      "intercepted; 3x the budget verified\n");
  return 0;
}
