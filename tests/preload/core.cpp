// core.cpp: the preload library's core under stress, one scenario per mode (simcuda only: it uses
// simcuda's failure injection and counters, simcuda.h).
//
//   core MODULE.so capture MiB      PyTorch-style CUDA graphs with the cudaMallocAsync backend: a
//                                   weight swapped out before the capture, a temporary allocated
//                                   and freed inside it (graph memory), swaps in flight when it
//                                   starts; the capture is not invalidated, replays compute right
//                                   while other regions keep swapping
//   core MODULE.so capture_at_budget MiB
//                                   a launch on a swapped-out region is captured while resident
//                                   memory is at the budget: it is restored (above the budget for
//                                   the capture), not refused; it stays while the graph or its
//                                   instance lives, and may leave once both are destroyed
//   core MODULE.so streams MiB      100 streams and the per-thread default streams of 4 threads,
//                                   each with its own region, under a tight budget: right results
//                                   and no device-wide synchronisation
//   core MODULE.so faults MiB       a failed swap-out copy, unmap, restore copy, map and
//   cuMemCreate
//                                   (injected): each is rolled back or reported, nothing is lost
//   core MODULE.so upload_oom MiB   an upload naming three regions that cannot all stay fails with
//                                   out-of-memory; later launches on each region still work
//   core MODULE.so no_context MiB   allocation and memory queries from a thread with no context
//                                   fail as on the driver
//   core MODULE.so other_device MiB cuMemGetInfo in device 1's context and cuDeviceTotalMem of
//                                   device 1 are the driver's answers, before device 0's first
//                                   region and after (simcuda with two devices)
//   core MODULE.so graph_memory MiB graph memory kept after its graph ran does not count against
//                                   the budget
//   core MODULE.so huge MiB         an allocation larger than the budget fails with one line;
//                                   later ones are still swapped
//   core MODULE.so stuck MiB        an allocation that needs a region evicted whose last use waits
//                                   for the host fails with out-of-memory after a bounded wait
//   core MODULE.so pinned MiB       regions swapped out and back, round after round, under a pinned
//                                   cap of a few regions: gswap never gives pinned memory back
//                                   while the program runs (cuMemFreeHost waits for the device)
//
// Budgets come from GSWAP_BUDGET (set by the test); sizes are in MiB per region.
#include <simcuda.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "preload_common.h"

