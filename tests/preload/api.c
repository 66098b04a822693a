/* api.c: the public C API (include/gswap.h) as a C program reaches it: through
 * dlsym(RTLD_DEFAULT, ...), with no link against libgswap.
 *
 *   api absent            run without gswap: every gswap_* lookup is NULL (the program skips them)
 *   api present MODULE.so run under gswap (GSWAP_BUDGET set by the test): the version check
 *                         accepts this header's version and refuses a newer one (one log line),
 *                         marks and names are GSWAP_ERROR_NOT_READY before cuInit and in a
 *                         forked child,
 *                         registrations are validated and end with unregister or free, names and
 *                         iteration marks are accepted (names that are not UTF-8 too, for
 *                         tests/e2e/timeline.sh), and three regions above the budget are still
 *                         swapped and right.
 */
#include <cuda.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "include/gswap.h"

#define CHECK(cond)                                                        \
  do {                                                                     \
    if (!(cond)) {                                                         \
      fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);  \
      exit(1);                                                             \
    }                                                                      \
  } while (0)
#define CU(call) CHECK((call) == CUDA_SUCCESS)

static int never_called(void* ctx, unsigned long long dst, unsigned long long bytes,
                        void* stream) {
  (void)ctx, (void)dst, (void)bytes, (void)stream;
  return 1;
}

