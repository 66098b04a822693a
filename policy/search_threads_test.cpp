// search_threads_test.cpp: the search's threads (the sweeps' helpers, then the walks side by side)
// when they cannot be started. The process may be out of threads (pthread_create fails,
// std::system_error) or out of memory (std::thread's state cannot be allocated, std::bad_alloc)
// after some have started: the search leaves the others out and returns its best plan, on the
// calling thread, with the walks that ran counted.
// This binary wraps pthread_create and operator new to make them fail on demand.
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
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

TEST(SearchThreadsTest, AThreadThatCannotStartIsLeftOut) {
  // The search starts the sweeps' helper threads first (no more than the machine runs at once,
  // one less than the walks), ends them, then starts the walks' threads.
  const int helpers = static_cast<int>(usable_search_threads(4)) - 1;
  auto walks_for = [&](int started) {
    return static_cast<std::size_t>(std::max(0, started - helpers)) + 1;
  };
  for (bool bad_alloc : {false, true}) {
    SCOPED_TRACE(bad_alloc ? "std::bad_alloc" : "EAGAIN");
    // Out of threads for good once `started` threads have started: a helper or a walk left out,
    // and every thread after it. Out of memory strikes once, at the next thread (before, other
    // allocations would take the failure): a helper left out, then every walk starting, or a walk
    // left out.
    std::vector<std::pair<int, std::size_t>> cases;  // threads started, walks expected
    for (int started = 0; started <= helpers + 2; ++started)
      if (!bad_alloc)
        cases.emplace_back(started, walks_for(started));
      else if (started > 0 && started < helpers)
        cases.emplace_back(started, 4);
      else if (started > helpers)
        cases.emplace_back(started, walks_for(started));
    for (auto [started, walks] : cases) {
      SCOPED_TRACE(started);
      const SearchResult r = search_with_threads_failing(started, bad_alloc);
      EXPECT_EQ(r.walks, walks);
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