namespace {

CUfunction g_add, g_add_from;

// Ends the capture on s, instantiates the graph and runs it once to completion.
void end_capture_and_run(CUstream s, CUgraph* graph, CUgraphExec* exec) {
  PCHECK(cuStreamEndCapture(s, graph));
  PCHECK(cuGraphInstantiate(exec, *graph, 0));
  PCHECK(cuGraphLaunch(*exec, s));
  PCHECK(cuStreamSynchronize(s));
}

unsigned long long counter(const char* name) {
  unsigned long long v = 0;
  PEXPECT(simcudaGetCounter(name, &v) == 0);
  return v;
}

int run_capture(unsigned long long bytes) {
  unsigned long long n = bytes / 4;
  CUstream s, side;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  PCHECK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
  // Four regions, a budget of three: w is the "weight" the graph uses, x the churn.
  CUdeviceptr w, x[3];
  PCHECK(cuMemAllocAsync(&w, bytes, s));
  PCHECK(cuMemsetD32Async(w, 1u, n, s));
  for (auto& p : x) {
    PCHECK(cuMemAllocAsync(&p, bytes, side));
    PCHECK(cuMemsetD32Async(p, 0u, n, side));
  }
  for (auto& p : x) PCHECK(launch_add(g_add, side, p, n, 1));  // w is the oldest: it leaves
  // Swaps in flight as the capture starts: x[0] comes back, pushing another region out.
  PCHECK(launch_add(g_add, side, x[0], n, 1));
  PCHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr tmp;
  PCHECK(cuMemAllocAsync(&tmp, bytes, s));  // graph memory
  PCHECK(cuMemsetD32Async(tmp, 5u, n, s));
  PCHECK(launch_add_from(g_add_from, s, w, tmp, n));  // w += 5, w swapped out when captured
  PCHECK(launch_add(g_add, s, w, n, 1));              // w += 1
  PCHECK(cuMemFreeAsync(tmp, s));
  CUgraph graph;
  CUresult e = cuStreamEndCapture(s, &graph);
  if (e != CUDA_SUCCESS) {
    std::fprintf(stderr, "capture: cuStreamEndCapture returned %d (invalidated)\n", (int)e);
    return 1;
  }
  CUgraphExec exec;
  PCHECK(cuGraphInstantiate(&exec, graph, 0));
  for (int round = 0; round < 3; ++round) {
    for (auto& p : x) PCHECK(launch_add(g_add, side, p, n, 1));  // other regions keep swapping
    PCHECK(cuGraphLaunch(exec, s));
  }
  PCHECK(cuStreamSynchronize(s));
  PCHECK(cuStreamSynchronize(side));
  unsigned got = 0;
  if (!all_equal(w, n, 1u + 3 * 6, &got)) {
    std::fprintf(stderr, "capture: w holds %u, want %u\n", got, 1u + 3 * 6);
    return 1;
  }
  PEXPECT(all_equal(x[0], n, 5u, nullptr));
  PEXPECT(all_equal(x[1], n, 4u, nullptr));
  PEXPECT(counter("capture_invalidations") == 0);
  PCHECK(cuGraphExecDestroy(exec));
  PCHECK(cuGraphDestroy(graph));
  std::printf("capture: graph captured with swaps in flight, replays right, no invalidation\n");
  return 0;
}

int run_capture_at_budget(unsigned long long bytes) {
  unsigned long long n = bytes / 4;
  CUstream s;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // Two regions fill the budget; a third pushes a out.
  CUdeviceptr a, b, c;
  PCHECK(cuMemAlloc(&a, bytes));
  PCHECK(cuMemsetD32(a, 7u, n));
  PCHECK(cuMemAlloc(&b, bytes));
  PCHECK(cuMemsetD32(b, 0u, n));
  PCHECK(cuMemAlloc(&c, bytes));
  PCHECK(cuMemsetD32(c, 0u, n));
  PCHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  PCHECK(launch_add(g_add, s, a, n, 1));
  CUgraph graph;
  CUgraphExec exec;
  end_capture_and_run(s, &graph, &exec);
  PEXPECT(all_equal(a, n, 8u, nullptr));
  // After the capture the budget holds again: b and c still swap around a.
  PCHECK(launch_add(g_add, nullptr, b, n, 1));
  PCHECK(launch_add(g_add, nullptr, c, n, 1));
  PCHECK(cuCtxSynchronize());
  PEXPECT(all_equal(b, n, 1u, nullptr));
  PEXPECT(all_equal(c, n, 1u, nullptr));
  PEXPECT(counter("capture_invalidations") == 0);
  // a stays while the graph or its instance lives: a launch needing b and c together (the whole
  // budget) cannot have it leave. Once both are destroyed it may.
  PEXPECT(launch_add_from(g_add_from, nullptr, b, c, n) == CUDA_ERROR_OUT_OF_MEMORY);
  PCHECK(cuGraphDestroy(graph));
  PEXPECT(launch_add_from(g_add_from, nullptr, b, c, n) == CUDA_ERROR_OUT_OF_MEMORY);
  PCHECK(cuGraphExecDestroy(exec));
  PCHECK(launch_add_from(g_add_from, nullptr, b, c, n));  // b += c
  PCHECK(cuCtxSynchronize());
  PEXPECT(all_equal(b, n, 2u, nullptr));
  PEXPECT(all_equal(a, n, 8u, nullptr));
  std::printf(
      "capture_at_budget: a swapped-out region captured at the budget came back, and "
      "left again once its graph was destroyed\n");
  return 0;
}

using LaunchFn = CUresult (*)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void**, void**);

