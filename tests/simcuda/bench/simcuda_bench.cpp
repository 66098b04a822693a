// simcuda_bench.cpp: host-side cost of simcuda's enqueue paths (kernel launch, async copy, event
// record), so that launch-overhead figures measured through simcuda can be read against them.
// Prints figures only; nothing here is asserted.
#include <benchmark/benchmark.h>
#include <cuda.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct Env {
  CUcontext ctx = nullptr;
  CUmodule mod = nullptr;
  CUfunction busy = nullptr;
  CUstream s = nullptr;
  CUdeviceptr buf = 0;
  Env() {
    const char* dir = std::getenv("SIMCUDA_TEST_MODULE_DIR");
    std::string path = std::string(dir ? dir : SIMCUDA_BENCH_MODULE_DIR) + "/test_kernels.so";
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx) ||
        cuModuleLoad(&mod, path.c_str()) || cuModuleGetFunction(&busy, mod, "busy") ||
        cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&buf, 1 << 20)) {
      std::fprintf(stderr, "simcuda_bench: set-up failed (module %s)\n", path.c_str());
      std::exit(1);
    }
  }
};
Env& env() {
  static Env e;
  return e;
}

void BM_LaunchKernel(benchmark::State& st) {
  Env& e = env();
  uint64_t ns = 0;
  void* args[] = {&ns};
  size_t i = 0;
  for (auto _ : st) {
    benchmark::DoNotOptimize(cuLaunchKernel(e.busy, 1, 1, 1, 1, 1, 1, 0, e.s, args, nullptr));
    if (++i % 4096 == 0) {
      st.PauseTiming();
      cuStreamSynchronize(e.s);
      st.ResumeTiming();
    }
  }
  cuStreamSynchronize(e.s);
}
BENCHMARK(BM_LaunchKernel);

void BM_MemcpyHtoDAsync64B(benchmark::State& st) {
  Env& e = env();
  char host[64] = {};
  size_t i = 0;
  for (auto _ : st) {
    benchmark::DoNotOptimize(cuMemcpyHtoDAsync(e.buf + (i % 1024) * 64, host, 64, e.s));
    if (++i % 4096 == 0) {
      st.PauseTiming();
      cuStreamSynchronize(e.s);
      st.ResumeTiming();
    }
  }
  cuStreamSynchronize(e.s);
}
BENCHMARK(BM_MemcpyHtoDAsync64B);

void BM_EventRecord(benchmark::State& st) {
  Env& e = env();
  CUevent ev;
  cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING);
  size_t i = 0;
  for (auto _ : st) {
    benchmark::DoNotOptimize(cuEventRecord(ev, e.s));
    if (++i % 4096 == 0) {
      st.PauseTiming();
      cuStreamSynchronize(e.s);
      st.ResumeTiming();
    }
  }
  cuStreamSynchronize(e.s);
  cuEventDestroy(ev);
}
BENCHMARK(BM_EventRecord);

}  // namespace

BENCHMARK_MAIN();
