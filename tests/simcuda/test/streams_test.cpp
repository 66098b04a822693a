// streams_test.cpp: stream order, cross-stream event waits, event timing, the legacy NULL stream
// against non-blocking streams, per-thread default streams, host functions, and graph capture.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <thread>
#include <vector>

#include "sc_test.h"
#include "simcuda.h"

// The per-thread-default-stream ABI, which cuda.h only declares under
// CUDA_API_PER_THREAD_DEFAULT_STREAM.
extern "C" {
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
CUresult cuStreamSynchronize_ptsz(CUstream);
CUresult cuStreamQuery_ptsz(CUstream);
}

namespace {

// Host memory is device-visible in simcuda, but the tests use real device allocations so that
// they exercise the same paths as a program.
struct Log {
  CUdeviceptr log = 0, counter = 0;
  Log() {
    EXPECT_EQ(cuMemAlloc(&log, 1024 * sizeof(int32_t)), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAlloc(&counter, sizeof(int32_t)), CUDA_SUCCESS);
    EXPECT_EQ(cuMemsetD32(counter, 0, 1), CUDA_SUCCESS);
  }
  ~Log() {
    cuMemFree(log);
    cuMemFree(counter);
  }
  int32_t* l() { return reinterpret_cast<int32_t*>(log); }
  int32_t* c() { return reinterpret_cast<int32_t*>(counter); }
  std::vector<int32_t> read() {
    int32_t n = 0;
    EXPECT_EQ(cuMemcpyDtoH(&n, counter, sizeof n), CUDA_SUCCESS);
    std::vector<int32_t> v(static_cast<size_t>(n));
    if (n) {
      EXPECT_EQ(cuMemcpyDtoH(v.data(), log, n * sizeof(int32_t)), CUDA_SUCCESS);
    }
    return v;
  }
};

void CUDA_CB host_append(void* p) {
  auto* pair = static_cast<std::pair<std::vector<int>*, int>*>(p);
  pair->first->push_back(pair->second);
}

void CUDA_CB stream_callback(CUstream, CUresult status, void* p) {
  if (status == CUDA_SUCCESS) host_append(p);
}

}  // namespace

