/* many_kernels.c: a simcuda kernel module with 20,000 kernels, k0 ... k19999, for the layout
 * cache test (many_kernels.cpp). Each is a distinct CUfunction with the same code and layout:
 *
 *   k<i>(uint32* buf, uint64 n, uint32 v)   buf[j] += v for j < n
 *
 * The kernel table is built at the first load, so the module stays small. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "simcuda.h"

#define MANY_KERNELS 20000

struct add_args {
  uint32_t* buf;
  uint64_t n;
  uint32_t v;
};
static void add(const simcuda_launch* l) {
  const struct add_args* a = (const struct add_args*)l->params;
  for (uint64_t j = 0; j < a->n; ++j) a->buf[j] += a->v;
}
static const simcuda_param add_params[] = {
    {offsetof(struct add_args, buf), sizeof(void*)},
    {offsetof(struct add_args, n), sizeof(uint64_t)},
    {offsetof(struct add_args, v), sizeof(uint32_t)},
};

static char names[MANY_KERNELS][8];
static simcuda_kernel_desc kernels[MANY_KERNELS];

SIMCUDA_EXPORT const simcuda_module_desc* SIMCUDA_MODULE_ENTRY(void) {
  static const simcuda_module_desc m = {SIMCUDA_ABI_VERSION, MANY_KERNELS, kernels};
  /* simcuda loads modules one at a time; a second load finds the table built. */
  if (kernels[0].name == NULL) {
    for (unsigned i = 0; i < MANY_KERNELS; ++i) {
      snprintf(names[i], sizeof names[i], "k%u", i);
      simcuda_kernel_desc d = {names[i], add, 3, add_params, 0, NULL};
      kernels[i] = d;
    }
  }
  return &m;
}
