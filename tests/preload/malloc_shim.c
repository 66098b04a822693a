/* malloc_shim.c: a second LD_PRELOAD shim of the most common kind, for dlsym_caller.cpp. It wraps
 * malloc and free and finds the real ones with dlsym(RTLD_NEXT, ...), which must mean "after this
 * shim" wherever libgswap sits in LD_PRELOAD. If it meant "after libgswap", a shim loaded after
 * libgswap would get its own malloc back and recurse until the stack overflows.
 *
 * shim_malloc_calls() says how many mallocs it served. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

static void* (*real_malloc)(size_t);
static void (*real_free)(void*);
static unsigned long long calls;

/* dlsym may allocate while the real functions are being found: that comes from a small arena. */
static __thread int resolving;
static _Alignas(16) unsigned char arena[8192];
static size_t arena_used;

static void* arena_alloc(size_t n) {
  size_t at = __atomic_fetch_add(&arena_used, (n + 15) & ~(size_t)15, __ATOMIC_RELAXED);
  return at + n <= sizeof arena ? arena + at : NULL;
}

static int resolve(void) {
  if (__atomic_load_n(&real_free, __ATOMIC_ACQUIRE)) return 1;
  if (resolving) return 0;
  resolving = 1;
  void* m = dlsym(RTLD_NEXT, "malloc");
  void* f = dlsym(RTLD_NEXT, "free");
  if (m == (void*)&malloc || f == (void*)&free) {
    /* Calling it would recurse forever (or loop, once the call is made a jump). */
    static const char msg[] =
        "malloc_shim: dlsym(RTLD_NEXT) returned the shim's own function: the lookup was not made "
        "relative to its caller\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(3);
  }
  __atomic_store_n(&real_malloc, (void* (*)(size_t))m, __ATOMIC_RELEASE);
  __atomic_store_n(&real_free, (void (*)(void*))f, __ATOMIC_RELEASE);
  resolving = 0;
  return 1;
}

void* malloc(size_t n) {
  if (!resolve()) return arena_alloc(n);
  __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);
  return real_malloc(n);
}

void free(void* p) {
  if ((unsigned char*)p >= arena && (unsigned char*)p < arena + sizeof arena) return;
  if (p && resolve()) real_free(p);
}

unsigned long long shim_malloc_calls(void) {
  return __atomic_load_n(&calls, __ATOMIC_RELAXED);
}
