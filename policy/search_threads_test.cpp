// search_threads_test.cpp: walks side by side when threads cannot be started. The process may be
// out of threads (pthread_create fails, std::system_error) or out of memory (std::thread's state
// cannot be allocated, std::bad_alloc) after some walks have started: the search leaves the other
// walks out and returns its best plan, on the calling thread, with the walks that ran counted.
// This binary wraps pthread_create and operator new to make them fail on demand.
#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>
#include <cstdlib>
#include <new>
#include <vector>

#include <gtest/gtest.h>

#include "policy/corpus.h"
#include "policy/search.h"

namespace {

// Threads pthread_create still starts before it fails (-1: never fails).
int threads_left = -1;
// What a failure is: EAGAIN from pthread_create, or std::bad_alloc from the next operator new on
// the calling thread once the last thread allowed has started (std::thread allocates its state
// before it calls pthread_create).
bool fail_as_bad_alloc = false;
thread_local bool fail_next_new = false;

}  // namespace

extern "C" int pthread_create(pthread_t* t, const pthread_attr_t* attr, void* (*fn)(void*),
                              void* arg) {
  using Real = int (*)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "pthread_create"));
  if (threads_left == 0 && !fail_as_bad_alloc) return EAGAIN;
  const int rc = real(t, attr, fn, arg);
  if (threads_left > 0 && --threads_left == 0 && fail_as_bad_alloc) fail_next_new = true;
  return rc;
}

void* operator new(std::size_t n) {
  if (fail_next_new) {
    fail_next_new = false;
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}

namespace gswap::policy {
namespace {

SearchResult search_with_threads_failing(int started, bool bad_alloc) {
  const Trace t = make_unet(2);
  const Analysis a = analyze(t);
  SearchOptions o;
  o.threads = 4;
  o.max_evaluations = 2000;
  threads_left = started;
  fail_as_bad_alloc = bad_alloc;
  SearchResult r = search_plan(a, a.peak_bytes / 2, o);
  threads_left = -1;
  fail_next_new = false;
  return r;
}

TEST(SearchThreadsTest, AWalkWhoseThreadCannotStartIsLeftOut) {
  for (bool bad_alloc : {false, true}) {
    SCOPED_TRACE(bad_alloc ? "std::bad_alloc" : "EAGAIN");
    // (Out of memory is made to strike once a thread has started: before, other allocations
    // would take the failure.)
    const std::vector<int> starts = bad_alloc ? std::vector<int>{1, 2} : std::vector<int>{0, 1, 2};
    for (int started : starts) {
      SCOPED_TRACE(started);
      const SearchResult r = search_with_threads_failing(started, bad_alloc);
      EXPECT_EQ(r.walks, static_cast<std::size_t>(started) + 1);
      EXPECT_GT(r.sim.step_time_us, 0);
      EXPECT_LE(r.evaluations, 2000u);
    }
  }
  // Nothing failing: four walks and the whole cap.
  const SearchResult r = search_with_threads_failing(-1, false);
  EXPECT_EQ(r.walks, 4u);
  EXPECT_EQ(r.evaluations, 2000u);
}

}  // namespace
}  // namespace gswap::policy