TEST_F(Sim, StreamRunsInOrder) {
  load_kernels();
  Log log;
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Gate* gate = Gate::make();
  CK(gate->block(s));
  for (int i = 0; i < 200; ++i)
    CK(launch_append(i % 40 == 0 ? sleep_append : append, s, log.l(), log.c(), i));
  CUresult busy_q = cuStreamQuery(s);
  gate->release();
  EXPECT_EQ(busy_q, CUDA_ERROR_NOT_READY);
  CK(cuStreamSynchronize(s));
  CK(cuStreamQuery(s));
  auto v = log.read();
  ASSERT_EQ(v.size(), 200u);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(v[i], i);
  CK(cuStreamDestroy(s));
  EXPECT_EQ(cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
}

TEST_F(Sim, CrossStreamWaitOnEvent) {
  load_kernels();
  Log log;
  CUstream a, b;
  CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent e;
  CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  CK(launch_append(sleep_append, a, log.l(), log.c(), 1));  // slow work on A
  CK(cuEventRecord(e, a));
  CK(cuStreamWaitEvent(b, e, 0));
  CK(launch_append(append, b, log.l(), log.c(), 2));  // must run after A's kernel
  std::vector<int> host_log;
  std::pair<std::vector<int>*, int> arg{&host_log, 3};
  CK(cuLaunchHostFunc(b, host_append, &arg));
  std::pair<std::vector<int>*, int> arg2{&host_log, 4};
  CK(cuStreamAddCallback(b, stream_callback, &arg2, 0));
  CK(cuStreamSynchronize(b));
  EXPECT_EQ(log.read(), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(host_log, (std::vector<int>{3, 4}));
  CK(cuEventQuery(e));
  CK(cuEventDestroy(e));
  EXPECT_EQ(cuEventQuery(e), CUDA_ERROR_INVALID_HANDLE);
  CK(cuStreamDestroy(a));
  CK(cuStreamDestroy(b));
}

TEST_F(Sim, EventTiming) {
  CUstream s, other;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
  CUevent start, mid, stop, untimed;
  CK(cuEventCreate(&start, 0));
  CK(cuEventCreate(&mid, 0));
  CK(cuEventCreate(&stop, CU_EVENT_BLOCKING_SYNC));
  CK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime(&ms, start, stop), CUDA_ERROR_INVALID_HANDLE);  // never recorded
  CK(cuEventRecord(start, s));
  CK(cuEventSynchronize(start));
  Gate* gate = Gate::make();
  CK(gate->block(s));
  CK(cuEventRecord(stop, s));
  CK(cuEventRecord(untimed, s));
  // stop is behind the held gate: not reached, so neither complete nor measurable.
  EXPECT_EQ(cuEventQuery(stop), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuEventElapsedTime(&ms, start, stop), CUDA_ERROR_NOT_READY);
  // mid is reached on another stream while s is still held...
  CK(cuEventRecord(mid, other));
  CK(cuEventSynchronize(mid));
  EXPECT_EQ(cuEventQuery(stop), CUDA_ERROR_NOT_READY);
  gate->release();
  CK(cuEventSynchronize(stop));
  // ...so timestamps taken when each stream reaches its event order start <= mid <= stop, although
  // stop was recorded before mid.
  float start_mid = 0, mid_stop = 0, start_stop = 0, stop_start = 0;
  CK(cuEventElapsedTime(&start_mid, start, mid));
  CK(cuEventElapsedTime(&mid_stop, mid, stop));
  CK(cuEventElapsedTime(&start_stop, start, stop));
  CK(cuEventElapsedTime(&stop_start, stop, start));
  EXPECT_GE(start_mid, 0.0f);
  EXPECT_GE(mid_stop, 0.0f);
  EXPECT_NEAR(start_mid + mid_stop, start_stop, 1e-3f);
  EXPECT_EQ(stop_start, -start_stop);
  EXPECT_EQ(cuEventElapsedTime(&ms, start, untimed), CUDA_ERROR_INVALID_HANDLE);
  for (CUevent e : {start, mid, stop, untimed}) CK(cuEventDestroy(e));
  CK(cuStreamDestroy(s));
  CK(cuStreamDestroy(other));
}

// Spins until pred() holds; false after 30 s (only a broken simcuda gets there).
template <class Pred>
static bool spin_until(Pred pred) {
  for (int i = 0; i < 3'000'000; ++i) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
  return false;
}

static unsigned long long counter(const char* name) {
  unsigned long long v = 0;
  return simcudaGetCounter(name, &v) == 0 ? v : ~0ull;
}

// Runs in a re-executed child, so that it can leave a stream busy for minutes and exit.
static bool kernel_duration_child() {
  CUdevice d;
  CUcontext c;
  CUmodule m;
  CUfunction f;
  CUstream s;
  CUdeviceptr flag;
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c) ||
      cuModuleLoad(&m, module_path("test_kernels").c_str()) ||
      cuModuleGetFunction(&f, m, "mark_busy") || cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) ||
      cuMemAlloc(&flag, 4) || cuMemsetD32(flag, 0, 1))
    return false;
  uint64_t ns = 600'000'000'000;  // ten minutes of simulated GPU time
  void* args[] = {&ns, &flag};
  if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr)) return false;
  auto* set = reinterpret_cast<int32_t*>(flag);
  if (!spin_until([&] { return __atomic_load_n(set, __ATOMIC_ACQUIRE) == 1; })) return false;
  // The kernel's host function has run, but its stream stays busy for the declared duration.
  return cuStreamQuery(s) == CUDA_ERROR_NOT_READY;
}

