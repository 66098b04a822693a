/* recompute_chain_kernels.c: the simcuda kernels of recompute_chain.cpp, each 0.2 ms of simulated
 * GPU time (a drop's copy-out is then still in flight when the backward pass reaches it). */
#include <stddef.h>
#include <stdint.h>

#include "simcuda.h"

static uint32_t mix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

/* y[i] = mix(i ^ seed): the input batch. */
struct input_args {
  uint32_t* y;
  uint64_t n;
  uint32_t seed;
};
static void input(const simcuda_launch* l) {
  const struct input_args* a = (const struct input_args*)l->params;
  for (uint64_t i = 0; i < a->n; ++i) a->y[i] = mix((uint32_t)i ^ (a->seed * 2654435761u));
}
static const simcuda_param input_params[] = {
    {offsetof(struct input_args, y), sizeof(void*)},
    {offsetof(struct input_args, n), sizeof(uint64_t)},
    {offsetof(struct input_args, seed), sizeof(uint32_t)},
};

/* y[i] = mix(x[i] ^ k): a layer. */
struct layer_args {
  const uint32_t* x;
  uint32_t* y;
  uint64_t n;
  uint32_t k;
};
static void layer(const simcuda_launch* l) {
  const struct layer_args* a = (const struct layer_args*)l->params;
  for (uint64_t i = 0; i < a->n; ++i) a->y[i] = mix(a->x[i] ^ a->k);
}
static const simcuda_param layer_params[] = {
    {offsetof(struct layer_args, x), sizeof(void*)},
    {offsetof(struct layer_args, y), sizeof(void*)},
    {offsetof(struct layer_args, n), sizeof(uint64_t)},
    {offsetof(struct layer_args, k), sizeof(uint32_t)},
};

/* g[i] = g[i] * 31 + a[i] (the backward pass reading a saved activation). */
struct accumulate_args {
  uint32_t* g;
  const uint32_t* a;
  uint64_t n;
};
static void accumulate(const simcuda_launch* l) {
  const struct accumulate_args* p = (const struct accumulate_args*)l->params;
  for (uint64_t i = 0; i < p->n; ++i) p->g[i] = p->g[i] * 31u + p->a[i];
}
static const simcuda_param accumulate_params[] = {
    {offsetof(struct accumulate_args, g), sizeof(void*)},
    {offsetof(struct accumulate_args, a), sizeof(void*)},
    {offsetof(struct accumulate_args, n), sizeof(uint64_t)},
};

/* *out = a hash of g's n words (the loss: one small allocation read back). */
struct reduce_args {
  const uint32_t* g;
  uint64_t* out;
  uint64_t n;
};
static void reduce(const simcuda_launch* l) {
  const struct reduce_args* p = (const struct reduce_args*)l->params;
  uint64_t h = 1469598103934665603ull;
  for (uint64_t i = 0; i < p->n; ++i) h = (h ^ p->g[i]) * 1099511628211ull;
  *p->out = h;
}
static const simcuda_param reduce_params[] = {
    {offsetof(struct reduce_args, g), sizeof(void*)},
    {offsetof(struct reduce_args, out), sizeof(void*)},
    {offsetof(struct reduce_args, n), sizeof(uint64_t)},
};

static const simcuda_kernel_desc kKernels[] = {
    {"input", input, 3, input_params, 200000, NULL},
    {"layer", layer, 4, layer_params, 200000, NULL},
    {"accumulate", accumulate, 3, accumulate_params, 200000, NULL},
    {"reduce", reduce, 3, reduce_params, 100000, NULL},
};

SIMCUDA_EXPORT const simcuda_module_desc* SIMCUDA_MODULE_ENTRY(void) {
  static const simcuda_module_desc m = {SIMCUDA_ABI_VERSION, 4, kKernels};
  return &m;
}
