// streams_test.cpp: stream order, cross-stream event waits, event timing, the legacy NULL stream
// against non-blocking streams, per-thread default streams, host functions, and graph capture.
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>
#include <vector>

#include "sc_test.h"

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
  load_kernels();
  CUstream s;
  CK(cuStreamCreate(&s, 0));
  CUevent start, stop, untimed;
  CK(cuEventCreate(&start, 0));
  CK(cuEventCreate(&stop, CU_EVENT_BLOCKING_SYNC));
  CK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  float ms = 0;
  EXPECT_EQ(cuEventElapsedTime(&ms, start, stop), CUDA_ERROR_INVALID_HANDLE);  // never recorded
  CK(cuEventRecord(start, s));
  uint64_t ns = 30'000'000;
  void* args[] = {&ns};
  CK(cuLaunchKernel(busy, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr));
  CK(cuEventRecord(stop, s));
  CK(cuEventRecord(untimed, s));
  CUresult q = cuEventQuery(stop);
  EXPECT_TRUE(q == CUDA_ERROR_NOT_READY || q == CUDA_SUCCESS);
  CUresult early = cuEventElapsedTime(&ms, start, stop);
  EXPECT_TRUE(early == CUDA_ERROR_NOT_READY || early == CUDA_SUCCESS);
  CK(cuEventSynchronize(stop));
  CK(cuEventElapsedTime(&ms, start, stop));
  EXPECT_GE(ms, 30.0f);  // at least the declared kernel duration
  EXPECT_EQ(cuEventElapsedTime(&ms, start, untimed), CUDA_ERROR_INVALID_HANDLE);
  for (CUevent e : {start, stop, untimed}) CK(cuEventDestroy(e));
  CK(cuStreamDestroy(s));
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

TEST_F(Sim, SameDirectionCopiesShareOneEngine) {
  // ctest runs this binary with SIMCUDA_H2D_BPS=1e9: an 8 MB copy holds the H2D engine >= 8 ms.
  const char* bps = std::getenv("SIMCUDA_H2D_BPS");
  if (!bps || std::strtod(bps, nullptr) != 1e9) GTEST_SKIP() << "needs SIMCUDA_H2D_BPS=1e9";
  const size_t n = 8'000'000;
  CUdeviceptr d;
  CK(cuMemAlloc(&d, 2 * n));
  std::vector<uint8_t> host(n, 1);
  CUstream a, b;
  CK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CUevent start, end_a, end_b;
  for (CUevent* e : {&start, &end_a, &end_b}) CK(cuEventCreate(e, 0));
  Gate* gate = Gate::make();
  CK(gate->block(a));  // both copies are queued before either can start
  CK(cuEventRecord(start, a));
  CK(cuStreamWaitEvent(b, start, 0));
  CK(cuMemcpyHtoDAsync(d, host.data(), n, a));
  CK(cuMemcpyHtoDAsync(d + n, host.data(), n, b));
  CK(cuEventRecord(end_a, a));
  CK(cuEventRecord(end_b, b));
  gate->release();
  CK(cuEventSynchronize(end_a));
  CK(cuEventSynchronize(end_b));
  float ta = 0, tb = 0;
  CK(cuEventElapsedTime(&ta, start, end_a));
  CK(cuEventElapsedTime(&tb, start, end_b));
  // Each copy takes >= 8 ms; on one engine the later one ends >= 16 ms after the start. (A lower
  // bound that follows from the throttle itself, not a timing expectation of the machine.)
  EXPECT_GE(std::max(ta, tb), 16.0f);
  EXPECT_GE(std::min(ta, tb), 8.0f);
  for (CUevent e : {start, end_a, end_b}) CK(cuEventDestroy(e));
  CK(cuStreamDestroy(a));
  CK(cuStreamDestroy(b));
  CK(cuMemFree(d));
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
  CK(cuMemAllocAsync(&scratch, 4096, s));  // stream-ordered allocation is legal in a capture
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
  CK(cuMemFree(scratch));
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
