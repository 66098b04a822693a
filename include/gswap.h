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

#define GSWAP_API_VERSION 1

#define GSWAP_OK 0
#define GSWAP_ERROR_VERSION (-1)       /* the library does not serve this API version */
#define GSWAP_ERROR_INVALID (-2)       /* a bad argument (NULL, unknown allocation, ...) */
#define GSWAP_ERROR_NOT_READY (-3)     /* called before gswap manages any memory */
#define GSWAP_ERROR_UNSUPPORTED (-4)   /* not available in this library (see the log line) */

/* The API version of the loaded library. */
int gswap_api_version(void);

/* GSWAP_OK when the loaded library serves callers built against `caller_version`. */
int gswap_check_version(int caller_version);

/* Marks an iteration boundary: the next kernel launch starts a training iteration. Optional:
 * gswapd detects the repeating iteration by itself; marks make it exact. */
int gswap_mark_iteration(void);

/* Names the allocation that contains `ptr` (a device pointer). The name (at most 63 bytes are
 * kept) appears in gswapd's traces, plan dumps and timelines. */
int gswap_name_allocation(unsigned long long ptr, const char* name);

#ifdef __cplusplus
}
#endif

#endif /* GSWAP_H_ */
