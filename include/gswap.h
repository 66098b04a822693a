/* gswap.h: the public C API of libgswap.so, for frameworks and programs that want to tell gswap
 * what only they know: where an iteration starts, what an allocation is called, and how to
 * recompute an allocation instead of swapping it.
 *
 * Nothing links against libgswap: a program finds these functions at run time with
 * dlsym(RTLD_DEFAULT, "gswap_..."), so the same program runs unchanged without gswap (the lookup
 * returns NULL and the program skips the calls). Every function is safe to call from any thread,
 * before or after cuInit, and returns GSWAP_OK or a negative GSWAP_ERROR_* code; none blocks on
 * the device.
 *
 * Versioning: GSWAP_API_VERSION grows when a function is added or a contract changes. Call
 * gswap_check_version(GSWAP_API_VERSION) first: it returns GSWAP_ERROR_VERSION (and logs one line)
 * when the loaded library cannot serve a caller built against that version; the other functions
 * then must not be used.
 */
#ifndef GSWAP_H_
#define GSWAP_H_

#ifdef __cplusplus
extern "C" {
#endif

#define GSWAP_API_VERSION 2

#define GSWAP_OK 0
#define GSWAP_ERROR_VERSION (-1)     /* the library does not serve this API version */
#define GSWAP_ERROR_INVALID (-2)     /* a bad argument (NULL, unknown allocation, ...) */
#define GSWAP_ERROR_NOT_READY (-3)   /* called before cuInit, or before gswap manages any memory */
#define GSWAP_ERROR_UNSUPPORTED (-4) /* not available in this library (see the log line) */
#define GSWAP_ERROR_DEVICE (-5)      /* a driver call failed or memory ran out (see the log) */
#define GSWAP_MAX_RECOMPUTE_SOURCES 8

/* The API version of the loaded library. */
int gswap_api_version(void);

/* GSWAP_OK when the loaded library serves callers built against `caller_version`. */
int gswap_check_version(int caller_version);

/* Marks an iteration boundary: the next kernel launch starts a training iteration. Optional:
 * gswapd detects the repeating iteration by itself; marks make it exact. GSWAP_ERROR_NOT_READY
 * (the mark is not taken) before the process's first successful cuInit, and in a forked child
 * until the child's own cuInit. */
int gswap_mark_iteration(void);

/* Names the allocation that contains `ptr` (a device pointer). The name (at most 63 bytes are
 * kept) appears in gswapd's traces, plan dumps and timelines. GSWAP_ERROR_INVALID for a NULL
 * `ptr` or `name`, or a pointer in no allocation gswap manages; GSWAP_ERROR_NOT_READY before cuInit
 * as for gswap_mark_iteration. */
int gswap_name_allocation(unsigned long long ptr, const char* name);

/* --- Recomputation (API version 2) -------------------------------------------------------------
 *
 * A framework may tell gswap how to compute an allocation's bytes again from other allocations
 * (its sources). gswapd's planner may then drop the allocation after a use instead of copying it
 * to the host, and gswap recomputes it just before the next use, on the stream of that use. Without
 * a registration nothing is ever dropped.
 *
 * The callback enqueues the recomputation of `bytes` bytes at device address `dst` on `stream` (a
 * CUstream; CU_STREAM_PER_THREAD when the use was on the per-thread default stream) and returns 0,
 * or a non-zero value when it could not. Contract:
 *   - it is called on the thread whose kernel launch (or copy) needs the bytes, before that call
 *     is enqueued, with every source resident and ordered before `stream`; the use then follows
 *     in stream order. A chain (a source that was itself dropped) is recomputed source first.
 *   - it may launch kernels and record events on `stream`, and read the sources and write `dst`
 *     only; it must not free, allocate or copy the sources or `dst` itself, nor synchronize the
 *     device, and it must compute bitwise what the allocation held (deterministic kernels).
 *   - it is not called while the caller holds gswap's locks other than its own serialisation of
 *     restores: recomputations in different threads run one at a time.
 *   - a failure is never silent: until a callback has succeeded once, gswap keeps a host copy of
 *     every region it drops with it and, when the callback fails, restores the bytes from that copy
 *     and stops recomputing that allocation (it is swapped from then on). A callback that fails
 *     after it has succeeded once, for a region dropped without a copy, stops the process with a
 *     message naming the allocation (GSWAP_RECOMPUTE_KEEP_COPY=1 keeps a copy always, so a failure
 *     is always recovered, at the price of the device-to-host copy).
 */
typedef int (*gswap_recompute_fn)(void* ctx, unsigned long long dst, unsigned long long bytes,
                                  void* stream);

/* Registers [ptr, ptr + bytes) (an allocation, or a byte range inside one) as recomputable from
 * `num_sources` device pointers (at most 8; each names the allocation containing it) by
 * fn(ctx, ptr, bytes, stream). cost_us: the recomputation's device time in microseconds, or 0 when
 * unknown (gswap then measures it). An allocation is dropped only when registered ranges cover all
 * of it. The sources must stay allocated while the registration lasts; freeing one first makes
 * gswap bring back (recompute) the dependent allocation if it was dropped, and ends the
 * registration. Refused (GSWAP_ERROR_INVALID) when a range overlaps another registration, lies
 * outside one allocation, names its own allocation, names a source that is no device memory, or
 * would close a cycle of sources or make a chain deeper than 16. */
int gswap_register_recompute(unsigned long long ptr, unsigned long long bytes,
                             const unsigned long long* sources, int num_sources, double cost_us,
                             gswap_recompute_fn fn, void* ctx);

/* Ends the registration of the range that starts at `ptr`. If its allocation was dropped, it is
 * recomputed first (the callback runs on this thread, on the legacy default stream). Freeing the
 * allocation ends its registrations too. Refused (GSWAP_ERROR_INVALID) from inside a
 * recomputation callback. */
int gswap_unregister_recompute(unsigned long long ptr);

#ifdef __cplusplus
}
#endif

#endif /* GSWAP_H_ */
