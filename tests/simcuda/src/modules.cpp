// modules.cpp: modules and libraries as host shared libraries (the ABI in simcuda.h), kernel
// lookup and parameter info, and kernel launches.
//
// Modules and functions are created and destroyed under handles_mu (through the handle sets);
// a Func is immutable after creation, so launches read it without a lock.
#include <dlfcn.h>
#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "internal.h"

namespace simcuda {
namespace {

// Function objects of unloaded modules, for SIMCUDA_REUSE_HANDLES=1: a later load hands the most
// recently freed out again, so a stale CUfunction names another kernel (as with a driver that
// reuses freed memory). Never freed otherwise: a stale handle then stays invalid.
std::mutex g_spare_mu;
std::vector<Func*> g_spare_funcs;

Func* new_func() {
  std::lock_guard<std::mutex> lock(g_spare_mu);
  if (g_spare_funcs.empty()) return new Func;
  Func* f = g_spare_funcs.back();
  g_spare_funcs.pop_back();
  *f = Func{};
  return f;
}

CUresult open_module(const char* path, int memfd, bool is_library, Module** out) {
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!dl) {
    if (memfd >= 0) close(memfd);
    if (access(path, R_OK) != 0) return CUDA_ERROR_FILE_NOT_FOUND;
    return CUDA_ERROR_INVALID_IMAGE;
  }
  auto entry = reinterpret_cast<simcuda_module_entry_fn>(dlsym(dl, SIMCUDA_MODULE_ENTRY_NAME));
  const simcuda_module_desc* md = entry ? entry() : nullptr;
  if (!md || md->abi_version != SIMCUDA_ABI_VERSION || (md->num_kernels && !md->kernels)) {
    dlclose(dl);
    if (memfd >= 0) close(memfd);
    return CUDA_ERROR_INVALID_IMAGE;
  }
  auto* m = new Module;
  m->dl = dl;
  m->memfd = memfd;
  m->md = md;
  m->is_library = is_library;
  for (uint32_t i = 0; i < md->num_kernels; ++i) {
    const simcuda_kernel_desc& k = md->kernels[i];
    if (!k.name || !k.fn || (k.num_params && !k.params)) {
      for (Func* f : m->funcs) delete f;
      dlclose(dl);
      if (memfd >= 0) close(memfd);
      delete m;
      return CUDA_ERROR_INVALID_IMAGE;
    }
    auto* f = new_func();
    f->mod = m;
    f->desc = &k;
    for (uint32_t p = 0; p < k.num_params; ++p)
      f->params_bytes = std::max(f->params_bytes, k.params[p].offset + k.params[p].size);
    m->funcs.push_back(f);
  }
  add_handle(g().modules, m);
  for (Func* f : m->funcs) add_handle(g().funcs, f);
  *out = m;
  return CUDA_SUCCESS;
}

// Size of an ELF image from its headers: the furthest of the section and program header tables
// and the data they describe.
size_t elf_size(const void* image) {
  auto* eh = static_cast<const Elf64_Ehdr*>(image);
  size_t end = eh->e_shoff + static_cast<size_t>(eh->e_shnum) * eh->e_shentsize;
  end = std::max(end, eh->e_phoff + static_cast<size_t>(eh->e_phnum) * eh->e_phentsize);
  auto* sh = reinterpret_cast<const Elf64_Shdr*>(static_cast<const char*>(image) + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i)
    if (sh[i].sh_type != SHT_NOBITS) end = std::max(end, sh[i].sh_offset + sh[i].sh_size);
  return end;
}

CUresult load_image(const void* image, bool is_library, Module** out) {
  if (CUresult r = check_init()) return r;
  if (!image || !out) return CUDA_ERROR_INVALID_VALUE;
  const char* bytes = static_cast<const char*>(image);
  const size_t plen = sizeof(SIMCUDA_IMAGE_PATH_PREFIX) - 1;
  if (std::strncmp(bytes, SIMCUDA_IMAGE_PATH_PREFIX, plen) == 0)
    return open_module(bytes + plen, -1, is_library, out);
  auto* eh = static_cast<const Elf64_Ehdr*>(image);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
      eh->e_type != ET_DYN)
    return CUDA_ERROR_INVALID_IMAGE;
  size_t n = elf_size(image);
  int fd = memfd_create("simcuda-module", MFD_CLOEXEC);
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  size_t done = 0;
  while (done < n) {
    ssize_t w = write(fd, bytes + done, n - done);
    if (w <= 0) {
      close(fd);
      return CUDA_ERROR_INVALID_IMAGE;
    }
    done += static_cast<size_t>(w);
  }
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  return open_module(path, fd, is_library, out);
}