int run_streams(unsigned long long bytes) {
  unsigned long long n = bytes / 4;
  constexpr int kThreads = 4, kStreamsPerThread = 25, kRounds = 4;
  // The per-thread default stream's launch, as the runtime gets it with --default-stream
  // per-thread.
  LaunchFn launch_ptsz = nullptr;
  PCHECK(cuGetProcAddress("cuLaunchKernel", reinterpret_cast<void**>(&launch_ptsz), 12000,
                          CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr));
  CUcontext ctx;
  PCHECK(cuCtxGetCurrent(&ctx));
  std::vector<CUstream> streams(kThreads * kStreamsPerThread);
  std::vector<CUdeviceptr> regions(streams.size() + kThreads);
  for (auto& s : streams) PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (auto& r : regions) {
    PCHECK(cuMemAlloc(&r, bytes));
    PCHECK(cuMemsetD32(r, 0u, n));
  }
  unsigned long long before = counter("device_wide_syncs");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS) ++failures;
      CUdeviceptr own = regions[streams.size() + t];
      for (int round = 0; round < kRounds; ++round) {
        for (int k = 0; k < kStreamsPerThread; ++k) {
          int i = t * kStreamsPerThread + k;
          if (launch_add(g_add, streams[i], regions[i], n, 1) != CUDA_SUCCESS) ++failures;
        }
        unsigned v = 1;
        void* params[] = {&own, &n, &v};
        // Stream 0 through the per-thread entry point: this thread's own default stream.
        if (launch_ptsz(g_add, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr) != CUDA_SUCCESS)
          ++failures;
      }
      for (int k = 0; k < kStreamsPerThread; ++k)
        if (cuStreamSynchronize(streams[t * kStreamsPerThread + k]) != CUDA_SUCCESS) ++failures;
      if (cuStreamSynchronize(CU_STREAM_PER_THREAD) != CUDA_SUCCESS) ++failures;
    });
  for (auto& th : threads) th.join();
  PEXPECT(failures.load() == 0);
  unsigned long long syncs = counter("device_wide_syncs") - before;
  if (syncs != 0) {
    std::fprintf(stderr, "streams: %llu device-wide synchronisations\n", syncs);
    return 1;
  }
  for (std::size_t i = 0; i < regions.size(); ++i) {
    unsigned got = 0;
    if (!all_equal(regions[i], n, kRounds, &got)) {
      std::fprintf(stderr, "streams: region %zu holds %u, want %d\n", i, got, kRounds);
      return 1;
    }
  }
  std::printf("streams: %zu streams and %d per-thread streams, no device-wide synchronisation\n",
              streams.size(), kThreads);
  return 0;
}

// Arms one failure and runs `body`; the failure must have been injected.
template <class Body>
void with_failure(const char* spec, Body&& body) {
  unsigned long long before = counter("failures_injected");
  PEXPECT(simcudaInjectFailure(spec) == 0);
  body();
  PEXPECT(simcudaInjectFailure(nullptr) == 0);
  if (counter("failures_injected") == before) {
    std::fprintf(stderr, "faults: %s was never reached\n", spec);
    std::exit(1);
  }
}

int run_faults(unsigned long long bytes) {
  unsigned long long n = bytes / 4;
  // Budget: three regions (two may end up kept resident by the failures). Five regions, each with
  // its own value.
  CUdeviceptr r[5];
  unsigned want[5];
  for (int k = 0; k < 5; ++k) {
    PCHECK(cuMemAlloc(&r[k], bytes));
    want[k] = 100u * (k + 1);
    PCHECK(cuMemsetD32(r[k], want[k], n));
  }
  auto touch = [&](int k) -> CUresult {
    CUresult e = launch_add(g_add, nullptr, r[k], n, 1);
    if (e == CUDA_SUCCESS) ++want[k];
    return e;
  };
  // A swap-out copy that cannot be enqueued: that region stays, another leaves; nothing lost.
  with_failure("cuMemcpyDtoHAsync_v2:1", [&] {
    for (int k = 0; k < 5; ++k) PCHECK(touch(k));
  });
  // An unmap that fails after a completed copy: the region stays mapped with its bytes.
  with_failure("cuMemUnmap:1", [&] {
    for (int k = 0; k < 5; ++k) PCHECK(touch(k));
    PCHECK(cuCtxSynchronize());
  });
  // A restore whose copy cannot be enqueued: the launch gets the driver's error, the region
  // stays on the host, and the next launch brings it back.
  with_failure("cuMemcpyHtoDAsync_v2:1+", [&] {
    int refused = 0;
    for (int k = 0; k < 5; ++k) {
      CUresult e = touch(k);
      if (e == CUDA_ERROR_UNKNOWN)
        ++refused;
      else if (e != CUDA_SUCCESS) {
        std::fprintf(stderr, "faults: restore failure came back as %d\n", (int)e);
        std::exit(1);
      }
    }
    PEXPECT(refused > 0);
  });
  // A map or a cuMemCreate that fails: reported, and the next try works.
  with_failure("cuMemMap:1", [&] {
    for (int k = 0; k < 5; ++k) {
      CUresult e = touch(k);
      PEXPECT(e == CUDA_SUCCESS || e == CUDA_ERROR_UNKNOWN);
    }
  });
  for (int k = 0; k < 5; ++k) PCHECK(touch(k));
  PCHECK(cuCtxSynchronize());
  for (int k = 0; k < 5; ++k) {
    PCHECK(touch(k));
    PCHECK(cuCtxSynchronize());
    unsigned got = 0;
    if (!all_equal(r[k], n, want[k], &got)) {
      std::fprintf(stderr, "faults: region %d holds %u, want %u\n", k, got, want[k]);
      return 1;
    }
  }
  std::printf("faults: every injected failure was rolled back or reported; no byte lost\n");
  return 0;
}

