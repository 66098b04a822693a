// edge.cpp: edge cases of libgswap, one per mode.
//
//   edge MODULE.so oom           a launch whose working set exceeds the budget fails with
//                                CUDA_ERROR_OUT_OF_MEMORY at once (no wait for memory that its
//                                own regions hold); the program goes on and its data is intact
//   edge MODULE.so oom_small     a launch on two regions that fit the budget, but not beside the
//                                small allocations (never evicted): refused at once, with a line
//                                that says so; the program goes on
//   edge MODULE.so exit_in_handler
//                                SIGTERM, whose handler calls exit(), lands after EDGE_SIGNAL_MS
//                                (100) while the main thread allocates, launches and frees over
//                                the budget: the process exits (exit_in_handler.sh runs it at
//                                30 delays)
//   edge MODULE.so no_context    a thread with no current context launches and memsets while
//                                every access is timed: both fail as without gswap, and gswap
//                                logs no error of its own
//   edge MODULE.so fork          the application forks while regions are swapped; the child does
//                                CUDA-free work and exits; the parent keeps computing correctly
//   edge MODULE.so swap          three regions over a budget of two, each launched in turn (the
//                                residency-bug check runs this with GSWAP_DEBUG_SKIP_RESTORE=1);
//                                pointer attributes of a swapped-out region stay right
//   edge MODULE.so graph         a launch captured into a graph keeps its region resident while
//                                other regions swap; replays of the graph find it mapped
//   edge MODULE.so indirect      a kernel follows an array of device pointers uploaded with
//                                cuMemcpyHtoD; the regions it names stay resident while others swap
//   edge MODULE.so init          cuInit only (a refused configuration makes it fail)
//   edge MODULE.so before_init   driver calls before cuInit get the driver's answer
//                                (CUDA_ERROR_NOT_INITIALIZED), then as swap
//   edge MODULE.so bounds        sizes near 2^64 are refused with CUDA_ERROR_OUT_OF_MEMORY; copies
//                                and memsets past the end of an allocation are refused with
//                                CUDA_ERROR_INVALID_VALUE, and addresses there are nobody's, as
//                                without gswap, resident or swapped out
//   edge MODULE.so contend       four threads, each launching on two regions of its own that
//                                together fill the budget, and freeing and allocating one of them
//                                again: every call waits its turn, none runs out of memory
//   edge MODULE.so capture_v1    as graph, with the CUDA 10.0 ABIs of cuStreamBeginCapture and
//                                cuGraphInstantiate, found with cuGetProcAddress and dlsym
//   edge MODULE.so capture_fail  a cuStreamEndCapture from the wrong thread fails and leaves the
//                                capture on; the right thread ends it, and regions swap after
//   edge MODULE.so bad_calls     stream-ordered allocation and free on a destroyed stream,
//                                cuMemGetInfo with a null pointer, a launch of an unloaded
//                                module's function and graph launches of no instance and of a
//                                destroyed one fail as without gswap; then as swap
//   edge MODULE.so dead_stream   a launch, an async copy and an async memset on a destroyed
//                                stream, of a region swapped out: each fails with the driver's
//                                code before gswap brings anything back or calls the driver on
//                                that stream (no error of gswap's own is logged); then as swap
//   edge MODULE.so zero_extent   2D and 3D copies between swapped-out regions with a Height,
//                                Depth, layer height or pitch of 0, which the driver reads as one
//                                row, one layer, the copy's height and its width: the rows copied
//                                arrive, the rest stays as it was
//   edge MODULE.so wide          one launch naming 200 regions (a by-value list, as a
//                                multi-tensor optimizer kernel takes), which fit the budget
//                                together, then more regions than the budget holds: every
//                                region keeps its data and swapping goes on
//
// The budget comes from GSWAP_BUDGET; sizes are chosen from the MiB figure passed in GSWAP_BUDGET.
#include <dlfcn.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "preload_common.h"

