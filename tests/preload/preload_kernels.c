/* preload_kernels.c: a simcuda kernel module for the preload tests.
 *
 *   add(uint32* buf, uint64 n, uint32 v)               buf[i] += v
 *   add_from(uint32* dst, const uint32* src, uint64 n)  dst[i] += src[i]
 *   touch3(struct { uint32* p[3]; } bufs, uint64 n)      bufs.p[k][i] += 1 (pointers in a by-value
 * struct) noop8(void* p0 ... void* p7)                          nothing (the launch-overhead
 * benchmark)
 *   add_list(struct { uint64 count, n; uint32* p[256]; } list)  list.p[k][i] += 1 for k < count
 *                                                       (a multi-tensor optimizer's by-value list)
 *
 * The tests keep a host model of every buffer (all elements equal), so any lost or stale byte
 * after a swap shows up as a mismatch. */
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

struct add_from_args {
  uint32_t* dst;
  const uint32_t* src;
  uint64_t n;
};
static void add_from(const simcuda_launch* l) {
  const struct add_from_args* a = (const struct add_from_args*)l->params;
  for (uint64_t i = 0; i < a->n; ++i) a->dst[i] += a->src[i];
}
static const simcuda_param add_from_params[] = {
    {offsetof(struct add_from_args, dst), sizeof(void*)},
    {offsetof(struct add_from_args, src), sizeof(void*)},
    {offsetof(struct add_from_args, n), sizeof(uint64_t)},
};

struct three {
  uint32_t* p[3];
};
struct touch3_args {
  struct three bufs;
  uint64_t n;
};
static void touch3(const simcuda_launch* l) {
  const struct touch3_args* a = (const struct touch3_args*)l->params;
  for (int k = 0; k < 3; ++k)
    for (uint64_t i = 0; i < a->n; ++i) a->bufs.p[k][i] += 1;
}
static const simcuda_param touch3_params[] = {
    {offsetof(struct touch3_args, bufs), sizeof(struct three)},
    {offsetof(struct touch3_args, n), sizeof(uint64_t)},
};

static void noop8(const simcuda_launch* l) {
  (void)l;
}
static const simcuda_param noop8_params[] = {
    {0, 8}, {8, 8}, {16, 8}, {24, 8}, {32, 8}, {40, 8}, {48, 8}, {56, 8},
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

#define ADD_LIST_MAX 256
struct add_list_args {
  uint64_t count, n;
  uint32_t* p[ADD_LIST_MAX];
};
static void add_list(const simcuda_launch* l) {
  const struct add_list_args* a = (const struct add_list_args*)l->params;
  for (uint64_t k = 0; k < a->count && k < ADD_LIST_MAX; ++k)
    for (uint64_t i = 0; i < a->n; ++i) a->p[k][i] += 1;
}
static const simcuda_param add_list_params[] = {{0, sizeof(struct add_list_args)}};

static const simcuda_kernel_desc kernels[] = {
    {"add", add, 3, add_params, 0, NULL},
    {"add_from", add_from, 3, add_from_params, 0, NULL},
    {"touch3", touch3, 2, touch3_params, 0, NULL},
    {"noop8", noop8, 8, noop8_params, 0, NULL},
    {"add_indirect", add_indirect, 3, add_indirect_params, 0, NULL},
    {"add_list", add_list, 1, add_list_params, 0, NULL},
};

SIMCUDA_EXPORT const simcuda_module_desc* SIMCUDA_MODULE_ENTRY(void) {
  static const simcuda_module_desc m = {SIMCUDA_ABI_VERSION, 6, kernels};
  return &m;
}
