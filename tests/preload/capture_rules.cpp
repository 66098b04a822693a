// capture_rules.cpp: frees and allocations of regions answered as the driver answers them, during
// stream captures and outside them. One mode per run; each ends by swapping (the test wants bytes
// swapped out).
//
//   capture_rules MODULE.so free_in_capture [region-MiB]
//       cuMemFreeAsync of a region on a capturing stream is refused with CUDA_ERROR_INVALID_VALUE
//       (during a capture a free must name a graph allocation) and frees nothing: the graph that
//       reads the region replays right while other allocations fill the budget; the same free on a
//       stream that is not capturing succeeds
//   capture_rules MODULE.so unsafe_calls [region-MiB]
//       cuMemAlloc and cuMemFree of regions during captures follow the capture mode rules
//       (cuThreadExchangeStreamCaptureMode): refused with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
//       the capture invalidated and the region kept, where the driver refuses them; allowed where
//       it allows them (relaxed mode, a thread-local capture of another thread)
//   capture_rules MODULE.so free_waits [region-MiB]
//       cuMemFree of a region returns only once the work queued before it has run, on a
//       non-blocking stream that uses no region and on a blocking one, as the driver's cuMemFree
//       does; under gswap without a device-wide synchronisation
//   capture_rules MODULE.so graph_hold_reuse [region-MiB]
//       a region a captured graph replays is freed while the graph lives; a region allocated
//       after it, once the graph is gone, still leaves when a launch needs the whole budget (the
//       graph's hold on the freed region does not pass to it)
//   capture_rules MODULE.so failed_destroy [region-MiB]
//       cuStreamDestroy and cuGraphExecDestroy that fail (injected) leave the stream and the
//       instance as they were, as the driver does: a later cuMemFree still waits for the
//       stream's work, and the instance still replays while the live regions exceed the budget
//
// The budget comes from GSWAP_BUDGET (16 MiB in the tests); regions are region-MiB (default 4).
#include <dlfcn.h>
#include <simcuda.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "preload_common.h"

