// launch_path_guided_bench.cpp: what following a plan adds to a launch (gswap_launch_path_bench,
// beside launch_path_bench.cpp's fast path). Three loops over the same launches, side by side:
//
//  - BM_LaunchPassive: the fast path alone (scan 8 pointer parameters against 10,000 regions, pin,
//    mark use, unpin), as with no gswapd;
//  - BM_LaunchNumbered: plus the global call number access.h takes while gswapd records or a plan
//    is followed (the record sent to gswapd is not included: it is the same in both modes);
//  - BM_LaunchGuided: plus PlanExecutor::before()/after() (plan_executor.h) following a plan of a
//    1,000-launch iteration with 100 planned swaps (a swap-out, a prefetch and a back-access each),
//    so about 3 launches in 10 carry a planned action. Actions only count, as the real ones only
//    push a command into a lock-free queue.
//
// Guided minus Numbered is the cost of following the plan (target: at most 30 ns per launch).
// Launches on several threads share the one executor (a try-lock) and one call number, as the
// threads of one process do.
#include <benchmark/benchmark.h>

#include <atomic>
#include <random>
#include <vector>

#include "interpose/access.h"
#include "interpose/plan_executor.h"

namespace {
using namespace gswap::interpose;
namespace proto = gswap::proto;

constexpr std::uint64_t kBase = 0x7e0000000000ull;
constexpr unsigned kShift = 21;
constexpr int kRegions = 10000;
constexpr int kMaxThreads = 64;
constexpr std::uint64_t kIteration = 1000;
constexpr std::uint32_t kEntries = 100;

class CountingActions : public PlanActions {
 public:
  explicit CountingActions(std::vector<Region>& regions) : regions_(regions) {}
  Region* region_by_id(std::uint64_t id) override {
    return id && id <= regions_.size() ? &regions_[id - 1] : nullptr;
  }
  bool evict(Region*, std::uint64_t, std::uint64_t, bool) override {
    moves.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  bool prefetch(Region*, std::uint64_t, std::uint64_t, std::uint64_t) override {
    moves.fetch_add(1, std::memory_order_relaxed);
    return true;
  }
  void lateness(std::uint64_t, std::uint64_t, std::uint64_t, bool) override {}
  void divergence(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t) override {}
  std::atomic<std::uint64_t> moves{0};

 private:
  std::vector<Region>& regions_;
};

// The function launched at each position of the iteration: the first two (the signature) occur
// nowhere else.
std::uint64_t function_at(std::uint64_t offset) {
  return offset < 2 ? (0x10000 + (offset << 4)) | 1 : (0x100 + ((offset * 7) % 50 << 4)) | 1;
}

struct Fixture {
  RegionMap map;
  std::vector<Region> regions = std::vector<Region>(kRegions);
  StreamTable streams;
  std::uint64_t args[kMaxThreads][8];
  ParamLayout layout;
  std::uint32_t offsets[8], sizes[8];
  CountingActions actions{regions};
  PlanExecutor executor{actions};
  alignas(64) std::atomic<std::uint64_t> seq{
      0};  // the call number, on a line of its own as in access.h

  Fixture() {
    map.init(kBase, static_cast<std::uint64_t>(2 * kRegions) << kShift, kShift);
    for (int i = 0; i < kRegions; ++i) {
      regions[i].id = static_cast<std::uint64_t>(i) + 1;
      regions[i].state.store(kRegionResident);
      map.set(kBase + (static_cast<std::uint64_t>(2 * i) << kShift), 1ull << kShift, &regions[i]);
    }
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
    // The plan: entry e swaps region e + 1 out after position 10e + 3, brings it back from 10e + 6
    // on, and needs it at 10e + 9 (each at the function launched there).
    proto::PlanHeader h{};
    h.generation = 1;
    h.mode = static_cast<std::uint32_t>(proto::PlanMode::kGuided);
    h.num_entries = kEntries;
    h.iteration_length = kIteration;
    h.seq_length = kIteration;
    h.signature_length = 2;
    h.signature[0] = function_at(0);
    h.signature[1] = function_at(1);
    std::vector<proto::PlanEntry> e(kEntries);
    for (std::uint32_t i = 0; i < kEntries; ++i) {
      e[i].region_id = i + 1;
      e[i].bind_offset = proto::kNoOffset;
      e[i].action = static_cast<std::uint16_t>(proto::PlanAction::kSwap);
      e[i].evict_after = 10 * i + 3;
      e[i].evict_function = function_at(10 * i + 3);
      e[i].trigger = 10 * i + 6;
      e[i].trigger_function = function_at(10 * i + 6);
      e[i].back_access = 10 * i + 9;
    }
    executor.load(h, e.data(), kEntries);
  }
};

Fixture& fixture() {
  static Fixture fx;
  return fx;
}

enum class Mode { kPassive, kNumbered, kGuided };

template <Mode mode>
void launch_loop(benchmark::State& state) {
  Fixture& fx = fixture();
  void* params[8];
  for (int k = 0; k < 8; ++k) params[k] = &fx.args[state.thread_index() % kMaxThreads][k];
  std::uintptr_t stream = 0x1000 + 0x100 * static_cast<std::uintptr_t>(state.thread_index());
  for (auto _ : state) {
    TouchSet t;
    scan_kernel_params(fx.map, fx.layout, params, &t);
    Pinned p = pin_if_mapped(t);
    mark_use(t, lru_tick(), fx.streams.bit(stream, false));
    if constexpr (mode == Mode::kPassive) {
      benchmark::DoNotOptimize(p);
    } else {
      std::uint64_t seq = fx.seq.fetch_add(1, std::memory_order_relaxed);
      if constexpr (mode == Mode::kGuided) {
        PlanExecutor::Step step;
        fx.executor.before(seq, function_at(seq % kIteration), t, &step);
        benchmark::DoNotOptimize(p);  // the launch would be enqueued here
        fx.executor.after(step);
      } else {
        benchmark::DoNotOptimize(seq);
        benchmark::DoNotOptimize(p);
      }
    }
    unpin(t);
  }
  if (state.thread_index() == 0 && mode == Mode::kGuided) {
    const PlanCounters& c = fx.executor.counters();
    state.counters["guided_iterations"] = static_cast<double>(c.guided_iterations.load());
    state.counters["skipped"] = static_cast<double>(c.skipped.load());
    state.counters["divergences"] = static_cast<double>(c.divergences.load());
  }
}

void BM_LaunchPassive(benchmark::State& state) {
  launch_loop<Mode::kPassive>(state);
}
void BM_LaunchNumbered(benchmark::State& state) {
  launch_loop<Mode::kNumbered>(state);
}
void BM_LaunchGuided(benchmark::State& state) {
  launch_loop<Mode::kGuided>(state);
}
BENCHMARK(BM_LaunchPassive)->Threads(1)->Threads(4)->Threads(16);
BENCHMARK(BM_LaunchNumbered)->Threads(1)->Threads(4)->Threads(16);
BENCHMARK(BM_LaunchGuided)->Threads(1)->Threads(4)->Threads(16);

}  // namespace
