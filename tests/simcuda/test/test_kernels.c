/* test_kernels.c: kernels that simcuda's own tests launch to observe ordering, timing, parameter
 * buffers and faults. Written against simcuda.h only. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "simcuda.h"

/* append(log, counter, id): log[(*counter)++] = id. Streams run kernels one at a time, and the
 * tests that share a log across streams order them with events, so no atomics are needed. */
struct append_args {
  int32_t* log;
  int32_t* counter;
  int32_t id;
};
static void append(const simcuda_launch* l) {
  const struct append_args* p = (const struct append_args*)l->params;
  p->log[(*p->counter)++] = p->id;
}
static const simcuda_param append_params[] = {
    {offsetof(struct append_args, log), sizeof(void*)},
    {offsetof(struct append_args, counter), sizeof(void*)},
    {offsetof(struct append_args, id), sizeof(int32_t)},
};

/* sleep_append (in the table below): append with a declared 20 ms of simulated GPU time. */

/* record(out, a, b, c, d): copies the whole parameter buffer to out, to compare layouts. */
struct small {
  uint16_t s;
  uint8_t pad[5];
};
struct record_args {
  uint8_t* out;
  uint32_t a;
  double b;
  struct small c;
  uint8_t d;
};
static void record(const simcuda_launch* l) {
  const struct record_args* p = (const struct record_args*)l->params;
  memcpy(p->out, l->params, l->params_size);
  memcpy(p->out + 128, &l->grid, sizeof l->grid);
  memcpy(p->out + 140, &l->block, sizeof l->block);
}
static const simcuda_param record_params[] = {
    {offsetof(struct record_args, out), sizeof(void*)},
    {offsetof(struct record_args, a), sizeof(uint32_t)},
    {offsetof(struct record_args, b), sizeof(double)},
    {offsetof(struct record_args, c), sizeof(struct small)},
    {offsetof(struct record_args, d), sizeof(uint8_t)},
};

/* touch(p): writes one byte at p (used to fault on an unmapped VMM range). */
static void touch(const simcuda_launch* l) {
  uint8_t* p;
  memcpy(&p, l->params, sizeof p);
  *(volatile uint8_t*)p = 1;
}
static const simcuda_param touch_params[] = {{0, sizeof(void*)}};

/* busy(ns): occupies its stream for the number of nanoseconds in its parameter. */
static void busy(const simcuda_launch* l) {
  (void)l;
}
static uint64_t busy_duration(const simcuda_launch* l) {
  uint64_t ns;
  memcpy(&ns, l->params, sizeof ns);
  return ns;
}
static const simcuda_param busy_params[] = {{0, sizeof(uint64_t)}};

/* mark_busy(ns, flag): sets *flag to 1, then occupies its stream for ns nanoseconds, so a test can
 * see the kernel has started and that its stream is still busy afterwards. */
struct mark_busy_args {
  uint64_t ns;
  int32_t* flag;
};
static void mark_busy(const simcuda_launch* l) {
  const struct mark_busy_args* p = (const struct mark_busy_args*)l->params;
  __atomic_store_n(p->flag, 1, __ATOMIC_RELEASE);
}
static const simcuda_param mark_busy_params[] = {
    {offsetof(struct mark_busy_args, ns), sizeof(uint64_t)},
    {offsetof(struct mark_busy_args, flag), sizeof(void*)},
};

/* step(counter, expect, errors): *counter must equal expect (else ++*errors); then it becomes
 * expect + 1. A chain of steps on different streams checks that each ran after the one before. */
struct step_args {
  uint64_t* counter;
  uint64_t expect;
  uint64_t* errors;
};
static void step(const simcuda_launch* l) {
  const struct step_args* p = (const struct step_args*)l->params;
  if (__atomic_load_n(p->counter, __ATOMIC_ACQUIRE) != p->expect)
    __atomic_fetch_add(p->errors, 1, __ATOMIC_RELAXED);
  __atomic_store_n(p->counter, p->expect + 1, __ATOMIC_RELEASE);
}
static const simcuda_param step_params[] = {
    {offsetof(struct step_args, counter), sizeof(void*)},
    {offsetof(struct step_args, expect), sizeof(uint64_t)},
    {offsetof(struct step_args, errors), sizeof(void*)},
};

static const simcuda_kernel_desc kernels[] = {
    {"append", append, 3, append_params, 0, NULL},
    {"sleep_append", append, 3, append_params, 20000000, NULL},
    {"record", record, 5, record_params, 0, NULL},
    {"touch", touch, 1, touch_params, 0, NULL},
    {"busy", busy, 1, busy_params, 0, busy_duration},
    {"mark_busy", mark_busy, 2, mark_busy_params, 0, busy_duration},
    {"step", step, 3, step_params, 0, NULL},
};

SIMCUDA_EXPORT const simcuda_module_desc* SIMCUDA_MODULE_ENTRY(void) {
  static const simcuda_module_desc m = {SIMCUDA_ABI_VERSION, sizeof kernels / sizeof kernels[0],
                                        kernels};
  return &m;
}
