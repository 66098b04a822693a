// launch_path_bench.cpp: the in-library cost of one launch on the fast path, alone: scanning 8
// pointer parameters against a map of 10,000 live regions, the stream's slot, pinning, marking
// use and unpinning (the same functions access.h runs), without any driver. The end-to-end figure
// (real driver vs. libgswap, side by side) comes from tests/preload/launch_overhead.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "interpose/access.h"

namespace gswap::interpose {
// The benchmark never takes the slow path; these satisfy the references of access.h.
FastState& fast() {
  static FastState f;
  return f;
}
CUresult prepare_slow(TouchSet&, CUstream, bool, bool) {
  return CUDA_ERROR_UNKNOWN;
}
}  // namespace gswap::interpose

namespace {
using namespace gswap::interpose;

constexpr std::uint64_t kBase = 0x7f0000000000ull;
constexpr unsigned kShift = 21;
constexpr int kRegions = 10000;

struct Fixture {
  RegionMap map;
  std::vector<Region> regions = std::vector<Region>(kRegions);
  StreamTable streams;
  std::uint64_t args[8];
  ParamLayout layout;
  std::uint32_t offsets[8], sizes[8];
  Fixture() {
    map.init(kBase, static_cast<std::uint64_t>(2 * kRegions) << kShift, kShift);
    for (int i = 0; i < kRegions; ++i) {
      regions[i].state.store(kRegionResident);
      map.set(kBase + (static_cast<std::uint64_t>(2 * i) << kShift), 1ull << kShift, &regions[i]);
    }
    std::mt19937_64 rng(1);
    for (int k = 0; k < 8; ++k) {
      args[k] =
          kBase + (static_cast<std::uint64_t>(2 * (rng() % kRegions)) << kShift) + rng() % 4096;
      offsets[k] = 8 * k;
      sizes[k] = 8;
    }
    layout = ParamLayout{8, offsets, sizes};
  }
};

void BM_LaunchFastPath(benchmark::State& state) {
  static Fixture fx;
  void* params[8];
  for (int k = 0; k < 8; ++k) params[k] = &fx.args[k];
  std::uint64_t seq = 0;
  for (auto _ : state) {
    TouchSet t;
    scan_kernel_params(fx.map, fx.layout, params, &t);
    bool ok = pin_if_resident(t);
    mark_use(t, ++seq, fx.streams.bit(0x1234, false));
    unpin(t);
    benchmark::DoNotOptimize(ok);
    benchmark::DoNotOptimize(t.n);
  }
  state.counters["regions_touched"] = 8;
}
BENCHMARK(BM_LaunchFastPath);

void BM_ScanOnly(benchmark::State& state) {
  static Fixture fx;
  void* params[8];
  for (int k = 0; k < 8; ++k) params[k] = &fx.args[k];
  for (auto _ : state) {
    TouchSet t;
    scan_kernel_params(fx.map, fx.layout, params, &t);
    benchmark::DoNotOptimize(t.n);
  }
}
BENCHMARK(BM_ScanOnly);

}  // namespace

BENCHMARK_MAIN();