CUresult unload(Module* m) {
  if (!live(g().modules, m)) return CUDA_ERROR_INVALID_HANDLE;
  if (capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // it waits for the device
  if (!remove_handle(g().modules, m)) return CUDA_ERROR_INVALID_HANDLE;
  for (Func* f : m->funcs) {
    remove_handle(g().funcs, f);
  }
  // Kernels still queued would run code from the library: finish them before dlclose.
  if (Ctx* c = current_ctx(); c && live(g().ctxs, c)) sync_ctx(c);
  dlclose(m->dl);
  if (m->memfd >= 0) close(m->memfd);
  if (g().cfg.reuse_handles) {
    std::lock_guard<std::mutex> lock(g_spare_mu);
    for (Func* f : m->funcs) g_spare_funcs.push_back(f);
  }
  return CUDA_SUCCESS;  // Module and Func objects stay allocated so stale handles read invalid
}

CUresult get_func(Module* m, const char* name, Func** out) {
  if (CUresult r = check_init()) return r;
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  if (!live(g().modules, m)) return CUDA_ERROR_INVALID_HANDLE;
  for (Func* f : m->funcs)
    if (std::strcmp(f->desc->name, name) == 0) {
      *out = f;
      return CUDA_SUCCESS;
    }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult param_info(Func* f, size_t i, size_t* off, size_t* size) {
  if (CUresult r = check_init()) return r;
  if (!live(g().funcs, f)) return CUDA_ERROR_INVALID_HANDLE;
  if (i >= f->desc->num_params) return CUDA_ERROR_INVALID_VALUE;
  if (off) *off = f->desc->params[i].offset;
  if (size) *size = f->desc->params[i].size;
  return CUDA_SUCCESS;
}

CUresult func_attr(int* pi, CUfunction_attribute a, Func* f) {
  if (CUresult r = check_init()) return r;
  if (!pi) return CUDA_ERROR_INVALID_VALUE;
  if (!live(g().funcs, f)) return CUDA_ERROR_INVALID_HANDLE;
  switch (a) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *pi = 1024;
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
      *pi = 0;
      break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
      *pi = 0;
      break;
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
      *pi = 0;
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *pi = 32;
      break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
      *pi = 90;
      break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      *pi = 90;
      break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *pi = 49152;
      break;
    default:
      *pi = 0;
      break;
  }
  return CUDA_SUCCESS;
}

CUresult launch(Func* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                unsigned bz, unsigned shmem, CUstream h, void** params, void** extra, bool pt) {
  if (CUresult r = check_init()) return r;
  if (!live(g().funcs, f)) return CUDA_ERROR_INVALID_HANDLE;
  if (!gx || !gy || !gz || !bx || !by || !bz) return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<uint64_t>(bx) * by * bz > 1024) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (params && extra) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.kind = OpKind::Kernel;
  op.desc = f->desc;
  op.grid = {gx, gy, gz};
  op.block = {bx, by, bz};
  op.shmem = shmem;
  const simcuda_kernel_desc* k = f->desc;
  if (extra) {
    const void* buf = nullptr;
    size_t size = 0;
    bool have_size = false;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
      if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
        buf = extra[i + 1];
      else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
        size = *static_cast<size_t*>(extra[i + 1]);
        have_size = true;
      } else
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!have_size || (!buf && size) || size < f->params_bytes) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(op.alloc_params(size), buf, size);
  } else {
    uint8_t* p = op.alloc_params(f->params_bytes);
    if (k->num_params && !params) return CUDA_ERROR_INVALID_VALUE;
    std::memset(p, 0, f->params_bytes);  // padding between parameters reads as zero
    for (uint32_t i = 0; i < k->num_params; ++i)
      std::memcpy(p + k->params[i].offset, params[i], k->params[i].size);
  }
  return submit(s, std::move(op));
}

}  // namespace
}  // namespace simcuda