int run_upload_oom(unsigned long long bytes) {
  unsigned long long n = bytes / 4;
  CUdeviceptr r[3], array;
  for (auto& p : r) {
    PCHECK(cuMemAlloc(&p, bytes));
    PCHECK(cuMemsetD32(p, 3u, n));
  }
  PCHECK(cuMemAlloc(&array, sizeof r));  // small: the never-evicted arena
  CUresult e = cuMemcpyHtoD(array, r, sizeof r);
  if (e != CUDA_ERROR_OUT_OF_MEMORY) {
    std::fprintf(stderr, "upload_oom: the upload returned %d, want out of memory\n", (int)e);
    return 1;
  }
  for (int round = 0; round < 2; ++round)
    for (auto& p : r) PCHECK(launch_add(g_add, nullptr, p, n, 1));
  PCHECK(cuCtxSynchronize());
  for (auto& p : r) PEXPECT(all_equal(p, n, 5u, nullptr));
  std::printf("upload_oom: refused upload left later launches working\n");
  return 0;
}

int run_no_context(unsigned long long bytes) {
  CUdeviceptr p = 0;
  PCHECK(cuMemAlloc(&p, bytes));  // a region, on this thread
  CUresult alloc = CUDA_SUCCESS, info = CUDA_SUCCESS;
  std::thread([&] {
    CUdeviceptr q = 0;
    alloc = cuMemAlloc(&q, bytes);
    std::size_t f = 0, t = 0;
    info = cuMemGetInfo(&f, &t);
  }).join();
  if (alloc != CUDA_ERROR_INVALID_CONTEXT || info != CUDA_ERROR_INVALID_CONTEXT) {
    std::fprintf(stderr, "no_context: cuMemAlloc %d, cuMemGetInfo %d; want %d for both\n",
                 (int)alloc, (int)info, (int)CUDA_ERROR_INVALID_CONTEXT);
    return 1;
  }
  // Swap something so the summary shows the library at work.
  unsigned long long n = bytes / 4;
  CUdeviceptr r[3];
  for (auto& q : r) {
    PCHECK(cuMemAlloc(&q, bytes));
    PCHECK(cuMemsetD32(q, 1u, n));
  }
  std::printf("no_context: calls from a thread with no context fail as on the driver\n");
  return 0;
}

// Swaps regions of `bytes` (five, over budgets of four) so that the summary shows the library at
// work.
void swap_some(unsigned long long bytes, unsigned value) {
  unsigned long long n = bytes / 4;
  CUdeviceptr r[5];
  for (auto& q : r) {
    PCHECK(cuMemAlloc(&q, bytes));
    PCHECK(cuMemsetD32(q, value, n));
  }
}

// Another device's context (the test runs simcuda with two devices): cuMemGetInfo and
// cuDeviceTotalMem there are the driver's answers, the budget only device 0's.
// Makes device `ordinal`'s primary context current on this thread; returns the device.
CUdevice use_device(int ordinal) {
  CUdevice dev;
  CUcontext ctx;
  PCHECK(cuDeviceGet(&dev, ordinal));
  PCHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  PCHECK(cuCtxSetCurrent(ctx));
  return dev;
}

