// clock.h: the library's clocks. Both are read without a syscall (vDSO, cycle counter).
#pragma once

#include <time.h>

#include <cstdint>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace gswap::interpose {

inline std::uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ull +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// A cheap, per-core-consistent clock for LRU marks: the invariant TSC on x86-64, the virtual
// counter on aarch64, else the monotonic clock. Only its order matters.
inline std::uint64_t lru_tick() {
#if defined(__x86_64__)
  return __rdtsc();
#elif defined(__aarch64__)
  std::uint64_t v;
  asm volatile("mrs %0, cntvct_el0" : "=r"(v));
  return v;
#else
  return monotonic_ns();
#endif
}

}  // namespace gswap::interpose
