// first_meminfo.cpp: prints what cuMemGetInfo says right after cuInit and the context, as a
// program that sizes its caches or batches from it does: under gswapd, the process's share.
//
//   first_meminfo
//
// Prints "total BYTES free BYTES" and the time cuInit took, in milliseconds.
#include <chrono>
#include <cstdio>

#include "preload_common.h"

int main() {
  const auto t0 = std::chrono::steady_clock::now();
  preload_init();
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::size_t free = 0, total = 0;
  PCHECK(cuMemGetInfo(&free, &total));
  std::printf("total %zu free %zu init_ms %.1f\n", total, free, ms);
  return 0;
}