int run_other_device(unsigned long long bytes) {
  int failed = 0;
  // Before the first region, too, device 1 is the driver's to answer, as cuDeviceTotalMem says.
  std::thread([&] {
    const CUdevice dev = use_device(1);
    std::size_t f = 0, t = 0, total = 0;
    PCHECK(cuMemGetInfo(&f, &t));
    PCHECK(cuDeviceTotalMem(&total, 1));
    if (t != total) {
      std::fprintf(stderr,
                   "other_device: before any region, device 1 reports a total of %zu where "
                   "cuDeviceTotalMem says %zu\n",
                   t, total);
      failed = 1;
    }
    PCHECK(cuDevicePrimaryCtxRelease(dev));
  }).join();
  CUdeviceptr p = 0;
  PCHECK(cuMemAlloc(&p, bytes));  // device 0's regions exist
  std::size_t total0 = 0, total1 = 0, budget_total = 0, budget_free = 0;
  PCHECK(cuDeviceTotalMem(&total0, 0));
  PCHECK(cuDeviceTotalMem(&total1, 1));
  PCHECK(cuMemGetInfo(&budget_free, &budget_total));
  std::thread([&] {
    const CUdevice dev = use_device(1);
    std::size_t f0 = 0, t0 = 0, f1 = 0, t1 = 0;
    PCHECK(cuMemGetInfo(&f0, &t0));
    CUdeviceptr q = 0;
    PCHECK(cuMemAlloc(&q, 2 * bytes));
    PCHECK(cuMemGetInfo(&f1, &t1));
    if (t0 != total1 || t1 != total1 || f1 + 2 * bytes > f0) {
      std::fprintf(stderr,
                   "other_device: device 1 reports free %zu then %zu of %zu (device total %zu) "
                   "around a %llu-byte allocation\n",
                   f0, f1, t0, total1, 2 * bytes);
      failed = 1;
    }
    PCHECK(cuMemFree(q));
    PCHECK(cuDevicePrimaryCtxRelease(dev));
  }).join();
  if (total0 != budget_total || total1 <= budget_total) {
    std::fprintf(stderr, "other_device: cuDeviceTotalMem %zu and %zu, budget total %zu\n", total0,
                 total1, budget_total);
    failed = 1;
  }
  if (failed) return 1;
  swap_some(bytes, 3u);
  std::printf("other_device: device 1 is answered by the driver, device 0 by the budget\n");
  return 0;
}

// Graph memory that outlives its capture (allocated in the graph, freed after it ran) is the
// driver's: it does not count against the budget, so a later allocation still finds it all.
int run_graph_memory(unsigned long long bytes) {
  CUdeviceptr warm = 0;
  PCHECK(cuMemAlloc(&warm, bytes));
  PCHECK(cuMemFree(warm));
  std::size_t free_before = 0, free_after = 0, total = 0;
  PCHECK(cuMemGetInfo(&free_before, &total));
  CUstream s;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  PCHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUdeviceptr g = 0;
  PCHECK(cuMemAllocAsync(&g, bytes, s));
  CUgraph graph;
  CUgraphExec exec;
  end_capture_and_run(s, &graph, &exec);
  PCHECK(cuMemGetInfo(&free_after, &total));
  if (free_after != free_before) {
    std::fprintf(stderr, "graph_memory: free %zu before the graph's allocation, %zu after\n",
                 free_before, free_after);
    return 1;
  }
  CUdeviceptr whole = 0;  // the whole budget, as if the graph's memory were not there
  PCHECK(cuMemAlloc(&whole, total));
  PCHECK(cuMemFree(whole));
  PCHECK(cuMemFreeAsync(g, s));
  PCHECK(cuStreamSynchronize(s));
  PCHECK(cuGraphExecDestroy(exec));
  PCHECK(cuGraphDestroy(graph));
  PCHECK(cuStreamDestroy(s));
  swap_some(bytes, 4u);
  std::printf("graph_memory: graph memory is not counted against the budget\n");
  return 0;
}

int run_huge(unsigned long long bytes) {
  CUdeviceptr p = 0;
  CUresult e = cuMemAlloc(&p, 1ull << 50);
  if (e != CUDA_ERROR_OUT_OF_MEMORY) {
    std::fprintf(stderr, "huge: cuMemAlloc(1 PiB) returned %d\n", (int)e);
    return 1;
  }
  unsigned long long n = bytes / 4;
  CUdeviceptr r[3];
  for (auto& q : r) {
    PCHECK(cuMemAlloc(&q, bytes));
    PCHECK(cuMemsetD32(q, 2u, n));
  }
  for (auto& q : r) PCHECK(launch_add(g_add, nullptr, q, n, 1));
  PCHECK(cuCtxSynchronize());
  for (auto& q : r) PEXPECT(all_equal(q, n, 3u, nullptr));
  std::printf("huge: refused, and later allocations still swap\n");
  return 0;
}