using namespace simcuda;

SC_EXPORT CUresult cuModuleLoad(CUmodule* mod, const char* fname) {
  SC_ENTRY(cuModuleLoad);
  if (CUresult r = check_init()) return r;
  if (!mod || !fname) return CUDA_ERROR_INVALID_VALUE;
  Module* m = nullptr;
  CUresult r = open_module(fname, -1, false, &m);
  if (r == CUDA_SUCCESS) *mod = reinterpret_cast<CUmodule>(m);
  return r;
}
static CUresult module_load_data(CUmodule* mod, const void* image) {
  Module* m = nullptr;
  CUresult r = load_image(image, false, &m);
  if (r == CUDA_SUCCESS) *mod = reinterpret_cast<CUmodule>(m);
  return r;
}
SC_EXPORT CUresult cuModuleLoadData(CUmodule* mod, const void* image) {
  SC_ENTRY(cuModuleLoadData);
  return module_load_data(mod, image);
}
SC_EXPORT CUresult cuModuleLoadDataEx(CUmodule* mod, const void* image, unsigned int n,
                                      CUjit_option* o, void** v) {
  SC_ENTRY(cuModuleLoadDataEx);
  return module_load_data(mod, image);
}
SC_EXPORT CUresult cuModuleLoadFatBinary(CUmodule* mod, const void* image) {
  SC_ENTRY(cuModuleLoadFatBinary);
  return module_load_data(mod, image);
}
SC_EXPORT CUresult cuModuleUnload(CUmodule mod) {
  SC_ENTRY(cuModuleUnload);
  if (CUresult r = check_init()) return r;
  auto* m = reinterpret_cast<Module*>(mod);
  if (!live(g().modules, m) || m->is_library) return CUDA_ERROR_INVALID_HANDLE;
  return unload(m);
}
SC_EXPORT CUresult cuModuleGetFunction(CUfunction* f, CUmodule mod, const char* name) {
  SC_ENTRY(cuModuleGetFunction);
  Func* fn = nullptr;
  CUresult r = get_func(reinterpret_cast<Module*>(mod), name, &fn);
  if (r == CUDA_SUCCESS) *f = reinterpret_cast<CUfunction>(fn);
  return r;
}
static CUresult module_function_count(unsigned int* n, CUmodule mod) {
  if (CUresult r = check_init()) return r;
  auto* m = reinterpret_cast<Module*>(mod);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  if (!live(g().modules, m)) return CUDA_ERROR_INVALID_HANDLE;
  *n = static_cast<unsigned>(m->funcs.size());
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuModuleGetFunctionCount(unsigned int* n, CUmodule mod) {
  SC_ENTRY(cuModuleGetFunctionCount);
  return module_function_count(n, mod);
}
SC_EXPORT CUresult cuFuncGetParamInfo(CUfunction f, size_t i, size_t* off, size_t* size) {
  SC_ENTRY(cuFuncGetParamInfo);
  return param_info(reinterpret_cast<Func*>(f), i, off, size);
}
static CUresult func_name(const char** name, CUfunction f) {
  if (CUresult r = check_init()) return r;
  auto* fn = reinterpret_cast<Func*>(f);
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  if (!live(g().funcs, fn)) return CUDA_ERROR_INVALID_HANDLE;
  *name = fn->desc->name;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuFuncGetName(const char** name, CUfunction f) {
  SC_ENTRY(cuFuncGetName);
  return func_name(name, f);
}
SC_EXPORT CUresult cuFuncGetAttribute(int* pi, CUfunction_attribute a, CUfunction f) {
  SC_ENTRY(cuFuncGetAttribute);
  return func_attr(pi, a, reinterpret_cast<Func*>(f));
}
SC_EXPORT CUresult cuFuncSetAttribute(CUfunction f, CUfunction_attribute a, int v) {
  SC_ENTRY(cuFuncSetAttribute);
  if (CUresult r = check_init()) return r;
  return live(g().funcs, f) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
SC_EXPORT CUresult cuFuncGetModule(CUmodule* mod, CUfunction f) {
  SC_ENTRY(cuFuncGetModule);
  if (CUresult r = check_init()) return r;
  auto* fn = reinterpret_cast<Func*>(f);
  if (!mod) return CUDA_ERROR_INVALID_VALUE;
  if (!live(g().funcs, fn)) return CUDA_ERROR_INVALID_HANDLE;
  *mod = reinterpret_cast<CUmodule>(fn->mod);
  return CUDA_SUCCESS;
}

// ---- libraries and kernels: a CUkernel is the same object as its CUfunction ----
static CUresult lib_out(CUresult r, Module* m, CUlibrary* lib) {
  if (r == CUDA_SUCCESS) *lib = reinterpret_cast<CUlibrary>(m);
  return r;
}
SC_EXPORT CUresult cuLibraryLoadData(CUlibrary* lib, const void* code, CUjit_option* jo, void** jv,
                                     unsigned int nj, CUlibraryOption* lo, void** lv,
                                     unsigned int nl) {
  SC_ENTRY(cuLibraryLoadData);
  if (!lib) return CUDA_ERROR_INVALID_VALUE;
  Module* m = nullptr;
  CUresult r = load_image(code, true, &m);
  return lib_out(r, m, lib);
}
SC_EXPORT CUresult cuLibraryLoadFromFile(CUlibrary* lib, const char* file, CUjit_option* jo,
                                         void** jv, unsigned int nj, CUlibraryOption* lo, void** lv,
                                         unsigned int nl) {
  SC_ENTRY(cuLibraryLoadFromFile);
  if (CUresult r = check_init()) return r;
  if (!lib || !file) return CUDA_ERROR_INVALID_VALUE;
  Module* m = nullptr;
  CUresult r = open_module(file, -1, true, &m);
  return lib_out(r, m, lib);
}
SC_EXPORT CUresult cuLibraryUnload(CUlibrary lib) {
  SC_ENTRY(cuLibraryUnload);
  if (CUresult r = check_init()) return r;
  auto* m = reinterpret_cast<Module*>(lib);
  if (!live(g().modules, m) || !m->is_library) return CUDA_ERROR_INVALID_HANDLE;
  return unload(m);
}
SC_EXPORT CUresult cuLibraryGetKernel(CUkernel* k, CUlibrary lib, const char* name) {
  SC_ENTRY(cuLibraryGetKernel);
  auto* m = reinterpret_cast<Module*>(lib);
  if (live(g().modules, m) && !m->is_library) return CUDA_ERROR_INVALID_HANDLE;
  Func* fn = nullptr;
  CUresult r = get_func(m, name, &fn);
  if (r == CUDA_SUCCESS) *k = reinterpret_cast<CUkernel>(fn);
  return r;
}
SC_EXPORT CUresult cuLibraryGetKernelCount(unsigned int* n, CUlibrary lib) {
  SC_ENTRY(cuLibraryGetKernelCount);
  return module_function_count(n, reinterpret_cast<CUmodule>(lib));
}
SC_EXPORT CUresult cuLibraryGetModule(CUmodule* mod, CUlibrary lib) {
  SC_ENTRY(cuLibraryGetModule);
  if (CUresult r = check_init()) return r;
  if (!mod) return CUDA_ERROR_INVALID_VALUE;
  if (!live(g().modules, lib)) return CUDA_ERROR_INVALID_HANDLE;
  *mod = reinterpret_cast<CUmodule>(lib);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuKernelGetFunction(CUfunction* f, CUkernel k) {
  SC_ENTRY(cuKernelGetFunction);
  if (CUresult r = check_init()) return r;
  if (!f) return CUDA_ERROR_INVALID_VALUE;
  if (!live(g().funcs, k)) return CUDA_ERROR_INVALID_HANDLE;
  *f = reinterpret_cast<CUfunction>(k);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuKernelGetLibrary(CUlibrary* lib, CUkernel k) {
  SC_ENTRY(cuKernelGetLibrary);
  if (CUresult r = check_init()) return r;
  auto* fn = reinterpret_cast<Func*>(k);
  if (!lib) return CUDA_ERROR_INVALID_VALUE;
  if (!live(g().funcs, fn)) return CUDA_ERROR_INVALID_HANDLE;
  *lib = reinterpret_cast<CUlibrary>(fn->mod);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuKernelGetParamInfo(CUkernel k, size_t i, size_t* off, size_t* size) {
  SC_ENTRY(cuKernelGetParamInfo);
  return param_info(reinterpret_cast<Func*>(k), i, off, size);
}
SC_EXPORT CUresult cuKernelGetName(const char** name, CUkernel k) {
  SC_ENTRY(cuKernelGetName);
  return func_name(name, reinterpret_cast<CUfunction>(k));
}
SC_EXPORT CUresult cuKernelGetAttribute(int* pi, CUfunction_attribute a, CUkernel k, CUdevice d) {
  SC_ENTRY(cuKernelGetAttribute);
  return func_attr(pi, a, reinterpret_cast<Func*>(k));
}

// ---- launches ----
SC_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                  unsigned int bx, unsigned int by, unsigned int bz,
                                  unsigned int shmem, CUstream h, void** params, void** extra) {
  SC_ENTRY(cuLaunchKernel);
  return launch(reinterpret_cast<Func*>(f), gx, gy, gz, bx, by, bz, shmem, h, params, extra, false);
}
SC_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                       unsigned int gz, unsigned int bx, unsigned int by,
                                       unsigned int bz, unsigned int shmem, CUstream h,
                                       void** params, void** extra) {
  SC_ENTRY(cuLaunchKernel_ptsz);
  return launch(reinterpret_cast<Func*>(f), gx, gy, gz, bx, by, bz, shmem, h, params, extra, true);
}
SC_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gx, unsigned int gy,
                                             unsigned int gz, unsigned int bx, unsigned int by,
                                             unsigned int bz, unsigned int shmem, CUstream h,
                                             void** params) {
  SC_ENTRY(cuLaunchCooperativeKernel);
  return launch(reinterpret_cast<Func*>(f), gx, gy, gz, bx, by, bz, shmem, h, params, nullptr,
                false);
}
SC_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gx, unsigned int gy,
                                                  unsigned int gz, unsigned int bx, unsigned int by,
                                                  unsigned int bz, unsigned int shmem, CUstream h,
                                                  void** params) {
  SC_ENTRY(cuLaunchCooperativeKernel_ptsz);
  return launch(reinterpret_cast<Func*>(f), gx, gy, gz, bx, by, bz, shmem, h, params, nullptr,
                true);
}
static CUresult launch_ex(const CUlaunchConfig* c, CUfunction f, void** params, void** extra,
                          bool pt) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  return launch(reinterpret_cast<Func*>(f), c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX,
                c->blockDimY, c->blockDimZ, c->sharedMemBytes, c->hStream, params, extra, pt);
}
SC_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* c, CUfunction f, void** params,
                                    void** extra) {
  SC_ENTRY(cuLaunchKernelEx);
  return launch_ex(c, f, params, extra, false);
}
SC_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* c, CUfunction f, void** params,
                                         void** extra) {
  SC_ENTRY(cuLaunchKernelEx_ptsz);
  return launch_ex(c, f, params, extra, true);
}