namespace {

CUfunction g_add, g_touch3, g_add_indirect, g_add_from, g_add_list;
const char* g_module_path = nullptr;

struct Three {
  CUdeviceptr p[3];
};

int run_oom(unsigned long long region_bytes) {
  unsigned long long n = region_bytes / 4;
  CUdeviceptr b[3];
  for (int k = 0; k < 3; ++k) {
    PCHECK(cuMemAlloc(&b[k], region_bytes));
    PCHECK(cuMemsetD32(b[k], 10u * (k + 1), n));
  }
  // One launch touching all three (pointers inside a by-value struct): 1.5x the budget.
  Three t = {{b[0], b[1], b[2]}};
  void* params[] = {&t, &n};
  const auto t0 = std::chrono::steady_clock::now();
  CUresult e = cuLaunchKernel(g_touch3, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (e != CUDA_ERROR_OUT_OF_MEMORY) {
    std::fprintf(stderr, "oom: expected CUDA_ERROR_OUT_OF_MEMORY, got %d\n", (int)e);
    return 1;
  }
  // Nothing can make room for it: waiting for the regions it pins itself (the library's
  // one-second wait for other threads' pins) only delays the error.
  if (ms > 500) {
    std::fprintf(stderr, "oom: the refusal took %.0f ms\n", ms);
    return 1;
  }
  // The program continues: smaller launches work and nothing was lost.
  for (int k = 0; k < 3; ++k) PCHECK(launch_add(g_add, nullptr, b[k], n, 1));
  PCHECK(cuCtxSynchronize());
  for (int k = 0; k < 3; ++k) {
    unsigned got = 0;
    if (!all_equal(b[k], n, 10u * (k + 1) + 1, &got)) {
      std::fprintf(stderr, "oom: region %d corrupted (got %u)\n", k, got);
      return 1;
    }
  }
  for (int k = 0; k < 3; ++k) PCHECK(cuMemFree(b[k]));
  std::printf("oom: refused with CUDA_ERROR_OUT_OF_MEMORY, data intact\n");
  return 0;
}

// Small allocations (never evicted) and a launch on two regions that fit the budget alone but not
// beside them: refused at once with the line that says so; a launch on one region works after.
int run_oom_small(unsigned long long region_bytes) {
  unsigned long long n = region_bytes / 4;
  std::vector<CUdeviceptr> small(region_bytes / (32 << 10));  // below the granularity
  for (CUdeviceptr& s : small) PCHECK(cuMemAlloc(&s, 32 << 10));
  CUdeviceptr b[2];
  for (int k = 0; k < 2; ++k) {
    PCHECK(cuMemAlloc(&b[k], region_bytes));
    PCHECK(cuMemsetD32(b[k], 10u * (k + 1), n));
  }
  Three t = {{b[0], b[1], b[1]}};
  void* params[] = {&t, &n};
  CUresult e = cuLaunchKernel(g_touch3, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr);
  if (e != CUDA_ERROR_OUT_OF_MEMORY) {
    std::fprintf(stderr, "oom_small: expected CUDA_ERROR_OUT_OF_MEMORY, got %d\n", (int)e);
    return 1;
  }
  for (int k = 0; k < 2; ++k) PCHECK(launch_add(g_add, nullptr, b[k], n, 1));
  PCHECK(cuCtxSynchronize());
  for (int k = 0; k < 2; ++k) {
    unsigned got = 0;
    if (!all_equal(b[k], n, 10u * (k + 1) + 1, &got)) {
      std::fprintf(stderr, "oom_small: region %d corrupted (got %u)\n", k, got);
      return 1;
    }
  }
  for (CUdeviceptr s : small) PCHECK(cuMemFree(s));
  for (int k = 0; k < 2; ++k) PCHECK(cuMemFree(b[k]));
  std::printf("oom_small: refused with CUDA_ERROR_OUT_OF_MEMORY, data intact\n");
  return 0;
}

// SIGTERM, whose handler calls exit(), lands after EDGE_SIGNAL_MS (100) while the main thread
// allocates, launches and frees over the budget: the process exits, wherever the signal finds it.
int run_exit_in_handler(unsigned long long region_bytes) {
  const unsigned long long n = region_bytes / 4;
  const char* ms_text = std::getenv("EDGE_SIGNAL_MS");
  const int ms = ms_text ? std::atoi(ms_text) : 100;
  ::signal(SIGTERM, [](int) { std::exit(0); });
  std::thread([ms] {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    ::kill(::getpid(), SIGTERM);
  }).detach();
  CUdeviceptr keep;
  PCHECK(cuMemAlloc(&keep, region_bytes));
  PCHECK(cuMemsetD32(keep, 0u, n));
  for (;;) {
    CUdeviceptr t;
    PCHECK(cuMemAlloc(&t, region_bytes));
    PCHECK(cuMemsetD32(t, 1u, n));
    PCHECK(launch_add(g_add, nullptr, keep, n, 1));
    PCHECK(cuMemFree(t));
  }
}

// A thread with no current context launches and memsets while every access is timed
// (GSWAP_TIMELINE): both fail with CUDA_ERROR_INVALID_CONTEXT, as without gswap, and gswap logs
// no error of its own; regions swap before and after.
int run_no_context(unsigned long long region_bytes) {
  const unsigned long long n = region_bytes / 4;
  CUdeviceptr b[3];
  for (int k = 0; k < 3; ++k) {
    PCHECK(cuMemAlloc(&b[k], region_bytes));
    PCHECK(cuMemsetD32(b[k], 5u, n));
    PCHECK(launch_add(g_add, nullptr, b[k], n, 1));
  }
  CUresult launched = CUDA_SUCCESS, set = CUDA_SUCCESS;
  std::thread([&] {
    launched = launch_add(g_add, nullptr, b[0], n, 1);
    set = cuMemsetD32(b[1], 9u, n);
  }).join();
  if (launched != CUDA_ERROR_INVALID_CONTEXT || set != CUDA_ERROR_INVALID_CONTEXT) {
    std::fprintf(stderr, "no_context: launch %d, memset %d, not %d\n", (int)launched, (int)set,
                 (int)CUDA_ERROR_INVALID_CONTEXT);
    return 1;
  }
  for (int k = 0; k < 3; ++k) PCHECK(launch_add(g_add, nullptr, b[k], n, 1));
  PCHECK(cuCtxSynchronize());
  for (int k = 0; k < 3; ++k) PEXPECT(all_equal(b[k], n, 7u, nullptr));
  std::printf("no_context: refused as without gswap, data intact\n");
  return 0;
}

int run_swap(unsigned long long region_bytes) {
  unsigned long long n = region_bytes / 4;
  CUdeviceptr b[3];
  for (int k = 0; k < 3; ++k) {
    PCHECK(cuMemAlloc(&b[k], region_bytes));
    PCHECK(cuMemsetD32(b[k], 5u, n));
  }
  // The first region has been swapped out by now: its attributes still describe the allocation.
  for (int k = 0; k < 3; ++k) {
    size_t range = 0;
    CUdeviceptr start = 0, base = 0;
    unsigned type = 0;
    PCHECK(cuPointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, b[k] + 100));
    PCHECK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, b[k] + 100));
    PCHECK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, b[k]));
    PCHECK(cuMemGetAddressRange(&base, &range, b[k] + 4));
    PEXPECT(range == region_bytes && start == b[k] && base == b[k] && type == CU_MEMORYTYPE_DEVICE);
  }
  for (int round = 0; round < 3; ++round)
    for (int k = 0; k < 3; ++k) PCHECK(launch_add(g_add, nullptr, b[k], n, 1));
  PCHECK(cuCtxSynchronize());
  for (int k = 0; k < 3; ++k) PEXPECT(all_equal(b[k], n, 8u, nullptr));
  std::printf("swap: three regions over a budget of two, verified\n");
  return 0;
}