TEST(SimcudaDuration, KernelHoldsItsStreamForItsDeclaredDuration) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(kernel_duration_child() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

TEST_F(Sim, LegacyStreamOrdersBlockingStreamsButNotNonBlocking) {
  load_kernels();
  Log log;
  CUstream blocking, nonblocking;
  CK(cuStreamCreate(&blocking, CU_STREAM_DEFAULT));
  CK(cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING));
  // Blocking stream work, then NULL-stream work: the NULL stream waits for it.
  CK(launch_append(sleep_append, blocking, log.l(), log.c(), 1));
  CK(launch_append(append, nullptr, log.l(), log.c(), 2));
  // And later blocking-stream work waits for the NULL stream.
  CK(launch_append(append, blocking, log.l(), log.c(), 3));
  CK(cuStreamSynchronize(blocking));
  EXPECT_EQ(log.read(), (std::vector<int32_t>{1, 2, 3}));

  // A non-blocking stream does not wait for NULL-stream work that cannot finish yet.
  CUevent done;
  CK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  Gate* gate = Gate::make();
  CK(gate->block(CU_STREAM_LEGACY));
  CK(launch_append(append, nonblocking, log.l(), log.c(), 4));
  CK(cuEventRecord(done, nonblocking));
  CUresult waited = cuEventSynchronize(done);
  CUresult legacy_busy = cuStreamQuery(CU_STREAM_LEGACY);
  // A blocking stream's new work must wait behind the gated NULL stream.
  CK(launch_append(append, blocking, log.l(), log.c(), 5));
  CUresult blocking_busy = cuStreamQuery(blocking);
  gate->release();
  EXPECT_EQ(waited, CUDA_SUCCESS);
  EXPECT_EQ(legacy_busy, CUDA_ERROR_NOT_READY);
  EXPECT_EQ(blocking_busy, CUDA_ERROR_NOT_READY);
  CK(cuStreamSynchronize(nullptr));
  CK(cuStreamSynchronize(blocking));
  EXPECT_EQ(log.read(), (std::vector<int32_t>{1, 2, 3, 4, 5}));
  CK(cuEventDestroy(done));
  CK(cuStreamDestroy(blocking));
  CK(cuStreamDestroy(nonblocking));
}

TEST_F(Sim, PerThreadDefaultStreamsAreIndependent) {
  load_kernels();
  Log log;
  // This thread's per-thread stream is held; another thread's per-thread stream completes anyway.
  Gate* gate = Gate::make();
  CK(gate->block(CU_STREAM_PER_THREAD));
  CUresult r = CUDA_ERROR_UNKNOWN, q = CUDA_ERROR_UNKNOWN;
  std::thread([&] {
    cuCtxSetCurrent(ctx);
    int32_t* l = log.l();
    int32_t* c = log.c();
    int32_t id = 5;
    void* a2[] = {&l, &c, &id};
    r = cuLaunchKernel_ptsz(append, 1, 1, 1, 1, 1, 1, 0, nullptr, a2, nullptr);
    if (r == CUDA_SUCCESS) r = cuStreamSynchronize_ptsz(nullptr);
    q = cuStreamQuery(CU_STREAM_PER_THREAD);
  }).join();
  CUresult mine = cuStreamQuery_ptsz(nullptr);
  gate->release();
  EXPECT_EQ(r, CUDA_SUCCESS);
  EXPECT_EQ(q, CUDA_SUCCESS);
  EXPECT_EQ(mine, CUDA_ERROR_NOT_READY);  // this thread's is still held
  CK(cuStreamSynchronize(CU_STREAM_PER_THREAD));
  EXPECT_EQ(log.read(), std::vector<int32_t>{5});
}

