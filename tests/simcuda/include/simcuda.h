/* simcuda.h: the kernel-module ABI of simcuda, the simulated CUDA driver.
 *
 * A simcuda "module" is an ordinary host shared library. The simulated driver loads it for
 * cuModuleLoad(path) or cuModuleLoadData(image), asks it for its kernel table, and runs its kernels
 * on host memory when they are launched. Any C or C++ program can provide kernels with this header
 * alone; it depends on nothing but <stddef.h> and <stdint.h>.
 *
 * Writing a module
 * ----------------
 *   1. Write each kernel as a function `void k(const simcuda_launch* l)`. It receives the grid and
 *      block shape and the launch's parameter buffer, laid out exactly as the parameter table says.
 *      Device pointers are host addresses in simcuda, so the kernel dereferences them directly.
 *   2. Describe the kernels in a `simcuda_kernel_desc` array, each with its parameter table
 *      (offset and size of every parameter, in declaration order, as cuFuncGetParamInfo reports).
 *   3. Export one function, SIMCUDA_MODULE_ENTRY, returning a `simcuda_module_desc` with
 *      `abi_version = SIMCUDA_ABI_VERSION`.
 *   4. Build it as a shared library (`-shared -fPIC`) and load it with cuModuleLoad(path).
 *
 *   static const simcuda_param axpy_params[] = {
 *     {offsetof(struct axpy_args, n), sizeof(uint64_t)},
 *     {offsetof(struct axpy_args, a), sizeof(float)},
 *     {offsetof(struct axpy_args, x), sizeof(void*)},
 *     {offsetof(struct axpy_args, y), sizeof(void*)},
 *   };
 *   static const simcuda_kernel_desc kernels[] = {
 *     {"axpy", axpy, 4, axpy_params, 0, NULL},
 *   };
 *   SIMCUDA_EXPORT const simcuda_module_desc* SIMCUDA_MODULE_ENTRY(void) {
 *     static const simcuda_module_desc m = {SIMCUDA_ABI_VERSION, 1, kernels};
 *     return &m;
 *   }
 *
 * Parameter layout
 * ----------------
 * The parameter buffer is the packed form the real driver builds: each parameter is copied to its
 * `offset`, which the module author chooses with the usual C alignment rules (a struct of the
 * parameters, in order, gives the right offsets). With `kernelParams` the driver copies
 * `params[i].size` bytes from `kernelParams[i]`; with `extra` (CU_LAUNCH_PARAM_BUFFER_POINTER /
 * CU_LAUNCH_PARAM_BUFFER_SIZE) it copies the caller's buffer as is. The copy is taken at launch
 * time, so the caller may reuse its argument storage as soon as cuLaunchKernel returns.
 *
 * Execution
 * ---------
 * A kernel runs once per launch (not once per thread) on the worker thread of its stream, in
 * stream order, after every earlier operation on that stream and every event it waits on. It may
 * loop over `grid` and `block` itself if it wants the CUDA shape. Touching memory that is not
 * mapped (for example an evicted VMM range) crashes the process, as a GPU fault kills the context.
 *
 * Simulated duration
 * ------------------
 * A kernel may declare how long it "runs" on the GPU, so that overlap with copies can be measured
 * in wall time: the stream worker keeps the stream busy until at least that many nanoseconds have
 * passed since the kernel started. `duration_ns` (a fixed figure) is used when `duration_fn` is
 * NULL; `duration_fn`, when set, is called with the launch and returns the figure. Zero means "as
 * long as the host function takes".
 *
 * Test controls
 * -------------
 * libcuda.so.1 also exports two plain C functions for test programs (not for modules): see
 * simcudaInjectFailure and simcudaGetCounter at the end of this file. A program that must also
 * run on a real driver finds them with dlsym(RTLD_DEFAULT, "simcudaInjectFailure").
 *
 * Compatibility
 * -------------
 * SIMCUDA_ABI_VERSION changes whenever a struct in this file changes layout or meaning. simcuda
 * refuses a module whose abi_version differs, with CUDA_ERROR_INVALID_IMAGE.
 */
#ifndef SIMCUDA_H_
#define SIMCUDA_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SIMCUDA_ABI_VERSION 1u

/* Name of the one function a module exports. */
#define SIMCUDA_MODULE_ENTRY simcuda_module_v1
#define SIMCUDA_MODULE_ENTRY_NAME "simcuda_module_v1"

#if defined(__GNUC__)
#define SIMCUDA_EXPORT __attribute__((visibility("default")))
#else
#define SIMCUDA_EXPORT
#endif

typedef struct simcuda_dim3 {
  uint32_t x, y, z;
} simcuda_dim3;