int run_fork(unsigned long long region_bytes) {
  unsigned long long n = region_bytes / 4;
  CUdeviceptr b[3];
  for (int k = 0; k < 3; ++k) {
    PCHECK(cuMemAlloc(&b[k], region_bytes));
    PCHECK(cuMemsetD32(b[k], 100u, n));
  }
  for (int k = 0; k < 3; ++k) PCHECK(launch_add(g_add, nullptr, b[k], n, 1));
  std::fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    // CUDA does not survive fork: the child does host work only, and must exit cleanly. It lives
    // long enough for gswapd to see it, were the library to register it (it must not).
    unsigned long long sum = 0;
    for (unsigned i = 0; i < 1000000; ++i) sum += i % 7;
    std::printf("child: host work done (%llu)\n", sum);
    std::fflush(stdout);
    usleep(300000);
    _exit(sum == 2999997 ? 0 : 3);
  }
  int status = 0;
  PEXPECT(waitpid(pid, &status, 0) == pid);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "fork: child ended badly (status %d)\n", status);
    return 1;
  }
  for (int k = 0; k < 3; ++k) PCHECK(launch_add(g_add, nullptr, b[k], n, 1));
  PCHECK(cuCtxSynchronize());
  for (int k = 0; k < 3; ++k) PEXPECT(all_equal(b[k], n, 102u, nullptr));
  std::printf("fork: child exited cleanly, parent data verified\n");
  return 0;
}

// Two more regions launched on in turn beside `keep` (which a graph holds resident), three
// rounds, each round also replaying `exec`; `keep` ends at want_keep, the others at 6.
int swap_beside_graph(unsigned long long region_bytes, CUstream s, CUgraphExec exec,
                      CUdeviceptr keep, unsigned want_keep) {
  const unsigned long long n = region_bytes / 4;
  CUdeviceptr b[2];
  for (auto& p : b) {
    PCHECK(cuMemAlloc(&p, region_bytes));
    PCHECK(cuMemsetD32(p, 0u, n));
  }
  for (int round = 0; round < 3; ++round) {
    for (auto& p : b) PCHECK(launch_add(g_add, s, p, n, 2));
    PCHECK(cuGraphLaunch(exec, s));
  }
  PCHECK(cuStreamSynchronize(s));
  PEXPECT(all_equal(keep, n, want_keep, nullptr));
  for (auto& p : b) PEXPECT(all_equal(p, n, 6u, nullptr));
  for (auto& p : b) PCHECK(cuMemFree(p));
  return 0;
}

using Instantiate = CUresult (*)(CUgraphExec*, CUgraph);

// A region of ones and a launch adding 1 to it, captured on s: `begin` begins the capture and
// `end` ends it. The graph, instantiated by `instantiate`, is replayed beside regions that swap.
template <class Begin, class End>
int capture_and_replay(unsigned long long region_bytes, CUstream s, Begin&& begin, End&& end,
                       Instantiate instantiate) {
  const unsigned long long n = region_bytes / 4;
  CUdeviceptr a;
  PCHECK(cuMemAlloc(&a, region_bytes));
  PCHECK(cuMemsetD32(a, 1u, n));
  PCHECK(begin());
  PCHECK(launch_add(g_add, s, a, n, 1));
  CUgraph graph;
  if (end(&graph) != 0) return 1;
  CUgraphExec exec;
  PCHECK(instantiate(&exec, graph));
  if (swap_beside_graph(region_bytes, s, exec, a, 4u) != 0) return 1;
  PCHECK(cuGraphExecDestroy(exec));
  PCHECK(cuGraphDestroy(graph));
  PCHECK(cuMemFree(a));
  return 0;
}

int run_graph(unsigned long long region_bytes) {
  CUstream s;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  // The replays add 1 to the captured region through no hook of gswap's; the two other regions
  // fit only one at a time with it kept resident.
  const int bad = capture_and_replay(
      region_bytes, s, [&] { return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL); },
      [&](CUgraph* g) {
        PCHECK(cuStreamEndCapture(s, g));
        return 0;
      },
      [](CUgraphExec* exec, CUgraph g) { return cuGraphInstantiate(exec, g, 0); });
  if (bad) return 1;
  std::printf("graph: captured region stayed resident across replays, others swapped\n");
  return 0;
}