// Runs in a re-executed child with a host-to-device rate of 1000 bytes/s, so that one 64 KiB copy
// holds the H2D engine for over a minute, and exits without waiting for it.
static bool copy_engine_child() {
  setenv("SIMCUDA_H2D_BPS", "1000", 1);
  CUdevice dv;
  CUcontext c;
  CUstream a, b, up;
  CUdeviceptr d;
  const size_t n = 64 << 10;
  if (cuInit(0) || cuDeviceGet(&dv, 0) || cuDevicePrimaryCtxRetain(&c, dv) || cuCtxSetCurrent(c) ||
      cuStreamCreate(&a, CU_STREAM_NON_BLOCKING) || cuStreamCreate(&b, CU_STREAM_NON_BLOCKING) ||
      cuStreamCreate(&up, CU_STREAM_NON_BLOCKING) || cuMemAlloc(&d, 2 * n) ||
      cuMemsetD8(d, 0, 2 * n))
    return false;
  std::vector<uint8_t> host(n, 0x5a), down(1, 0);
  auto* dev = reinterpret_cast<volatile uint8_t*>(d);
  if (cuMemcpyHtoDAsync(d, host.data(), n, a)) return false;
  // The copy's bytes have landed; it now holds the engine (and its stream) for n / rate seconds.
  if (!spin_until([&] { return dev[n - 1] == 0x5a; })) return false;
  if (cuStreamQuery(a) != CUDA_ERROR_NOT_READY) return false;
  // A 1-byte copy in the same direction on another stream waits for the engine...
  unsigned long long waits = counter("copy_engine_waits");
  if (cuMemcpyHtoDAsync(d + n, host.data(), 1, b)) return false;
  if (!spin_until(
          [&] { return counter("copy_engine_waits") > waits || cuStreamQuery(b) == CUDA_SUCCESS; }))
    return false;
  if (cuStreamQuery(b) != CUDA_ERROR_NOT_READY || dev[n] != 0) return false;
  // ...while a copy in the other direction runs at once.
  if (cuMemcpyDtoHAsync(down.data(), d, 1, up)) return false;
  if (!spin_until([&] { return cuStreamQuery(up) == CUDA_SUCCESS; })) return false;
  return down[0] == 0x5a && cuStreamQuery(b) == CUDA_ERROR_NOT_READY;
}