/* What a kernel receives. Valid only for the duration of the call. */
typedef struct simcuda_launch {
  simcuda_dim3 grid;
  simcuda_dim3 block;
  uint32_t shared_mem_bytes;
  uint32_t reserved0;
  const void* params; /* the packed parameter buffer (see "Parameter layout") */
  size_t params_size; /* its size in bytes */
  uint64_t stream_id; /* simcuda's id of the stream running the kernel, for diagnostics */
} simcuda_launch;

typedef void (*simcuda_kernel_fn)(const simcuda_launch* launch);
typedef uint64_t (*simcuda_duration_fn)(const simcuda_launch* launch);

/* One kernel parameter, as cuFuncGetParamInfo reports it. */
typedef struct simcuda_param {
  size_t offset;
  size_t size;
} simcuda_param;

typedef struct simcuda_kernel_desc {
  const char* name;                /* what cuModuleGetFunction looks up */
  simcuda_kernel_fn fn;            /* the host implementation */
  uint32_t num_params;             /* entries in params */
  const simcuda_param* params;     /* in declaration order, offsets ascending */
  uint64_t duration_ns;            /* simulated GPU time, 0 for none (see "Simulated duration") */
  simcuda_duration_fn duration_fn; /* optional; overrides duration_ns when not NULL */
} simcuda_kernel_desc;

typedef struct simcuda_module_desc {
  uint32_t abi_version; /* SIMCUDA_ABI_VERSION */
  uint32_t num_kernels;
  const simcuda_kernel_desc* kernels;
} simcuda_module_desc;

typedef const simcuda_module_desc* (*simcuda_module_entry_fn)(void);

/* What cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col write into the 128-byte CUtensorMap, so a
 * host kernel that receives a CUtensorMap parameter can find the tensor it describes. Added after
 * version 1 without changing any existing layout. */
#define SIMCUDA_TENSOR_MAP_MAGIC 0x544d4150u /* "TMAP" */
typedef struct simcuda_tensor_map {
  uint32_t magic;             /* SIMCUDA_TENSOR_MAP_MAGIC */
  uint32_t data_type;         /* CUtensorMapDataType */
  uint32_t rank;              /* 1..5 */
  uint32_t im2col;            /* 1 when made by cuTensorMapEncodeIm2col */
  uint64_t global_address;    /* the tensor's device address */
  uint64_t global_dim[5];     /* elements per dimension, innermost first */
  uint64_t global_strides[4]; /* bytes between consecutive indices of dimensions 1..rank-1 */
  uint32_t box_dim[5];        /* tiled: box size per dimension; im2col: channels, pixels */
} simcuda_tensor_map;

/* cuModuleLoadData accepts either the bytes of a module's shared library (an ELF image for the
 * host machine), or this prefix followed by a NUL-terminated path to one. */
#define SIMCUDA_IMAGE_PATH_PREFIX "simcuda-module:"

/* cuDeviceGetName of a simulated device starts with this, so a program can tell the simulated
 * driver from a real one and pick its host module or its CUDA module. */
#define SIMCUDA_DEVICE_NAME_PREFIX "simcuda"

/* ---- Test controls (exported by simcuda's libcuda.so.1, not by modules) ----
 *
 * simcudaInjectFailure arms driver failures, replacing the current list (including one armed by
 * SIMCUDA_FAIL). spec is a comma-separated list of items:
 *   SYMBOL:N       the Nth call of ABI symbol SYMBOL fails (counted from this call, 1-based,
 *                  process-wide, however the symbol was reached: by name, dlsym or
 * cuGetProcAddress) SYMBOL:N+      the Nth and every later call fails each optionally followed by
 * =CODE, the CUresult to return (a number or a CUDA_ERROR_* name; default 999, CUDA_ERROR_UNKNOWN).
 * Example: "cuMemUnmap:2,cuMemcpyHtoDAsync_v2:1+=2". A failed call returns its code before doing
 * anything: nothing is enqueued, mapped, unmapped or charged, and no output argument is written.
 * NULL or "" disarms everything. Returns 0, or -1 (and changes nothing) when spec is malformed. */
int simcudaInjectFailure(const char* spec);

/* simcudaGetCounter reads one of simcuda's counters by name: "calls:<ABI symbol>" for every entry
 * point, or a named counter listed in simcuda's README (ctx_synchronize, device_wide_syncs,
 * stream_synchronize, event_synchronize, capture_invalidations, h2d_copies, h2d_bytes, d2h_copies,
 * d2h_bytes, failures_injected, ...). Returns 0, or -1 for an unknown name. */
int simcudaGetCounter(const char* name, unsigned long long* value);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SIMCUDA_H_ */