// The capture begun through the ABI of CUDA 10.0 (no mode argument), as a program built against
// that version, or one that asks cuGetProcAddress for it, calls it; the graph instantiated
// through cuGraphInstantiate's ABI of 10.0 too.
using BeginV1 = CUresult (*)(CUstream);
using InstantiateV1 = CUresult (*)(CUgraphExec*, CUgraph, CUgraphNode*, char*, size_t);
InstantiateV1 g_instantiate_v1 = nullptr;

int run_capture_v1(unsigned long long region_bytes) {
  BeginV1 by_proc = nullptr;
  CUdriverProcAddressQueryResult found;
  PCHECK(cuGetProcAddress("cuStreamBeginCapture", reinterpret_cast<void**>(&by_proc), 10000, 0,
                          &found));
  PCHECK(cuGetProcAddress("cuGraphInstantiate", reinterpret_cast<void**>(&g_instantiate_v1), 10000,
                          0, &found));
  auto by_dlsym = reinterpret_cast<BeginV1>(dlsym(RTLD_DEFAULT, "cuStreamBeginCapture"));
  PEXPECT(by_proc && g_instantiate_v1 && by_dlsym);
  CUstream s;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  for (BeginV1 begin : {by_proc, by_dlsym}) {
    const int bad = capture_and_replay(
        region_bytes, s, [&] { return begin(s); },
        [&](CUgraph* g) {
          PCHECK(cuStreamEndCapture(s, g));
          return 0;
        },
        [](CUgraphExec* exec, CUgraph g) {
          return g_instantiate_v1(exec, g, nullptr, nullptr, 0);
        });
    if (bad) return 1;
  }
  std::printf("capture_v1: captures through the 10.0 ABIs kept their regions, others swapped\n");
  return 0;
}

// A cuStreamEndCapture that fails leaves the capture on: gswap counts it ended only when it is.
int run_capture_fail(unsigned long long region_bytes) {
  CUstream s;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUcontext ctx;
  PCHECK(cuCtxGetCurrent(&ctx));
  auto end_after_another_thread_tried = [&](CUgraph* graph) {
    CUresult other = CUDA_SUCCESS;
    std::thread t([&] {
      CUgraph g = nullptr;
      if (cuCtxSetCurrent(ctx) == CUDA_SUCCESS) other = cuStreamEndCapture(s, &g);
    });
    t.join();
    if (other != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD) {
      std::fprintf(stderr, "capture_fail: the other thread's end gave %d\n", (int)other);
      return 1;
    }
    PCHECK(cuStreamEndCapture(s, graph));
    return 0;
  };
  const int bad = capture_and_replay(
      region_bytes, s, [&] { return cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL); },
      end_after_another_thread_tried,
      [](CUgraphExec* exec, CUgraph g) { return cuGraphInstantiateWithFlags(exec, g, 0); });
  if (bad) return 1;
  std::printf("capture_fail: the failed end left the capture counted, regions swapped after\n");
  return 0;
}