TEST(SimcudaThrottle, SameDirectionCopiesShareOneEngine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::_Exit(copy_engine_child() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

TEST_F(Sim, ThrottledCopiesStayCorrect) {
  // Many async copies on several streams, through the throttled engines, land the right bytes.
  const size_t n = 1 << 20;
  CUdeviceptr d;
  CK(cuMemAlloc(&d, 4 * n));
  std::vector<std::vector<uint8_t>> src(4, std::vector<uint8_t>(n)),
      dst(4, std::vector<uint8_t>(n));
  CUstream s[4];
  for (int i = 0; i < 4; ++i) {
    std::fill(src[i].begin(), src[i].end(), static_cast<uint8_t>(i + 1));
    CK(cuStreamCreate(&s[i], CU_STREAM_NON_BLOCKING));
    CK(cuMemcpyHtoDAsync(d + i * n, src[i].data(), n, s[i]));
    CK(cuMemcpyDtoHAsync(dst[i].data(), d + i * n, n, s[i]));
  }
  for (int i = 0; i < 4; ++i) {
    CK(cuStreamSynchronize(s[i]));
    EXPECT_EQ(dst[i], src[i]);
    CK(cuStreamDestroy(s[i]));
  }
  CK(cuMemFree(d));
}

TEST_F(Sim, GraphCaptureAndReplay) {
  load_kernels();
  Log log;
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUstreamCaptureStatus st;
  CK(cuStreamIsCapturing(s, &st));
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CK(launch_append(append, s, log.l(), log.c(), 10));
  CK(cuMemsetD32Async(log.log + 100 * 4, 77, 1, s));
  CK(launch_append(append, s, log.l(), log.c(), 11));
  CUdeviceptr scratch;
  CK(cuMemAllocAsync(&scratch, 4096, s));  // an allocation node: legal in a capture
  CK(cuMemsetD32Async(scratch, 5, 1024, s));
  CK(cuMemFreeAsync(scratch, s));  // freed inside the graph, so the graph can run again
  CUgraph graph;
  CK(cuStreamEndCapture(s, &graph));
  CK(cuStreamSynchronize(s));
  EXPECT_TRUE(log.read().empty());  // captured, not run
  CUgraphExec exec;
  CK(cuGraphInstantiate(&exec, graph, 0));
  CK(cuGraphLaunch(exec, s));
  CK(cuGraphLaunch(exec, s));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(log.read(), (std::vector<int32_t>{10, 11, 10, 11}));
  EXPECT_EQ(log.l()[100], 77);
  CK(cuGraphExecDestroy(exec));
  CK(cuGraphDestroy(graph));
  EXPECT_EQ(cuGraphDestroy(graph), CUDA_ERROR_INVALID_HANDLE);
  CK(cuStreamDestroy(s));
}

TEST_F(Sim, GlobalCaptureForbidsSyncCallsFromAnyThread) {
  load_kernels();
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CUresult alloc = CUDA_SUCCESS;
  std::thread([&] {
    cuCtxSetCurrent(ctx);
    CUdeviceptr p;
    alloc = cuMemAlloc(&p, 4096);
  }).join();
  EXPECT_EQ(alloc, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  CUstreamCaptureStatus st;
  CK(cuStreamIsCapturing(s, &st));
  EXPECT_EQ(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  CUgraph graph = reinterpret_cast<CUgraph>(1);
  EXPECT_EQ(cuStreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(graph, nullptr);

  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(cuStreamEndCapture(s, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);

  // Relaxed mode allows it.
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CUdeviceptr p;
  CK(cuMemAlloc(&p, 4096));
  CK(cuStreamEndCapture(s, &graph));
  CK(cuGraphDestroy(graph));
  CK(cuMemFree(p));
  CK(cuStreamDestroy(s));
}

TEST_F(Sim, BadHandles) {
  CUstream bogus = reinterpret_cast<CUstream>(0x12345678);
  EXPECT_EQ(cuStreamSynchronize(bogus), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamQuery(bogus), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuEventRecord(reinterpret_cast<CUevent>(0x999), nullptr), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuLaunchKernel(reinterpret_cast<CUfunction>(0x777), 1, 1, 1, 1, 1, 1, 0, nullptr,
                           nullptr, nullptr),
            CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuStreamDestroy(bogus), CUDA_ERROR_INVALID_HANDLE);
  EXPECT_EQ(cuModuleUnload(reinterpret_cast<CUmodule>(0x4444)), CUDA_ERROR_INVALID_HANDLE);
  unsigned flags = 0;
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CK(cuStreamGetFlags(s, &flags));
  EXPECT_EQ(flags, static_cast<unsigned>(CU_STREAM_NON_BLOCKING));
  CUcontext c;
  CK(cuStreamGetCtx(s, &c));
  EXPECT_EQ(c, ctx);
  unsigned long long id1 = 0, id2 = 0;
  CK(cuStreamGetId(s, &id1));
  CUstream s2;
  CK(cuStreamCreateWithPriority(&s2, 0, -1));
  CK(cuStreamGetId(s2, &id2));
  EXPECT_NE(id1, id2);
  CK(cuStreamDestroy(s));
  CK(cuStreamDestroy(s2));
}

// Giving pinned memory back waits for the context's work, as on the real driver (an H200 waited
// for a kernel on another stream): after cuMemFreeHost or cuMemHostUnregister returns, the slow
// kernel has run.
TEST_F(Sim, FreeingPinnedMemoryWaitsForTheDevice) {
  load_kernels();
  Log log;
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  unsigned long long before = 0, after = 0;
  ASSERT_EQ(simcudaGetCounter("device_wide_syncs", &before), 0);
  void* pinned = nullptr;
  CK(cuMemAllocHost(&pinned, 1 << 20));
  CK(launch_append(sleep_append, s, log.l(), log.c(), 1));
  CK(cuMemFreeHost(pinned));
  EXPECT_EQ(cuStreamQuery(s), CUDA_SUCCESS);
  std::vector<char> plain(1 << 20);
  CK(cuMemHostRegister(plain.data(), plain.size(), 0));
  CK(launch_append(sleep_append, s, log.l(), log.c(), 2));
  CK(cuMemHostUnregister(plain.data()));
  EXPECT_EQ(cuStreamQuery(s), CUDA_SUCCESS);
  ASSERT_EQ(simcudaGetCounter("device_wide_syncs", &after), 0);
  EXPECT_EQ(after - before, 2u);
  EXPECT_EQ(log.read(), (std::vector<int32_t>{1, 2}));
  CK(cuStreamDestroy(s));
}
