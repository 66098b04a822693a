// stress.cpp: many threads, each with its own stream, allocating, freeing, launching and checking
// buffers of random sizes under a tight budget, so evictions and restores of one thread's regions
// race with the launches of the others. Deterministic per-thread seeds; every buffer's contents are
// modelled on the host and verified at random points and at the end.
//
// Usage: stress MODULE.so [threads] [steps] [seed]
#include <pthread.h>

#include <cstdint>
#include <cstdio>
#include <random>
#include <thread>
#include <vector>

#include "preload_common.h"

namespace {

struct Buf {
  CUdeviceptr p = 0;
  unsigned long long n = 0;  // uint32 elements
  unsigned value = 0;        // every element equals this
  bool async = false;
};

CUcontext g_ctx;
CUfunction g_add, g_add_from;

void worker(int id, int steps, unsigned seed) {
  PCHECK(cuCtxSetCurrent(g_ctx));
  CUstream s;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::mt19937 rng(seed * 7919u + static_cast<unsigned>(id));
  std::vector<Buf> bufs;
  auto verify = [&](const Buf& b) {
    PCHECK(cuStreamSynchronize(s));
    unsigned got = 0;
    if (!all_equal(b.p, b.n, b.value, &got)) {
      std::fprintf(stderr, "thread %d: buffer 0x%llx: want %u got %u\n", id,
                   (unsigned long long)b.p, b.value, got);
      std::exit(1);
    }
  };
  for (int step = 0; step < steps; ++step) {
    unsigned op = rng() % 10;
    if (bufs.size() < 2 || (op == 0 && bufs.size() < 8)) {
      Buf b;
      b.n = ((1u + rng() % 6) << 20) / 4 + (rng() % 1024);  // 1-6 MiB, not granule multiples
      b.value = rng() % 1000;
      b.async = rng() % 2;
      if (b.async)
        PCHECK(cuMemAllocAsync(&b.p, b.n * 4, s));
      else
        PCHECK(cuMemAlloc(&b.p, b.n * 4));
      PCHECK(cuMemsetD32Async(b.p, b.value, b.n, s));
      bufs.push_back(b);
    } else if (op == 1 && bufs.size() > 2) {
      size_t k = rng() % bufs.size();
      if (rng() % 2) verify(bufs[k]);
      if (bufs[k].async)
        PCHECK(cuMemFreeAsync(bufs[k].p, s));
      else
        PCHECK(cuMemFree(bufs[k].p));
      bufs.erase(bufs.begin() + static_cast<long>(k));
    } else if (op <= 5) {
      Buf& b = bufs[rng() % bufs.size()];
      unsigned v = rng() % 100;
      PCHECK(launch_add(g_add, s, b.p, b.n, v));
      b.value += v;
    } else if (op <= 8) {
      Buf& d = bufs[rng() % bufs.size()];
      Buf& src = bufs[rng() % bufs.size()];
      if (&d == &src) continue;
      unsigned long long n = d.n < src.n ? d.n : src.n;
      // Only the common prefix changes; keep the model uniform by copying the whole tail too.
      PCHECK(launch_add_from(g_add_from, s, d.p, src.p, n));
      if (n < d.n) PCHECK(launch_add(g_add, s, d.p + n * 4, d.n - n, src.value));
      d.value += src.value;
    } else {
      verify(bufs[rng() % bufs.size()]);
    }
  }
  for (auto& b : bufs) verify(b);
  for (auto& b : bufs) PCHECK(cuMemFree(b.p));
  PCHECK(cuStreamDestroy(s));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: stress MODULE.so [threads] [steps] [seed]\n");
    return 2;
  }
  int threads = argc > 2 ? std::atoi(argv[2]) : 4;
  int steps = argc > 3 ? std::atoi(argv[3]) : 200;
  unsigned seed = argc > 4 ? static_cast<unsigned>(std::atoi(argv[4])) : 1;
  g_ctx = preload_init();
  CUmodule mod;
  PCHECK(cuModuleLoad(&mod, argv[1]));
  PCHECK(cuModuleGetFunction(&g_add, mod, "add"));
  PCHECK(cuModuleGetFunction(&g_add_from, mod, "add_from"));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t, steps, seed);
  for (auto& t : pool) t.join();
  std::printf("stress: %d threads x %d steps verified\n", threads, steps);
  return 0;
}
