/* example_module.c: the minimal simcuda kernel module from tests/simcuda/README.md.
 * It provides one kernel, axpy (y[i] += a * x[i]), written against simcuda.h alone. */
#include <stddef.h>
#include <stdint.h>

#include "simcuda.h"

struct axpy_args {
  uint64_t n;
  float a;
  const float* x;
  float* y;
};

static void axpy(const simcuda_launch* l) {
  const struct axpy_args* p = (const struct axpy_args*)l->params;
  for (uint64_t i = 0; i < p->n; ++i) p->y[i] += p->a * p->x[i];
}

static const simcuda_param axpy_params[] = {
    {offsetof(struct axpy_args, n), sizeof(uint64_t)},
    {offsetof(struct axpy_args, a), sizeof(float)},
    {offsetof(struct axpy_args, x), sizeof(void*)},
    {offsetof(struct axpy_args, y), sizeof(void*)},
};

static const simcuda_kernel_desc kernels[] = {
    {"axpy", axpy, 4, axpy_params, 0, NULL},
};

SIMCUDA_EXPORT const simcuda_module_desc* SIMCUDA_MODULE_ENTRY(void) {
  static const simcuda_module_desc m = {SIMCUDA_ABI_VERSION, 1, kernels};
  return &m;
}
