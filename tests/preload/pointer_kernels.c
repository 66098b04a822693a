/* pointer_kernels.c: a simcuda kernel module for tests/preload/pointers.cpp, kernels that reach
 * their buffers in ways other than a plain pointer parameter.
 *
 *   add(uint32* buf, uint64 n, uint32 v)                buf[i] += v
 *   add_before(uint32* end, uint64 n, uint32 v)         end[-1 - i] += v for i < n: the kernel is
 *                                                       given only the end of its buffer
 *   add_indirect(uint32** ptrs, uint64 count, uint64 n)  ptrs[k][i] += 1: the buffers are named
 *                                                       only in a device array of pointers */
#include <stddef.h>
#include <stdint.h>

#include "simcuda.h"

struct add_args {
  uint32_t* buf;
  uint64_t n;
  uint32_t v;
};
static void add(const simcuda_launch* l) {
  const struct add_args* a = (const struct add_args*)l->params;
  for (uint64_t i = 0; i < a->n; ++i) a->buf[i] += a->v;
}
static const simcuda_param add_params[] = {
    {offsetof(struct add_args, buf), sizeof(void*)},
    {offsetof(struct add_args, n), sizeof(uint64_t)},
    {offsetof(struct add_args, v), sizeof(uint32_t)},
};

struct add_before_args {
  uint32_t* end;
  uint64_t n;
  uint32_t v;
};
static void add_before(const simcuda_launch* l) {
  const struct add_before_args* a = (const struct add_before_args*)l->params;
  for (uint64_t i = 0; i < a->n; ++i) a->end[-1 - (int64_t)i] += a->v;
}
static const simcuda_param add_before_params[] = {
    {offsetof(struct add_before_args, end), sizeof(void*)},
    {offsetof(struct add_before_args, n), sizeof(uint64_t)},
    {offsetof(struct add_before_args, v), sizeof(uint32_t)},
};

struct add_indirect_args {
  uint32_t** ptrs;
  uint64_t count;
  uint64_t n;
};
static void add_indirect(const simcuda_launch* l) {
  const struct add_indirect_args* a = (const struct add_indirect_args*)l->params;
  for (uint64_t k = 0; k < a->count; ++k)
    for (uint64_t i = 0; i < a->n; ++i) a->ptrs[k][i] += 1;
}
static const simcuda_param add_indirect_params[] = {
    {offsetof(struct add_indirect_args, ptrs), sizeof(void*)},
    {offsetof(struct add_indirect_args, count), sizeof(uint64_t)},
    {offsetof(struct add_indirect_args, n), sizeof(uint64_t)},
};

static const simcuda_kernel_desc kernels[] = {
    {"add", add, 3, add_params, 0, NULL},
    {"add_before", add_before, 3, add_before_params, 0, NULL},
    {"add_indirect", add_indirect, 3, add_indirect_params, 0, NULL},
};

SIMCUDA_EXPORT const simcuda_module_desc* SIMCUDA_MODULE_ENTRY(void) {
  static const simcuda_module_desc m = {SIMCUDA_ABI_VERSION, 3, kernels};
  return &m;
}