// Calls the driver refuses are refused under gswap too, with the driver's code, and lose nothing.
int run_bad_calls(unsigned long long region_bytes) {
  const unsigned long long n = region_bytes / 4;
  CUstream dead;
  PCHECK(cuStreamCreate(&dead, CU_STREAM_NON_BLOCKING));
  PCHECK(cuStreamDestroy(dead));
  CUdeviceptr p = 0;
  PEXPECT(cuMemAllocAsync(&p, region_bytes, dead) == CUDA_ERROR_INVALID_HANDLE);
  CUdeviceptr b;
  PCHECK(cuMemAlloc(&b, region_bytes));
  PCHECK(cuMemsetD32(b, 7u, n));
  PEXPECT(cuMemFreeAsync(b, dead) == CUDA_ERROR_INVALID_HANDLE);
  PEXPECT(all_equal(b, n, 7u, nullptr));  // still allocated, its data intact
  size_t free_bytes = 0, total = 0;
  PEXPECT(cuMemGetInfo(nullptr, &total) == CUDA_ERROR_INVALID_VALUE);
  PEXPECT(cuMemGetInfo(&free_bytes, nullptr) == CUDA_ERROR_INVALID_VALUE);
  // A launch of a function whose module is gone, launches with `extra` arrays the driver
  // refuses, and graph launches of no instance and of a destroyed one: refused by the driver,
  // they keep nothing resident (the swap that follows needs every region free to leave).
  CUmodule again;
  CUfunction stale;
  PCHECK(cuModuleLoad(&again, g_module_path));
  PCHECK(cuModuleGetFunction(&stale, again, "add"));
  PCHECK(cuModuleUnload(again));
  PEXPECT(launch_add(stale, nullptr, b, n, 1) == CUDA_ERROR_INVALID_HANDLE);
  // Launches whose `extra` array the driver refuses (no buffer size, a key it does not know):
  // they run nothing, and answer as the driver does.
  struct {
    CUdeviceptr buf;
    unsigned long long n;
    unsigned v;
  } args{b, n, 1};
  std::size_t args_size = sizeof args;
  void* no_size[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &args, CU_LAUNCH_PARAM_END};
  void* unknown_key[] = {CU_LAUNCH_PARAM_BUFFER_POINTER,
                         &args,
                         reinterpret_cast<void*>(0x07),
                         &args,
                         CU_LAUNCH_PARAM_BUFFER_SIZE,
                         &args_size,
                         CU_LAUNCH_PARAM_END};
  for (void** extra : {no_size, unknown_key})
    PEXPECT(cuLaunchKernel(g_add, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra) ==
            CUDA_ERROR_INVALID_VALUE);
  PEXPECT(cuGraphLaunch(nullptr, nullptr) != CUDA_SUCCESS);
  CUstream s;
  CUgraph g;
  CUgraphExec exec;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  PCHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  PCHECK(launch_add(g_add, s, b, n, 1));
  PCHECK(cuStreamEndCapture(s, &g));
  PCHECK(cuGraphInstantiate(&exec, g, 0));
  PCHECK(cuGraphExecDestroy(exec));
  PCHECK(cuGraphDestroy(g));
  PEXPECT(cuGraphLaunch(exec, s) != CUDA_SUCCESS);
  PCHECK(cuStreamDestroy(s));
  PEXPECT(all_equal(b, n, 7u, nullptr));
  PCHECK(cuMemFreeAsync(b, nullptr));
  PCHECK(cuCtxSynchronize());
  // Allocations from no pool, or from a handle the driver does not know, are refused; one from
  // the device's own pool is a region, as cuMemAllocAsync's are.
  CUdeviceptr q = 0;
  PEXPECT(cuMemAllocFromPoolAsync(&q, region_bytes, nullptr, nullptr) == CUDA_ERROR_INVALID_VALUE);
  PEXPECT(cuMemAllocFromPoolAsync(&q, region_bytes, reinterpret_cast<CUmemoryPool>(0x1234),
                                  nullptr) != CUDA_SUCCESS);
  CUdevice dev;
  CUmemoryPool pool;
  PCHECK(cuCtxGetDevice(&dev));
  PCHECK(cuDeviceGetDefaultMemPool(&pool, dev));
  PCHECK(cuMemAllocFromPoolAsync(&q, region_bytes, pool, nullptr));
  using Name = int (*)(unsigned long long, const char*);
  if (auto name = reinterpret_cast<Name>(dlsym(RTLD_DEFAULT, "gswap_name_allocation")))
    PEXPECT(name(q, "from the device's pool") == 0);
  PCHECK(cuMemsetD32(q, 9u, n));
  PEXPECT(all_equal(q, n, 9u, nullptr));
  PCHECK(cuMemFreeAsync(q, nullptr));
  PCHECK(cuCtxSynchronize());
  std::printf("bad_calls: refused as the driver refuses them\n");
  return 0;
}

// Work on a stream the driver no longer knows fails with its code, as without gswap, before
// gswap restores the region or records and waits on that stream (whose failures it would log as
// its own errors).
int run_dead_stream(unsigned long long region_bytes) {
  const unsigned long long n = region_bytes / 4;
  CUdeviceptr b[3];
  for (auto& p : b) {
    PCHECK(cuMemAlloc(&p, region_bytes));
    PCHECK(cuMemsetD32(p, 9u, n));  // over a budget of two: b[0] is swapped out by the third
  }
  CUstream dead;
  PCHECK(cuStreamCreate(&dead, CU_STREAM_NON_BLOCKING));
  PCHECK(cuStreamDestroy(dead));
  std::vector<unsigned> host(n, 1u);
  PEXPECT(launch_add(g_add, dead, b[0], n, 1) == CUDA_ERROR_INVALID_HANDLE);
  PEXPECT(cuMemcpyHtoDAsync(b[0], host.data(), region_bytes, dead) == CUDA_ERROR_INVALID_HANDLE);
  PEXPECT(cuMemsetD32Async(b[0], 1u, n, dead) == CUDA_ERROR_INVALID_HANDLE);
  for (auto& p : b) PEXPECT(all_equal(p, n, 9u, nullptr));
  std::printf("dead_stream: work on a destroyed stream refused, the regions unchanged\n");
  return 0;
}

