// launch_path_bench.cpp: the in-library cost of one launch on the fast path, alone: scanning 8
// pointer parameters against a map of 10,000 live regions, the stream's slot, pinning, marking
// use and unpinning (the same functions access.h runs), without any driver. The end-to-end figure
// (real driver vs. libgswap, side by side) comes from tests/preload/launch_overhead.
//
// BM_LaunchFastPath runs on 1, 4 and 16 threads, each launching on its own stream with its own
// 8 regions (how training threads work: their own tensors), so the per-launch CPU time at 16
// threads against 1 thread shows what the launch path shares between threads.
// BM_LaunchFastPathShared has every thread launch on the same 8 regions (the worst case: the
// pins of those regions are shared cache lines).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "interpose/access.h"

namespace gswap::interpose {
// The benchmark never takes the slow or wait path; these satisfy the references of access.h.
FastState& fast() {
  static FastState f;
  return f;
}
CUresult prepare_slow(TouchSet&, CUstream, bool, bool) {
  return CUDA_ERROR_UNKNOWN;
}
CUresult wait_restoring(TouchSet&, CUstream, bool, bool) {
  return CUDA_ERROR_UNKNOWN;
}
}  // namespace gswap::interpose

namespace {
using namespace gswap::interpose;

constexpr std::uint64_t kBase = 0x7f0000000000ull;
constexpr unsigned kShift = 21;
constexpr int kRegions = 10000;
constexpr int kMaxThreads = 64;

struct Fixture {
  RegionMap map;
  std::vector<Region> regions = std::vector<Region>(kRegions);
  StreamTable streams;
  std::uint64_t args[kMaxThreads][8];
  ParamLayout layout;
  std::uint32_t offsets[8], sizes[8];
  Fixture() {
    map.init(kBase, static_cast<std::uint64_t>(2 * kRegions) << kShift, kShift);
    for (int i = 0; i < kRegions; ++i) {
      regions[i].state.store(kRegionResident);
      map.set(kBase + (static_cast<std::uint64_t>(2 * i) << kShift), 1ull << kShift, &regions[i]);
    }
    // Thread k launches on regions 8k .. 8k+7 in a random order, with interior pointers.
    std::mt19937_64 rng(1);
    for (int t = 0; t < kMaxThreads; ++t)
      for (int k = 0; k < 8; ++k)
        args[t][k] = kBase + (static_cast<std::uint64_t>(2 * (8 * t + (k * 5) % 8)) << kShift) +
                     rng() % 4096;
    for (int k = 0; k < 8; ++k) {
      offsets[k] = 8 * k;
      sizes[k] = 8;
    }
    layout = ParamLayout{8, offsets, sizes};
  }
};

Fixture& fixture() {
  static Fixture fx;
  return fx;
}

void launch_loop(benchmark::State& state, int arg_set) {
  Fixture& fx = fixture();
  void* params[8];
  for (int k = 0; k < 8; ++k) params[k] = &fx.args[arg_set][k];
  std::uintptr_t stream = 0x1000 + 0x100 * static_cast<std::uintptr_t>(state.thread_index());
  for (auto _ : state) {
    TouchSet t;
    scan_kernel_params(fx.map, fx.layout, params, &t);
    Pinned p = pin_if_mapped(t);
    mark_use(t, lru_tick(), fx.streams.bit(stream, false));
    unpin(t);
    fast().launches.add();
    benchmark::DoNotOptimize(p);
    benchmark::DoNotOptimize(t.n);
  }
  state.counters["regions_touched"] = 8;
}

void BM_LaunchFastPath(benchmark::State& state) {
  launch_loop(state, state.thread_index() % kMaxThreads);
}
BENCHMARK(BM_LaunchFastPath)->Threads(1)->Threads(4)->Threads(16);

void BM_LaunchFastPathShared(benchmark::State& state) {
  launch_loop(state, 0);
}
BENCHMARK(BM_LaunchFastPathShared)->Threads(1)->Threads(4)->Threads(16);

void BM_ScanOnly(benchmark::State& state) {
  Fixture& fx = fixture();
  void* params[8];
  for (int k = 0; k < 8; ++k) params[k] = &fx.args[0][k];
  for (auto _ : state) {
    TouchSet t;
    scan_kernel_params(fx.map, fx.layout, params, &t);
    benchmark::DoNotOptimize(t.n);
  }
}
BENCHMARK(BM_ScanOnly);

}  // namespace

BENCHMARK_MAIN();