int main(int argc, char** argv) {
  static const char* const names[] = {"gswap_api_version",        "gswap_check_version",
                                      "gswap_mark_iteration",     "gswap_name_allocation",
                                      "gswap_register_recompute", "gswap_unregister_recompute"};
  if (argc == 2 && argv[1][0] == 'a') {
    for (int i = 0; i < 6; ++i) CHECK(dlsym(RTLD_DEFAULT, names[i]) == NULL);
    printf("PASS absent\n");
    return 0;
  }
  CHECK(argc == 3);
  for (int i = 0; i < 6; ++i) CHECK(dlsym(RTLD_DEFAULT, names[i]) != NULL);
  int (*api_version)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, names[0]);
  int (*check_version)(int) = (int (*)(int))dlsym(RTLD_DEFAULT, names[1]);
  int (*mark_iteration)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, names[2]);
  int (*name_allocation)(unsigned long long, const char*) =
      (int (*)(unsigned long long, const char*))dlsym(RTLD_DEFAULT, names[3]);
  int (*reg)(unsigned long long, unsigned long long, const unsigned long long*, int, double,
             gswap_recompute_fn, void*) =
      (int (*)(unsigned long long, unsigned long long, const unsigned long long*, int, double,
               gswap_recompute_fn, void*))dlsym(RTLD_DEFAULT, names[4]);
  int (*unreg)(unsigned long long) = (int (*)(unsigned long long))dlsym(RTLD_DEFAULT, names[5]);

  CHECK(api_version() == GSWAP_API_VERSION);
  CHECK(check_version(GSWAP_API_VERSION) == GSWAP_OK);
  CHECK(check_version(1) == GSWAP_OK);
  CHECK(check_version(GSWAP_API_VERSION + 1) == GSWAP_ERROR_VERSION); /* the one log line */
  /* Before cuInit: not ready (a bad argument is still a bad argument). */
  CHECK(mark_iteration() == GSWAP_ERROR_NOT_READY);
  CHECK(name_allocation(0x7f0000000000ull, "early") == GSWAP_ERROR_NOT_READY);
  CHECK(name_allocation(0, "early") == GSWAP_ERROR_INVALID);
  CHECK(name_allocation(0x7f0000000000ull, NULL) == GSWAP_ERROR_INVALID);

  CU(cuInit(0));
  CUdevice dev;
  CUcontext ctx;
  CU(cuDeviceGet(&dev, 0));
  CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  CU(cuCtxSetCurrent(ctx));
  CUmodule mod;
  CUfunction add;
  CU(cuModuleLoad(&mod, argv[2]));
  CU(cuModuleGetFunction(&add, mod, "add"));

  const unsigned long long bytes = 4ull << 20, n = bytes / 4;
  CUdeviceptr r[3];
  for (int i = 0; i < 3; ++i) {
    CU(cuMemAlloc(&r[i], bytes));
    CU(cuMemsetD32(r[i], (unsigned)i, n));
  }
  unsigned long long src[2] = {r[0], r[1]};
  /* Validation. */
  CHECK(reg(r[2], bytes, src, 2, 0, NULL, NULL) == GSWAP_ERROR_INVALID);
  CHECK(reg(r[2], 0, src, 2, 0, never_called, NULL) == GSWAP_ERROR_INVALID);
  CHECK(reg(r[2], bytes + 1, src, 2, 0, never_called, NULL) == GSWAP_ERROR_INVALID);
  CHECK(reg(r[2], bytes, src, GSWAP_MAX_RECOMPUTE_SOURCES + 1, 0, never_called, NULL) ==
        GSWAP_ERROR_INVALID);
  CHECK(reg(r[2], bytes, src, 2, -1.0, never_called, NULL) == GSWAP_ERROR_INVALID);
  CHECK(reg(0, bytes, src, 2, 0, never_called, NULL) == GSWAP_ERROR_INVALID);
  CHECK(unreg(r[2]) == GSWAP_ERROR_INVALID);
  /* A registration, a cycle refused, unregister, and one ended by free. */
  CHECK(reg(r[2], bytes, src, 2, 12.5, never_called, NULL) == GSWAP_OK);
  unsigned long long from2[1] = {r[2]};
  CHECK(reg(r[0], bytes, from2, 1, 0, never_called, NULL) == GSWAP_ERROR_INVALID);
  CHECK(unreg(r[2]) == GSWAP_OK);
  CHECK(unreg(r[2]) == GSWAP_ERROR_INVALID);
  CHECK(reg(r[2], bytes / 2, src, 1, 0, never_called, NULL) == GSWAP_OK);
  CHECK(name_allocation(r[0], "weights") == GSWAP_OK);
  /* Names a timeline must still write as UTF-8 JSON (tests/e2e/timeline.sh): bytes that are not
   * UTF-8, quotes, a backslash, a newline; a character the 39 bytes a timeline keeps would cut. */
  CHECK(name_allocation(r[1], "bad \xff\xfe \"q\" \\ \n end") == GSWAP_OK);
  char cut[48];
  memset(cut, 'x', 38);
  strcpy(cut + 38, "\xc3\xa9\xc3\xa9"); /* U+00E9 twice: bytes 38-39, then 40-41 */
  CHECK(name_allocation(r[2], cut) == GSWAP_OK);
  /* A forked child has no CUDA until its own cuInit: not ready either. */
  fflush(stdout);
  fflush(stderr);
  pid_t child = fork();
  CHECK(child >= 0);
  if (child == 0) {
    int marked = mark_iteration(), named = name_allocation(r[0], "child");
    if (marked != GSWAP_ERROR_NOT_READY || named != GSWAP_ERROR_NOT_READY)
      fprintf(stderr, "forked child: mark_iteration %d, name_allocation %d (expected %d)\n", marked,
              named, GSWAP_ERROR_NOT_READY);
    _exit(marked == GSWAP_ERROR_NOT_READY && named == GSWAP_ERROR_NOT_READY ? 0 : 1);
  }
  int status = 0;
  CHECK(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CHECK(name_allocation(0x10, "nowhere") == GSWAP_ERROR_INVALID);
  CHECK(mark_iteration() == GSWAP_OK);
  /* Three regions over a budget of two: swapped, and right (never recomputed: no plan). */
  for (int round = 0; round < 3; ++round)
    for (int i = 0; i < 3; ++i) {
      unsigned v = 10;
      void* params[] = {&r[i], (void*)&n, &v};
      CU(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    }
  unsigned* host = (unsigned*)malloc(bytes);
  for (int i = 0; i < 3; ++i) {
    CU(cuMemcpyDtoH(host, r[i], bytes));
    for (unsigned long long k = 0; k < n; ++k) CHECK(host[k] == (unsigned)i + 30);
  }
  free(host);
  for (int i = 0; i < 3; ++i) CU(cuMemFree(r[i]));
  CHECK(unreg(r[2]) == GSWAP_ERROR_INVALID); /* freed: the registration went with it */
  printf("PASS present\n");
  return 0;
}