int run_zero_extent(unsigned long long region_bytes) {
  const unsigned long long n = region_bytes / 4;
  constexpr std::size_t kRow = 1024;
  CUdeviceptr src, dst, other[2];
  PCHECK(cuMemAlloc(&src, region_bytes));
  PCHECK(cuMemAlloc(&dst, region_bytes));
  for (auto& p : other) PCHECK(cuMemAlloc(&p, region_bytes));
  // Each copy finds both regions swapped out: the two others fill the budget first.
  auto swap_both_out = [&]() -> CUresult {
    for (CUdeviceptr p : other)
      if (CUresult e = launch_add(g_add, nullptr, p, n, 1); e != CUDA_SUCCESS) return e;
    return CUDA_SUCCESS;
  };
  PCHECK(cuMemsetD32(src, 1u, n));
  PCHECK(cuMemsetD32(dst, 2u, n));
  std::size_t copied = 0;  // bytes of dst from its start that now hold src's
  // Height 0: one row.
  PCHECK(swap_both_out());
  CUDA_MEMCPY2D c2{};
  c2.srcMemoryType = c2.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c2.srcDevice = src, c2.dstDevice = dst;
  c2.srcPitch = c2.dstPitch = kRow, c2.WidthInBytes = kRow, c2.Height = 0;
  PCHECK(cuMemcpy2D(&c2));
  copied = kRow;
  // Depth 0: one layer of two rows, after the first row; pitch 0: the width.
  PCHECK(swap_both_out());
  CUDA_MEMCPY3D c3{};
  c3.srcMemoryType = c3.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c3.srcDevice = src, c3.dstDevice = dst;
  c3.srcY = c3.dstY = 1;
  c3.srcPitch = c3.dstPitch = 0, c3.WidthInBytes = kRow, c3.Height = 2, c3.Depth = 0;
  PCHECK(cuMemcpy3D(&c3));
  copied += 2 * kRow;
  // Layer height 0: layers as high as the copy, here two layers of one row after those.
  PCHECK(swap_both_out());
  c3.srcY = c3.dstY = 3;
  c3.srcPitch = c3.dstPitch = kRow, c3.Height = 1, c3.Depth = 2, c3.srcHeight = c3.dstHeight = 0;
  PCHECK(cuMemcpy3D(&c3));
  copied += 2 * kRow;
  std::vector<unsigned> host(n);
  PCHECK(cuMemcpyDtoH(host.data(), dst, region_bytes));
  for (unsigned long long i = 0; i < n; ++i) {
    const unsigned want = i * 4 < copied ? 1u : 2u;
    if (host[i] != want) {
      std::fprintf(stderr, "zero_extent: word %llu is %u, expected %u\n", i, host[i], want);
      return 1;
    }
  }
  PEXPECT(all_equal(src, n, 1u, nullptr));
  std::printf("zero_extent: rows copied as the driver reads the extents, the rest intact\n");
  return 0;
}