namespace {

CUfunction g_add, g_add_from;
CUcontext g_ctx;

bool expect_code(const char* what, CUresult got, CUresult want) {
  if (got == want) return true;
  std::fprintf(stderr, "%s: %d, want %d\n", what, (int)got, (int)want);
  return false;
}

CUdeviceptr region(unsigned long long bytes, unsigned value) {
  CUdeviceptr p = 0;
  PCHECK(cuMemAlloc(&p, bytes));
  PCHECK(cuMemsetD32(p, value, bytes / 4));
  return p;
}

// Six regions through the budget, each touched twice: bytes are swapped out and back.
int swap_through(unsigned long long bytes) {
  unsigned long long n = bytes / 4;
  std::vector<CUdeviceptr> r;
  for (int k = 0; k < 6; ++k) r.push_back(region(bytes, 10u + k));
  for (int round = 0; round < 2; ++round)
    for (CUdeviceptr p : r) PCHECK(launch_add(g_add, nullptr, p, n, 1));
  PCHECK(cuCtxSynchronize());
  for (int k = 0; k < 6; ++k) PEXPECT(all_equal(r[k], n, 12u + k, nullptr));
  for (CUdeviceptr p : r) PCHECK(cuMemFree(p));
  return 0;
}

int run_free_in_capture(unsigned long long bytes) {
  unsigned long long n = bytes / 4;
  CUstream s, other;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  PCHECK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CUdeviceptr a = region(bytes, 1u), b = region(bytes, 2u), d = region(bytes, 3u);
  bool ok = true;
  for (CUstreamCaptureMode mode : {CU_STREAM_CAPTURE_MODE_RELAXED, CU_STREAM_CAPTURE_MODE_GLOBAL}) {
    PCHECK(cuStreamBeginCapture(s, mode));
    PCHECK(launch_add_from(g_add_from, s, b, a, n));  // b += a, in every replay
    ok &= expect_code("cuMemFreeAsync(region, capturing stream)", cuMemFreeAsync(a, s),
                      CUDA_ERROR_INVALID_VALUE);
    CUgraph g = nullptr;
    ok &= expect_code("cuStreamEndCapture", cuStreamEndCapture(s, &g), CUDA_SUCCESS);
    if (!ok) return 1;
    CUgraphExec x;
    PCHECK(cuGraphInstantiate(&x, g, 0));
    // Had a been freed, these would take its memory.
    std::vector<CUdeviceptr> fill;
    for (int k = 0; k < 3; ++k) fill.push_back(region(bytes, 99u));
    for (int k = 0; k < 3; ++k) PCHECK(cuGraphLaunch(x, s));
    PCHECK(cuStreamSynchronize(s));
    for (CUdeviceptr p : fill) PCHECK(cuMemFree(p));
    PCHECK(cuGraphExecDestroy(x));
    PCHECK(cuGraphDestroy(g));
  }
  unsigned got = 0;
  if (!all_equal(b, n, 2u + 6u, &got) || !all_equal(a, n, 1u, nullptr)) {
    std::fprintf(stderr, "free_in_capture: b holds %u, want 8, or a changed\n", got);
    return 1;
  }
  // A stream-ordered free on a stream that is not capturing is no free node: it succeeds.
  PCHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  PCHECK(launch_add(g_add, s, b, n, 1));
  ok &= expect_code("cuMemFreeAsync(region, other stream)", cuMemFreeAsync(d, other), CUDA_SUCCESS);
  CUgraph g = nullptr;
  ok &= expect_code("cuStreamEndCapture", cuStreamEndCapture(s, &g), CUDA_SUCCESS);
  if (!ok) return 1;
  PCHECK(cuGraphDestroy(g));
  PCHECK(cuMemFree(a));  // still a live allocation
  PCHECK(cuMemFree(b));
  if (swap_through(bytes)) return 1;
  std::printf("free_in_capture: refused with CUDA_ERROR_INVALID_VALUE, nothing freed\n");
  return 0;
}

int run_unsafe_calls(unsigned long long bytes) {
  unsigned long long n = bytes / 4;
  CUstream s, s2;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  PCHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  CUdeviceptr keep = region(bytes, 7u);
  bool ok = true;
  CUgraph g = nullptr;
  CUdeviceptr p = 0;

  // This thread's own global-mode capture: both calls refused, the capture invalidated.
  PCHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  ok &= expect_code("global: cuMemAlloc", cuMemAlloc(&p, bytes),
                    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ok &= expect_code("global: cuMemFree", cuMemFree(keep), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ok &= expect_code("global: cuStreamEndCapture", cuStreamEndCapture(s, &g),
                    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  ok &= g == nullptr;
  if (!ok) return 1;
  PEXPECT(all_equal(keep, n, 7u, nullptr));  // the refused free freed nothing

  // Relaxed mode: both allowed, the capture goes on.
  PCHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  PCHECK(launch_add(g_add, s, keep, n, 1));
  ok &= expect_code("relaxed: cuMemAlloc", cuMemAlloc(&p, bytes), CUDA_SUCCESS);
  ok &= expect_code("relaxed: cuMemFree", cuMemFree(p), CUDA_SUCCESS);
  ok &= expect_code("relaxed: cuStreamEndCapture", cuStreamEndCapture(s, &g), CUDA_SUCCESS);
  if (!ok) return 1;
  CUgraphExec x;
  PCHECK(cuGraphInstantiate(&x, g, 0));
  PCHECK(cuGraphLaunch(x, s));
  PCHECK(cuStreamSynchronize(s));
  PCHECK(cuGraphExecDestroy(x));
  PCHECK(cuGraphDestroy(g));
  PEXPECT(all_equal(keep, n, 8u, nullptr));

  // A thread-local capture prohibits only its own thread's calls: another thread (global mode)
  // allocates and frees; this thread's allocation is refused.
  PCHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  CUresult other_alloc = CUDA_ERROR_UNKNOWN, other_free = CUDA_ERROR_UNKNOWN;
  std::thread([&] {
    CUdeviceptr q = 0;
    if (cuCtxSetCurrent(g_ctx) != CUDA_SUCCESS) return;
    other_alloc = cuMemAlloc(&q, bytes);
    if (other_alloc == CUDA_SUCCESS) other_free = cuMemFree(q);
  }).join();
  ok &= expect_code("thread-local, other thread: cuMemAlloc", other_alloc, CUDA_SUCCESS);
  ok &= expect_code("thread-local, other thread: cuMemFree", other_free, CUDA_SUCCESS);
  ok &= expect_code("thread-local: cuMemAlloc", cuMemAlloc(&p, bytes),
                    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  ok &= expect_code("thread-local: cuStreamEndCapture", cuStreamEndCapture(s, &g),
                    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  if (!ok) return 1;

  // Another thread's global-mode capture: this thread (global mode) is refused and invalidates
  // it; in relaxed mode it may allocate and free.
  std::atomic<int> step{0};
  CUresult other_end = CUDA_ERROR_UNKNOWN;
  std::thread capturer([&] {
    if (cuCtxSetCurrent(g_ctx) != CUDA_SUCCESS) return;
    step = cuStreamBeginCapture(s2, CU_STREAM_CAPTURE_MODE_GLOBAL) == CUDA_SUCCESS ? 1 : -1;
    while (step.load() == 1) std::this_thread::yield();
    CUgraph g2 = nullptr;
    other_end = cuStreamEndCapture(s2, &g2);
  });
  while (step.load() == 0) std::this_thread::yield();
  PEXPECT(step.load() == 1);
  ok &= expect_code("other's global: cuMemFree", cuMemFree(keep),
                    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  PCHECK(cuThreadExchangeStreamCaptureMode(&mode));
  ok &= expect_code("other's global, relaxed: cuMemAlloc", cuMemAlloc(&p, bytes), CUDA_SUCCESS);
  ok &= expect_code("other's global, relaxed: cuMemFree", cuMemFree(p), CUDA_SUCCESS);
  PCHECK(cuThreadExchangeStreamCaptureMode(&mode));
  step = 2;
  capturer.join();
  ok &= expect_code("other's global: cuStreamEndCapture", other_end,
                    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  if (!ok) return 1;
  PEXPECT(all_equal(keep, n, 8u, nullptr));
  PCHECK(cuMemFree(keep));
  if (swap_through(bytes)) return 1;
  std::printf("unsafe_calls: refused and allowed as the capture modes say\n");
  return 0;
}

unsigned long long counter(const char* name) {
  unsigned long long v = 0;
  PEXPECT(simcudaGetCounter(name, &v) == 0);
  return v;
}

int run_free_waits(unsigned long long bytes) {
  constexpr unsigned long long kWords = 1024;
  const bool under_gswap = dlsym(RTLD_DEFAULT, "gswap_api_version") != nullptr;
  void* host = nullptr;
  PCHECK(cuMemHostAlloc(&host, 2 * kWords * 4 + 64, CU_MEMHOSTALLOC_DEVICEMAP));
  auto* words = static_cast<volatile unsigned*>(host);
  auto* flag = reinterpret_cast<std::atomic<unsigned>*>(static_cast<char*>(host) + 2 * kWords * 4);
  for (unsigned long long i = 0; i < 2 * kWords; ++i) words[i] = 0;
  CUstream nonblocking, blocking;
  PCHECK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  PCHECK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
  unsigned long long syncs = counter("device_wide_syncs");
  int k = 0;
  for (CUstream s : {nonblocking, blocking}) {
    CUdeviceptr freed = region(bytes, 1u);
    flag->store(0);
    // The stream's work (which names no region) runs only once another thread sets the flag.
    CUdeviceptr words_dev = reinterpret_cast<CUdeviceptr>(host) + k * kWords * 4;
    PCHECK(cuStreamWaitValue32(s, reinterpret_cast<CUdeviceptr>(flag), 1, CU_STREAM_WAIT_VALUE_EQ));
    PCHECK(launch_add(g_add, s, words_dev, kWords, 5));
    std::thread setter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      flag->store(1);
    });
    PCHECK(cuMemFree(freed));
    unsigned seen = words[k * kWords];
    setter.join();
    if (seen != 5) {
      std::fprintf(stderr, "free_waits: %s stream's work had not run after cuMemFree (%u)\n",
                   k == 0 ? "a non-blocking" : "a blocking", seen);
      return 1;
    }
    ++k;
  }
  syncs = counter("device_wide_syncs") - syncs;
  if (under_gswap && syncs != 0) {
    std::fprintf(stderr, "free_waits: %llu device-wide synchronisations\n", syncs);
    return 1;
  }
  if (swap_through(bytes)) return 1;
  std::printf("free_waits: cuMemFree waited for the work queued before it\n");
  return 0;
}

// GSWAP_BUDGET, given in MiB by the tests ("16MiB"); 16 MiB when it says otherwise.
unsigned long long budget_bytes() {
  const char* b = std::getenv("GSWAP_BUDGET");
  char* end = nullptr;
  const unsigned long long mib = b ? std::strtoull(b, &end, 10) : 0;
  return (mib && end && std::string(end) == "MiB" ? mib : 16ull) << 20;
}

// A graph of one launch adding 1 to x's n words, captured on s, instantiated and replayed once on
// s (not waited for).
CUgraphExec capture_add_and_replay(CUstream s, CUdeviceptr x, unsigned long long n,
                                   CUgraph* graph) {
  PCHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  PCHECK(launch_add(g_add, s, x, n, 1));
  PCHECK(cuStreamEndCapture(s, graph));
  CUgraphExec exec;
  PCHECK(cuGraphInstantiate(&exec, *graph, 0));
  PCHECK(cuGraphLaunch(exec, s));
  return exec;
}

int run_graph_hold_reuse(unsigned long long bytes) {
  const unsigned long long n = bytes / 4;
  CUstream s;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x = region(bytes, 1u);
  CUgraph graph;
  CUgraphExec exec = capture_add_and_replay(s, x, n, &graph);
  PCHECK(cuStreamSynchronize(s));
  PCHECK(cuMemFree(x));  // while the graph lives (it is not launched again)
  PCHECK(cuCtxSynchronize());
  CUdeviceptr y = region(bytes, 2u);
  PCHECK(cuGraphExecDestroy(exec));
  PCHECK(cuGraphDestroy(graph));
  // One launch over a region as large as the whole budget: y must leave for it.
  const unsigned long long whole = budget_bytes();
  CUdeviceptr big = region(whole, 3u);
  if (!expect_code("graph_hold_reuse: a launch over the whole budget",
                   launch_add(g_add, nullptr, big, whole / 4, 1), CUDA_SUCCESS))
    return 1;
  PCHECK(cuCtxSynchronize());
  if (!all_equal(big, whole / 4, 4u, nullptr) || !all_equal(y, n, 2u, nullptr)) {
    std::fprintf(stderr, "graph_hold_reuse: data lost\n");
    return 1;
  }
  PCHECK(cuMemFree(big));
  if (swap_through(bytes)) return 1;
  std::printf("graph_hold_reuse: the region allocated after the free left for the launch\n");
  return 0;
}

int run_failed_destroy(unsigned long long bytes) {
  using Inject = int (*)(const char*);
  auto inject = reinterpret_cast<Inject>(dlsym(RTLD_DEFAULT, "simcudaInjectFailure"));
  if (!inject) {
    std::fprintf(stderr, "failed_destroy: needs simcuda\n");
    return 1;
  }
  // A non-blocking stream whose destroy fails lives on: cuMemFree waits for its work.
  constexpr unsigned long long kWords = 1024;
  void* host = nullptr;
  PCHECK(cuMemHostAlloc(&host, kWords * 4 + 64, CU_MEMHOSTALLOC_DEVICEMAP));
  auto* words = static_cast<volatile unsigned*>(host);
  auto* flag = reinterpret_cast<std::atomic<unsigned>*>(static_cast<char*>(host) + kWords * 4);
  for (unsigned long long i = 0; i < kWords; ++i) words[i] = 0;
  flag->store(0);
  CUstream s;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr freed = region(bytes, 1u);
  inject("cuStreamDestroy_v2:1");
  if (!expect_code("failed_destroy: cuStreamDestroy", cuStreamDestroy(s), CUDA_ERROR_UNKNOWN))
    return 1;
  inject(nullptr);
  PCHECK(cuStreamWaitValue32(s, reinterpret_cast<CUdeviceptr>(flag), 1, CU_STREAM_WAIT_VALUE_EQ));
  PCHECK(launch_add(g_add, s, reinterpret_cast<CUdeviceptr>(host), kWords, 5));
  std::thread setter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    flag->store(1);
  });
  PCHECK(cuMemFree(freed));
  const unsigned seen = words[0];
  setter.join();
  if (seen != 5) {
    std::fprintf(stderr, "failed_destroy: the stream's work had not run after cuMemFree (%u)\n",
                 seen);
    return 1;
  }
  // An instance whose destroy fails still replays, with more live than the budget holds.
  const unsigned long long n = bytes / 4;
  CUdeviceptr x = region(bytes, 1u);
  std::vector<CUdeviceptr> others;
  for (unsigned long long live = bytes; live <= budget_bytes(); live += bytes)
    others.push_back(region(bytes, 2u));
  CUgraph graph;
  CUgraphExec exec = capture_add_and_replay(s, x, n, &graph);
  inject("cuGraphExecDestroy:1");
  if (!expect_code("failed_destroy: cuGraphExecDestroy", cuGraphExecDestroy(exec),
                   CUDA_ERROR_UNKNOWN))
    return 1;
  inject(nullptr);
  if (!expect_code("failed_destroy: cuGraphLaunch of the instance that lives on",
                   cuGraphLaunch(exec, s), CUDA_SUCCESS))
    return 1;
  PCHECK(cuStreamSynchronize(s));
  if (!all_equal(x, n, 3u, nullptr)) {
    std::fprintf(stderr, "failed_destroy: the replays' data lost\n");
    return 1;
  }
  PCHECK(cuGraphExecDestroy(exec));
  PCHECK(cuGraphDestroy(graph));
  PCHECK(cuStreamDestroy(s));
  for (CUdeviceptr p : others) PCHECK(cuMemFree(p));
  PCHECK(cuMemFree(x));
  if (swap_through(bytes)) return 1;
  std::printf("failed_destroy: the stream and the instance lived on as without gswap\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: capture_rules MODULE.so free_in_capture|unsafe_calls|free_waits|"
                 "graph_hold_reuse|failed_destroy [region-MiB]\n");
    return 2;
  }
  std::string mode = argv[2];
  unsigned long long bytes = (argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 4ull) << 20;
  g_ctx = preload_init();
  CUmodule mod;
  PCHECK(cuModuleLoad(&mod, argv[1]));
  PCHECK(cuModuleGetFunction(&g_add, mod, "add"));
  PCHECK(cuModuleGetFunction(&g_add_from, mod, "add_from"));
  if (mode == "free_in_capture") return run_free_in_capture(bytes);
  if (mode == "unsafe_calls") return run_unsafe_calls(bytes);
  if (mode == "free_waits") return run_free_waits(bytes);
  if (mode == "graph_hold_reuse") return run_graph_hold_reuse(bytes);
  if (mode == "failed_destroy") return run_failed_destroy(bytes);
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}
