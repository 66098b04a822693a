/* reuse_kernels.c: two one-kernel simcuda modules for the handle-reuse test, one per build:
 *
 *   (default)   count(uint32 n)                     nothing: no pointer parameter
 *   REUSE_B     fill(uint32 v, uint32* buf, uint64 n)  buf[i] += v, the pointer after a 4-byte
 *                                                     word (where count's layout ends)
 *
 * Under SIMCUDA_REUSE_HANDLES=1, loading the second after unloading the first hands out the same
 * CUfunction. */
#include <stddef.h>
#include <stdint.h>

#include "simcuda.h"

#ifndef REUSE_B
struct count_args {
  uint32_t n;
};
static void count(const simcuda_launch* l) {
  (void)l;
}
static const simcuda_param params[] = {{offsetof(struct count_args, n), sizeof(uint32_t)}};
static const simcuda_kernel_desc kernels[] = {{"count", count, 1, params, 0, NULL}};
#else
struct fill_args {
  uint32_t v;
  uint32_t* buf;
  uint64_t n;
};
static void fill(const simcuda_launch* l) {
  const struct fill_args* a = (const struct fill_args*)l->params;
  for (uint64_t i = 0; i < a->n; ++i) a->buf[i] += a->v;
}
static const simcuda_param params[] = {
    {offsetof(struct fill_args, v), sizeof(uint32_t)},
    {offsetof(struct fill_args, buf), sizeof(void*)},
    {offsetof(struct fill_args, n), sizeof(uint64_t)},
};
static const simcuda_kernel_desc kernels[] = {{"fill", fill, 3, params, 0, NULL}};
#endif

SIMCUDA_EXPORT const simcuda_module_desc* SIMCUDA_MODULE_ENTRY(void) {
  static const simcuda_module_desc m = {SIMCUDA_ABI_VERSION, 1, kernels};
  return &m;
}