int run_wide(unsigned long long region_bytes) {
  constexpr unsigned kListed = 200;
  struct List {
    unsigned long long count, n;
    CUdeviceptr p[256];
  } list{};
  // 200 regions of 64 KiB (12.5 MiB) in one launch, then others of region_bytes.
  const unsigned long long small = 64 << 10;
  list.count = kListed;
  list.n = small / 4;
  for (unsigned k = 0; k < kListed; ++k) {
    PCHECK(cuMemAlloc(&list.p[k], small));
    PCHECK(cuMemsetD32(list.p[k], k, list.n));
  }
  void* params[] = {&list};
  for (int round = 0; round < 2; ++round) {
    PCHECK(cuLaunchKernel(g_add_list, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    // Then regions that need the budget the list took: its regions leave and come back.
    const unsigned long long n = region_bytes / 4;
    CUdeviceptr big[2];
    for (auto& p : big) {
      PCHECK(cuMemAlloc(&p, region_bytes));
      PCHECK(launch_add(g_add, nullptr, p, n, 3));
    }
    for (auto p : big) PEXPECT(all_equal(p, n, 3u, nullptr));
    for (auto p : big) PCHECK(cuMemFree(p));
  }
  for (unsigned k = 0; k < kListed; ++k) {
    unsigned got = 0;
    if (!all_equal(list.p[k], list.n, k + 2, &got)) {
      std::fprintf(stderr, "wide: region %u holds %u, expected %u\n", k, got, k + 2);
      return 1;
    }
  }
  std::printf("wide: a launch naming %u regions, swapped around it, data intact\n", kListed);
  return 0;
}

int run_indirect(unsigned long long region_bytes) {
  unsigned long long n = region_bytes / 4;
  CUdeviceptr named[2], other[2], array;
  for (auto& p : named) {
    PCHECK(cuMemAlloc(&p, region_bytes));
    PCHECK(cuMemsetD32(p, 0u, n));
  }
  PCHECK(cuMemAlloc(&array, sizeof named));  // small: the never-evicted arena
  PCHECK(cuMemcpyHtoD(array, named, sizeof named));
  for (auto& p : other) {
    PCHECK(cuMemAlloc(&p, region_bytes));
    PCHECK(cuMemsetD32(p, 0u, n));
  }
  unsigned long long count = 2;
  void* params[] = {&array, &count, &n};
  for (int round = 0; round < 3; ++round) {
    for (auto& p : other) PCHECK(launch_add(g_add, nullptr, p, n, 1));  // pushes the others out
    PCHECK(cuLaunchKernel(g_add_indirect, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  }
  PCHECK(cuCtxSynchronize());
  for (auto& p : named) PEXPECT(all_equal(p, n, 3u, nullptr));
  for (auto& p : other) PEXPECT(all_equal(p, n, 3u, nullptr));
  std::printf("indirect: regions named only in device memory stayed resident\n");
  return 0;
}

#define EXPECT_RESULT(call, want)                                                             \
  do {                                                                                        \
    CUresult e_ = (call);                                                                     \
    if (e_ != (want)) {                                                                       \
      std::fprintf(stderr, "%s:%d: %s returned %d, expected %d\n", __FILE__, __LINE__, #call, \
                   (int)e_, (int)(want));                                                     \
      return 1;                                                                               \
    }                                                                                         \
  } while (0)

int check_bounds(CUdeviceptr b, std::size_t size) {
  unsigned char host[64] = {};
  EXPECT_RESULT(cuMemcpyHtoD(b + size - 10, host, 10), CUDA_SUCCESS);
  EXPECT_RESULT(cuMemcpyHtoD(b + size - 10, host, 20), CUDA_ERROR_INVALID_VALUE);
  EXPECT_RESULT(cuMemcpyDtoH(host, b + size - 10, 20), CUDA_ERROR_INVALID_VALUE);
  EXPECT_RESULT(cuMemcpyDtoD(b, b + size - 10, 20), CUDA_ERROR_INVALID_VALUE);
  EXPECT_RESULT(cuMemsetD8(b + size, 1, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_RESULT(cuMemsetD8Async(b + size - 1, 1, 2, nullptr), CUDA_ERROR_INVALID_VALUE);
  // Element counts whose bytes wrap past the address space, to a few bytes that would fit.
  EXPECT_RESULT(cuMemsetD32(b, 1, (std::size_t{1} << 62) + 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_RESULT(cuMemsetD16Async(b, 1, (std::size_t{1} << 63) + 2, nullptr),
                CUDA_ERROR_INVALID_VALUE);
  EXPECT_RESULT(cuMemsetD2D32(b, 4096, 1, (std::size_t{1} << 62) + 1, 1), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr base = 0;
  std::size_t got = 0;
  EXPECT_RESULT(cuMemGetAddressRange(&base, &got, b + size - 1), CUDA_SUCCESS);
  if (base != b || got != size) {
    std::fprintf(stderr, "bounds: address range %zu bytes, expected %zu\n", got, size);
    return 1;
  }
  EXPECT_RESULT(cuMemGetAddressRange(&base, &got, b + size), CUDA_ERROR_NOT_FOUND);
  unsigned type = 0;
  EXPECT_RESULT(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, b + size),
                CUDA_ERROR_INVALID_VALUE);
  // The plural form does not fail on a pointer nobody allocated: it answers memory type 0.
  CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
  void* data[] = {&type};
  type = CU_MEMORYTYPE_DEVICE;
  EXPECT_RESULT(cuPointerGetAttributes(1, &attr, data, b + size), CUDA_SUCCESS);
  if (type != 0) {
    std::fprintf(stderr, "bounds: memory type %u past the end, expected 0\n", type);
    return 1;
  }
  return 0;
}

int run_bounds(unsigned long long region_bytes) {
  CUdeviceptr p = 0;
  EXPECT_RESULT(cuMemAlloc(&p, ~std::size_t{0}), CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_RESULT(cuMemAlloc(&p, ~std::size_t{0} - (1u << 20)), CUDA_ERROR_OUT_OF_MEMORY);
  // Not a whole number of granules: the region's last granule runs past its end.
  const std::size_t size = region_bytes / 2 + 123;
  CUdeviceptr b[3];
  for (auto& x : b) PCHECK(cuMemAlloc(&x, size));
  for (CUdeviceptr x : b) PCHECK(cuMemsetD8(x, 7, size));
  if (check_bounds(b[0], size)) return 1;
  // b[0] is swapped out once the other two have been used (each takes half the budget).
  for (CUdeviceptr x : {b[1], b[2]}) PCHECK(launch_add(g_add, nullptr, x, size / 4, 1));
  PCHECK(cuCtxSynchronize());
  if (check_bounds(b[0], size)) return 1;
  for (CUdeviceptr x : b) PCHECK(cuMemFree(x));
  std::printf("bounds: refused as the driver refuses, resident or not\n");
  return 0;
}

int run_contend(unsigned long long region_bytes) {
  constexpr int kThreads = 4, kIters = 12;
  CUcontext ctx = nullptr;
  PCHECK(cuCtxGetCurrent(&ctx));
  const unsigned long long n = region_bytes / 4;
  int failures[kThreads] = {};
  auto work = [&](int id) {
    int& failed = failures[id];
    auto check = [&](CUresult e, const char* what) {
      if (e == CUDA_SUCCESS) return true;
      std::fprintf(stderr, "contend: thread %d: %s returned %d\n", id, what, (int)e);
      failed = 1;
      return false;
    };
    if (!check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent")) return;
    CUstream s;
    CUdeviceptr a, b;
    if (!check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate") ||
        !check(cuMemAlloc(&a, region_bytes), "cuMemAlloc") ||
        !check(cuMemAlloc(&b, region_bytes), "cuMemAlloc") ||
        !check(cuMemsetD32(a, 0, n), "cuMemsetD32") ||
        !check(cuMemsetD32(b, id + 1, n), "cuMemsetD32"))
      return;
    unsigned adds = 0;
    for (int it = 0; it < kIters; ++it) {
      if (!check(launch_add_from(g_add_from, s, a, b, n), "cuLaunchKernel")) return;
      ++adds;
      if (it % 3 == 2) {
        if (!check(cuStreamSynchronize(s), "cuStreamSynchronize") ||
            !check(cuMemFree(a), "cuMemFree") ||
            !check(cuMemAlloc(&a, region_bytes), "cuMemAlloc") ||
            !check(cuMemsetD32(a, 0, n), "cuMemsetD32"))
          return;
        adds = 0;
      }
    }
    unsigned got = 0;
    if (!check(cuStreamSynchronize(s), "cuStreamSynchronize")) return;
    if (!all_equal(a, n, adds * (id + 1), &got)) {
      std::fprintf(stderr, "contend: thread %d: got %u, expected %u\n", id, got, adds * (id + 1));
      failed = 1;
    }
    check(cuMemFree(a), "cuMemFree");
    check(cuMemFree(b), "cuMemFree");
    check(cuStreamDestroy(s), "cuStreamDestroy");
  };
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) threads.emplace_back(work, i);
  for (auto& t : threads) t.join();
  for (int f : failures)
    if (f) return 1;
  std::printf("contend: %d threads, no call out of memory, data intact\n", kThreads);
  return 0;
}

// Driver calls made before cuInit: the driver answers each with CUDA_ERROR_NOT_INITIALIZED, and
// so must every hook, which then has no driver table unless it loads one itself.
int check_before_init() {
  CUdeviceptr p = 0;
  std::size_t f = 0, t = 0, pitch = 0;
  char buf[16] = {};
  unsigned memory_type = 0;
  struct Call {
    const char* name;
    CUresult result;
  };
  const Call calls[] = {
      {"cuMemAlloc", cuMemAlloc(&p, 4 << 20)},
      {"cuMemAllocAsync", cuMemAllocAsync(&p, 4 << 20, nullptr)},
      {"cuMemAllocPitch", cuMemAllocPitch(&p, &pitch, 1024, 1024, 4)},
      {"cuMemFree", cuMemFree(0x1000)},
      {"cuMemFreeAsync", cuMemFreeAsync(0x1000, nullptr)},
      {"cuMemGetInfo", cuMemGetInfo(&f, &t)},
      {"cuDeviceTotalMem", cuDeviceTotalMem(&t, 0)},
      {"cuMemcpyHtoD", cuMemcpyHtoD(0x1000, buf, sizeof buf)},
      {"cuMemsetD8", cuMemsetD8(0x1000, 0, 16)},
      {"cuLaunchKernel", cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr)},
      {"cuPointerGetAttribute",
       cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, 0x1000)},
      {"cuMemGetAddressRange", cuMemGetAddressRange(&p, &f, 0x1000)},
  };
  int failures = 0;
  for (const Call& c : calls)
    if (c.result != CUDA_ERROR_NOT_INITIALIZED) {
      std::fprintf(stderr, "before_init: %s returned %d, expected CUDA_ERROR_NOT_INITIALIZED\n",
                   c.name, (int)c.result);
      ++failures;
    }
  if (failures == 0)
    std::printf("before_init: %zu calls before cuInit answered as the driver does\n",
                sizeof calls / sizeof calls[0]);
  return failures;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(
        stderr,
        "usage: edge MODULE.so "
        "oom|oom_small|exit_in_handler|no_context|fork|swap|graph|indirect|bounds|contend|capture_"
        "v1|"
        "capture_fail|bad_calls|dead_stream|zero_extent|wide|init|before_init [region-MiB]\n");
    return 2;
  }
  std::string mode = argv[2];
  unsigned long long region_bytes = (argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 8ull) << 20;
  if (mode == "before_init") {
    if (check_before_init() != 0) return 1;
    mode = "swap";  // then work as usual, swapping
  }
  if (mode == "init") {
    CUresult e = cuInit(0);
    std::printf("cuInit: %d\n", (int)e);
    if (e == CUDA_SUCCESS) return 0;
    // A program that goes on past the refusal finds the driver uninitialised, not a device
    // without a budget.
    CUdevice d = 0;
    std::printf("cuDeviceGet after the refused cuInit: %d\n", (int)cuDeviceGet(&d, 0));
    return 1;
  }
  preload_init();
  CUmodule mod;
  g_module_path = argv[1];
  PCHECK(cuModuleLoad(&mod, argv[1]));
  PCHECK(cuModuleGetFunction(&g_add, mod, "add"));
  PCHECK(cuModuleGetFunction(&g_touch3, mod, "touch3"));
  PCHECK(cuModuleGetFunction(&g_add_indirect, mod, "add_indirect"));
  PCHECK(cuModuleGetFunction(&g_add_from, mod, "add_from"));
  PCHECK(cuModuleGetFunction(&g_add_list, mod, "add_list"));
  if (mode == "oom") return run_oom(region_bytes);
  if (mode == "oom_small") return run_oom_small(region_bytes);
  if (mode == "exit_in_handler") return run_exit_in_handler(region_bytes);
  if (mode == "no_context") return run_no_context(region_bytes);
  if (mode == "fork") return run_fork(region_bytes);
  if (mode == "swap") return run_swap(region_bytes);
  if (mode == "graph") return run_graph(region_bytes);
  if (mode == "indirect") return run_indirect(region_bytes);
  if (mode == "bounds") return run_bounds(region_bytes);
  if (mode == "contend") return run_contend(region_bytes);
  if (mode == "capture_v1") return run_capture_v1(region_bytes);
  if (mode == "capture_fail") return run_capture_fail(region_bytes);
  if (mode == "bad_calls") return run_bad_calls(region_bytes) != 0 ? 1 : run_swap(region_bytes);
  if (mode == "zero_extent") return run_zero_extent(region_bytes);
  if (mode == "dead_stream") return run_dead_stream(region_bytes) != 0 ? 1 : run_swap(region_bytes);
  if (mode == "wide") return run_wide(region_bytes);
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