// A region used behind a stream wait that only the host releases, and an allocation that needs
// it evicted before the host releases it: out of memory after a bounded wait, never a hang.
int run_stuck(unsigned long long bytes) {
  unsigned long long n = bytes / 4;
  CUstream s;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  void* host_flag = nullptr;
  PCHECK(cuMemAllocHost(&host_flag, 64));
  auto* flag = static_cast<volatile unsigned*>(host_flag);
  *flag = 0;
  CUdeviceptr a, b;
  PCHECK(cuMemAlloc(&a, bytes));
  PCHECK(cuMemsetD32(a, 1u, n));
  PCHECK(
      cuStreamWaitValue32(s, reinterpret_cast<CUdeviceptr>(host_flag), 1, CU_STREAM_WAIT_VALUE_EQ));
  PCHECK(launch_add(g_add, s, a, n, 1));  // a's swap-out is ordered after this
  CUresult e = cuMemAlloc(&b, bytes);
  PEXPECT(e == CUDA_ERROR_OUT_OF_MEMORY);
  *flag = 1;
  PCHECK(cuStreamSynchronize(s));
  PEXPECT(all_equal(a, n, 2u, nullptr));
  PCHECK(cuMemAlloc(&b, bytes));  // a can leave now
  PCHECK(cuMemsetD32(b, 3u, n));
  PEXPECT(all_equal(b, n, 3u, nullptr));
  PEXPECT(all_equal(a, n, 2u, nullptr));
  std::printf("stuck: out of memory after a bounded wait, then everything works\n");
  return 0;
}

}  // namespace

// Eight regions through a budget of two and a pinned cap of four (set by the test): each round
// touches every region, so each is swapped out and back; host copies come from the pinned pool
// and go back to it. cuMemFreeHost waits for the whole device, so gswap must not call it while the
// program runs.
int run_pinned(unsigned long long bytes) {
  unsigned long long n = bytes / 4;
  constexpr int kRegions = 8, kRounds = 4;
  CUstream s;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  std::vector<CUdeviceptr> regions(kRegions);
  for (auto& r : regions) {
    PCHECK(cuMemAlloc(&r, bytes));
    PCHECK(cuMemsetD32(r, 0u, n));
  }
  unsigned long long frees = counter("calls:cuMemFreeHost");
  for (int round = 0; round < kRounds; ++round)
    for (CUdeviceptr r : regions) PCHECK(launch_add(g_add, s, r, n, 1));
  PCHECK(cuStreamSynchronize(s));
  for (std::size_t i = 0; i < regions.size(); ++i) {
    unsigned got = 0;
    if (!all_equal(regions[i], n, kRounds, &got)) {
      std::fprintf(stderr, "pinned: region %zu holds %u, want %d\n", i, got, kRounds);
      return 1;
    }
  }
  // Swap them all out again, then free them: the host copies of those still out go back to the
  // pool at once, more than a quarter of the cap.
  for (int round = 0; round < 2; ++round)
    for (CUdeviceptr r : regions) PCHECK(launch_add(g_add, s, r, n, 1));
  PCHECK(cuStreamSynchronize(s));
  for (CUdeviceptr r : regions) PCHECK(cuMemFree(r));
  CUdeviceptr more = 0;  // and a new allocation takes memory after those frees
  PCHECK(cuMemAlloc(&more, bytes));
  PCHECK(cuMemsetD32(more, 0u, n));
  PCHECK(launch_add(g_add, s, more, n, 1));
  PCHECK(cuStreamSynchronize(s));
  frees = counter("calls:cuMemFreeHost") - frees;
  if (frees != 0) {
    std::fprintf(stderr, "pinned: %llu cuMemFreeHost calls while the program ran\n", frees);
    return 1;
  }
  PCHECK(cuMemFree(more));
  PCHECK(cuStreamDestroy(s));
  return 0;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: core MODULE.so MODE MiB\n");
    return 2;
  }
  std::string mode = argv[2];
  unsigned long long bytes = std::strtoull(argv[3], nullptr, 10) << 20;
  preload_init();
  CUmodule mod;
  PCHECK(cuModuleLoad(&mod, argv[1]));
  PCHECK(cuModuleGetFunction(&g_add, mod, "add"));
  PCHECK(cuModuleGetFunction(&g_add_from, mod, "add_from"));
  if (mode == "capture") return run_capture(bytes);
  if (mode == "capture_at_budget") return run_capture_at_budget(bytes);
  if (mode == "streams") return run_streams(bytes);
  if (mode == "faults") return run_faults(bytes);
  if (mode == "upload_oom") return run_upload_oom(bytes);
  if (mode == "no_context") return run_no_context(bytes);
  if (mode == "huge") return run_huge(bytes);
  if (mode == "other_device") return run_other_device(bytes);
  if (mode == "graph_memory") return run_graph_memory(bytes);
  if (mode == "stuck") return run_stuck(bytes);
  if (mode == "pinned") return run_pinned(bytes);
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
