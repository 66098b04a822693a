// capture_test.cpp: stream capture's rules as the driver has them. Captured events are never
// complete; a stream that waits on a captured event joins the capture and must be joined back;
// potentially unsafe calls are refused by thread and capture mode; conflicting operations
// (synchronising captured work, the legacy stream behind a capturing blocking stream, waits
// across capture boundaries, batch copies) are refused in every mode; and every invalidation is
// counted.
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "sc_test.h"
#include "simcuda.h"

namespace {

unsigned long long invalidations() {
  unsigned long long v = 0;
  EXPECT_EQ(simcudaGetCounter("capture_invalidations", &v), 0);
  return v;
}

CUstreamCaptureStatus status(CUstream s) {
  CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
  EXPECT_EQ(cuStreamIsCapturing(s, &st), CUDA_SUCCESS);
  return st;
}

// Runs f on a new thread with the primary context current and the given capture mode.
CUresult on_thread(CUcontext ctx, CUstreamCaptureMode mode, const std::function<CUresult()>& f) {
  CUresult r = CUDA_ERROR_UNKNOWN;
  std::thread([&] {
    cuCtxSetCurrent(ctx);
    CUstreamCaptureMode m = mode;
    if (cuThreadExchangeStreamCaptureMode(&m) != CUDA_SUCCESS) return;
    r = f();
  }).join();
  return r;
}

class Capture : public Sim {
 protected:
  void SetUp() override {
    Sim::SetUp();
    load_kernels();
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&t, CU_STREAM_NON_BLOCKING));
    CK(cuMemAlloc(&log, 64 * sizeof(int32_t)));
    CK(cuMemAlloc(&ctr, sizeof(int32_t)));
    CK(cuMemsetD32(ctr, 0, 1));
  }
  void TearDown() override {
    // A failed test may leave a capture open; end it so that the next test starts clean.
    for (CUstream x : {s, t}) {
      CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
      CUgraph graph = nullptr;
      if (cuStreamIsCapturing(x, &st) == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE &&
          cuStreamEndCapture(x, &graph) == CUDA_SUCCESS)
        cuGraphDestroy(graph);
    }
    cuStreamDestroy(s);
    cuStreamDestroy(t);
    cuMemFree(log);
    cuMemFree(ctr);
    Sim::TearDown();
  }
  CUresult append_on(CUstream st, int32_t id) {
    return launch_append(append, st, reinterpret_cast<int32_t*>(log),
                         reinterpret_cast<int32_t*>(ctr), id);
  }
  std::vector<int32_t> read_log() {
    int32_t n = 0;
    EXPECT_EQ(cuMemcpyDtoH(&n, ctr, sizeof n), CUDA_SUCCESS);
    std::vector<int32_t> v(static_cast<size_t>(n));
    if (n) {
      EXPECT_EQ(cuMemcpyDtoH(v.data(), log, n * sizeof(int32_t)), CUDA_SUCCESS);
    }
    return v;
  }
  // Ends the capture on s, expecting it to fail with `want` and a NULL graph.
  void expect_end_fails(CUresult want) {
    CUgraph graph = reinterpret_cast<CUgraph>(1);
    EXPECT_EQ(cuStreamEndCapture(s, &graph), want);
    EXPECT_EQ(graph, nullptr);
  }
  CUstream s = nullptr, t = nullptr;
  CUdeviceptr log = 0, ctr = 0;
};

}  // namespace

// An event recorded on a capturing stream stands for captured work: querying or synchronising it
// is refused (and invalidates the capture), also in relaxed mode and after the capture ended.
TEST_F(Capture, CapturedEventIsNeverComplete) {
  CUevent e;
  CK(cuEventCreate(&e, 0));
  unsigned long long inv = invalidations();
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CK(append_on(s, 1));
  CK(cuEventRecord(e, s));
  EXPECT_EQ(on_thread(ctx, CU_STREAM_CAPTURE_MODE_RELAXED, [&] { return cuEventQuery(e); }),
            CUDA_ERROR_CAPTURED_EVENT);
  EXPECT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  EXPECT_EQ(invalidations(), inv + 1);
  EXPECT_EQ(cuEventSynchronize(e), CUDA_ERROR_CAPTURED_EVENT);
  EXPECT_EQ(append_on(s, 2), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  expect_end_fails(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  // Still a captured event after the capture: never complete outside the graph.
  EXPECT_EQ(cuEventQuery(e), CUDA_ERROR_CAPTURED_EVENT);
  EXPECT_EQ(cuEventSynchronize(e), CUDA_ERROR_CAPTURED_EVENT);
  float ms;
  EXPECT_EQ(cuEventElapsedTime(&ms, e, e), CUDA_ERROR_CAPTURED_EVENT);
  EXPECT_EQ(invalidations(), inv + 1);
  // Recorded again outside a capture, it is an ordinary event.
  CK(cuEventRecord(e, s));
  CK(cuEventSynchronize(e));
  CK(cuEventQuery(e));
  EXPECT_TRUE(read_log().empty());
  CK(cuEventDestroy(e));
}

// A stream that waits on a captured event joins the capture: its later work goes into the same
// graph, ordered by the events, and it leaves capture mode when the origin ends the capture.
TEST_F(Capture, WaitingOnACapturedEventJoinsTheCapture) {
  CUevent fork, join;
  CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  CK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(append_on(s, 1));
  CK(cuEventRecord(fork, s));
  EXPECT_EQ(status(t), CU_STREAM_CAPTURE_STATUS_NONE);
  CK(cuStreamWaitEvent(t, fork, 0));
  EXPECT_EQ(status(t), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  cuuint64_t id_s = 0, id_t = 1;
  CUstreamCaptureStatus st;
  CK(cuStreamGetCaptureInfo(s, &st, &id_s, nullptr, nullptr, nullptr, nullptr));
  CK(cuStreamGetCaptureInfo(t, &st, &id_t, nullptr, nullptr, nullptr, nullptr));
  EXPECT_EQ(id_s, id_t);
  CK(append_on(t, 2));  // captured, not run
  CK(cuEventRecord(join, t));
  CK(cuStreamWaitEvent(s, join, 0));
  CK(append_on(s, 3));
  CUgraph graph;
  CK(cuStreamEndCapture(s, &graph));
  EXPECT_EQ(status(t), CU_STREAM_CAPTURE_STATUS_NONE);
  CK(cuStreamSynchronize(t));
  EXPECT_TRUE(read_log().empty());
  CK(append_on(t, 9));  // t runs its own work again
  CK(cuStreamSynchronize(t));
  CUgraphExec exec;
  CK(cuGraphInstantiateWithFlags(&exec, graph, 0));
  CK(cuGraphLaunch(exec, s));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(read_log(), (std::vector<int32_t>{9, 1, 2, 3}));
  CK(cuGraphExecDestroy(exec));
  CK(cuGraphDestroy(graph));
  CK(cuEventDestroy(fork));
  CK(cuEventDestroy(join));
}

// A joined stream whose work the origin does not wait for makes the capture fail at its end.
TEST_F(Capture, UnjoinedWorkFailsEndCapture) {
  CUevent fork;
  CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  unsigned long long inv = invalidations();
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuEventRecord(fork, s));
  CK(cuStreamWaitEvent(t, fork, 0));
  CK(append_on(t, 1));
  EXPECT_EQ(cuStreamEndCapture(t, nullptr), CUDA_ERROR_INVALID_VALUE);
  CUgraph graph;
  // Only the origin ends a capture; trying on a joined stream invalidates it.
  EXPECT_EQ(cuStreamEndCapture(t, &graph), CUDA_ERROR_STREAM_CAPTURE_UNMATCHED);
  EXPECT_EQ(invalidations(), inv + 1);
  expect_end_fails(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(status(t), CU_STREAM_CAPTURE_STATUS_NONE);

  inv = invalidations();
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuEventRecord(fork, s));
  CK(cuStreamWaitEvent(t, fork, 0));
  CK(append_on(t, 1));
  expect_end_fails(CUDA_ERROR_STREAM_CAPTURE_UNJOINED);
  EXPECT_EQ(invalidations(), inv + 1);
  EXPECT_EQ(status(t), CU_STREAM_CAPTURE_STATUS_NONE);
  // A fork with no work of its own needs no join.
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuEventRecord(fork, s));
  CK(cuStreamWaitEvent(t, fork, 0));
  CUgraph g2;
  CK(cuStreamEndCapture(s, &g2));
  CK(cuGraphDestroy(g2));
  EXPECT_TRUE(read_log().empty());
  CK(cuEventDestroy(fork));
}

// Waits that would cross a capture's boundary are refused and invalidate what they touch.
TEST_F(Capture, WaitsAcrossCaptureBoundaries) {
  CUevent outside, inside, never;
  for (CUevent* e : {&outside, &inside, &never}) CK(cuEventCreate(e, CU_EVENT_DISABLE_TIMING));
  CK(cuEventRecord(outside, t));
  unsigned long long inv = invalidations();
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuStreamWaitEvent(s, never, 0));  // a never-recorded event holds no work: no dependency
  EXPECT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
  EXPECT_EQ(cuStreamWaitEvent(s, outside, 0), CUDA_ERROR_STREAM_CAPTURE_ISOLATION);
  EXPECT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  expect_end_fails(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  EXPECT_EQ(invalidations(), inv + 1);

  // Two captures: waiting on one's event from the other would merge them.
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuStreamBeginCapture(t, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuEventRecord(inside, s));
  EXPECT_EQ(cuStreamWaitEvent(t, inside, 0), CUDA_ERROR_STREAM_CAPTURE_MERGE);
  EXPECT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  EXPECT_EQ(status(t), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
  EXPECT_EQ(invalidations(), inv + 3);
  // An idle stream cannot join an invalidated capture.
  CUstream idle;
  CK(cuStreamCreate(&idle, CU_STREAM_NON_BLOCKING));
  EXPECT_EQ(cuStreamWaitEvent(idle, inside, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(status(idle), CU_STREAM_CAPTURE_STATUS_NONE);
  CUgraph graph;
  EXPECT_EQ(cuStreamEndCapture(t, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  expect_end_fails(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  // Nor wait on an event of a capture that has ended: it stands for nodes of a graph.
  EXPECT_EQ(cuStreamWaitEvent(idle, inside, 0), CUDA_ERROR_CAPTURED_EVENT);
  CK(cuStreamDestroy(idle));
  for (CUevent e : {outside, inside, never}) CK(cuEventDestroy(e));
}

namespace {

// The potentially unsafe calls simcuda refuses, each made once on the calling thread.
struct UnsafeCall {
  const char* name;
  std::function<CUresult()> call;
};

}  // namespace

// Which threads may make a potentially unsafe call depends on their mode and the captures' modes
// (cuThreadExchangeStreamCaptureMode); a refused call returns CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
// and invalidates the captures it conflicts with.
TEST_F(Capture, PotentiallyUnsafeCallsFollowTheCaptureModes) {
  CUdeviceptr dev;
  CK(cuMemAlloc(&dev, 4096));
  std::vector<uint8_t> host(4096);
  CUevent done;
  CK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
  CK(cuEventRecord(done, t));
  CK(cuStreamSynchronize(t));
  const std::vector<UnsafeCall> calls = {
      {"cuMemAlloc",
       [] {
         CUdeviceptr p;
         CUresult r = cuMemAlloc(&p, 4096);
         if (r == CUDA_SUCCESS) cuMemFree(p);
         return r;
       }},
      {"cuMemFree", [] { return cuMemFree(0x10); }},  // refused before the pointer is looked at
      {"cuMemAllocHost",
       [] {
         void* p;
         CUresult r = cuMemAllocHost(&p, 4096);
         if (r == CUDA_SUCCESS) cuMemFreeHost(p);
         return r;
       }},
      {"cuMemHostRegister",
       [&] {
         CUresult r = cuMemHostRegister(host.data(), host.size(), 0);
         if (r == CUDA_SUCCESS) cuMemHostUnregister(host.data());
         return r;
       }},
      {"cuMemcpyHtoD", [&] { return cuMemcpyHtoD(dev, host.data(), 64); }},
      {"cuMemsetD8", [&] { return cuMemsetD8(dev, 1, 64); }},
      {"cuEventQuery", [&] { return cuEventQuery(done); }},
      {"cuEventSynchronize", [&] { return cuEventSynchronize(done); }},
  };
  struct Case {
    CUstreamCaptureMode capture;  // the capture's mode, begun on this thread
    bool other_thread;            // the call is made on another thread...
    CUstreamCaptureMode thread;   // ...in this mode (this thread stays in global mode)
    bool refused;
  } cases[] = {
      {CU_STREAM_CAPTURE_MODE_GLOBAL, false, CU_STREAM_CAPTURE_MODE_GLOBAL, true},
      {CU_STREAM_CAPTURE_MODE_GLOBAL, true, CU_STREAM_CAPTURE_MODE_GLOBAL, true},
      {CU_STREAM_CAPTURE_MODE_GLOBAL, true, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, false},
      {CU_STREAM_CAPTURE_MODE_GLOBAL, true, CU_STREAM_CAPTURE_MODE_RELAXED, false},
      {CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, false, CU_STREAM_CAPTURE_MODE_GLOBAL, true},
      {CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, true, CU_STREAM_CAPTURE_MODE_GLOBAL, false},
      {CU_STREAM_CAPTURE_MODE_RELAXED, false, CU_STREAM_CAPTURE_MODE_GLOBAL, false},
      {CU_STREAM_CAPTURE_MODE_RELAXED, true, CU_STREAM_CAPTURE_MODE_GLOBAL, false},
  };
  for (const UnsafeCall& c : calls)
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(c.name) + " capture mode " + std::to_string(k.capture) +
                   (k.other_thread ? ", other thread in mode " + std::to_string(k.thread)
                                   : ", capturing thread"));
      unsigned long long inv = invalidations();
      CK(cuStreamBeginCapture(s, k.capture));
      CUresult r = k.other_thread ? on_thread(ctx, k.thread, c.call) : c.call();
      if (k.refused) {
        EXPECT_EQ(r, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        EXPECT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
        EXPECT_EQ(invalidations(), inv + 1);
        expect_end_fails(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
      } else {
        EXPECT_NE(r, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        EXPECT_EQ(status(s), CU_STREAM_CAPTURE_STATUS_ACTIVE);
        EXPECT_EQ(invalidations(), inv);
        CUgraph graph;
        CK(cuStreamEndCapture(s, &graph));
        CK(cuGraphDestroy(graph));
      }
    }
  CK(cuEventDestroy(done));
  CK(cuMemFree(dev));
}

TEST_F(Capture, ThreadCaptureModeIsSwappedPerThread) {
  CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
  CK(cuThreadExchangeStreamCaptureMode(&m));
  EXPECT_EQ(m, CU_STREAM_CAPTURE_MODE_GLOBAL);  // the default
  CUstreamCaptureMode other = CU_STREAM_CAPTURE_MODE_GLOBAL;
  std::thread([&] { cuThreadExchangeStreamCaptureMode(&other); }).join();
  EXPECT_EQ(other, CU_STREAM_CAPTURE_MODE_GLOBAL);  // another thread's own default
  CK(cuThreadExchangeStreamCaptureMode(&m));
  EXPECT_EQ(m, CU_STREAM_CAPTURE_MODE_RELAXED);
  m = static_cast<CUstreamCaptureMode>(7);
  EXPECT_EQ(cuThreadExchangeStreamCaptureMode(&m), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuThreadExchangeStreamCaptureMode(nullptr), CUDA_ERROR_INVALID_VALUE);
}

// Synchronising or querying captured work is refused whatever the modes: the context, the
// capturing stream, a joined stream.
TEST_F(Capture, SynchronisingCapturedWorkIsRefusedInEveryMode) {
  struct Sync {
    const char* name;
    std::function<CUresult()> call;
  } syncs[] = {
      {"cuCtxSynchronize", [] { return cuCtxSynchronize(); }},
      {"cuStreamSynchronize", [&] { return cuStreamSynchronize(s); }},
      {"cuStreamQuery", [&] { return cuStreamQuery(s); }},
  };
  for (const Sync& y : syncs) {
    SCOPED_TRACE(y.name);
    unsigned long long inv = invalidations();
    CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    EXPECT_EQ(on_thread(ctx, CU_STREAM_CAPTURE_MODE_RELAXED, y.call),
              CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    EXPECT_EQ(invalidations(), inv + 1);
    expect_end_fails(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  }
  CUevent fork;
  CK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CK(cuEventRecord(fork, s));
  CK(cuStreamWaitEvent(t, fork, 0));
  EXPECT_EQ(cuStreamSynchronize(t), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  expect_end_fails(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  // Other streams are not captured work: synchronising them is allowed in any mode.
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CK(cuStreamSynchronize(t));
  CK(cuStreamQuery(t));
  CUgraph graph;
  CK(cuStreamEndCapture(s, &graph));
  CK(cuGraphDestroy(graph));
  CK(cuEventDestroy(fork));
}

// While a blocking stream captures, the legacy stream (which every blocking stream implicitly
// synchronises with) cannot be used, in any mode; asking about it is refused without invalidating.
TEST_F(Capture, LegacyStreamBehindACapturingBlockingStream) {
  CUstream b;
  CK(cuStreamCreate(&b, CU_STREAM_DEFAULT));
  CUdeviceptr dev;
  CK(cuMemAlloc(&dev, 64));
  int32_t host = 0;
  struct Use {
    const char* name;
    std::function<CUresult()> call;
  } uses[] = {
      {"launch on the legacy stream", [&] { return append_on(nullptr, 1); }},
      {"cuMemcpyHtoD", [&] { return cuMemcpyHtoD(dev, &host, 4); }},
      {"cuStreamSynchronize(legacy)", [] { return cuStreamSynchronize(CU_STREAM_LEGACY); }},
      {"cuMemsetD8Async(legacy)", [&] { return cuMemsetD8Async(dev, 0, 4, nullptr); }},
  };
  for (const Use& u : uses) {
    SCOPED_TRACE(u.name);
    unsigned long long inv = invalidations();
    CK(cuStreamBeginCapture(b, CU_STREAM_CAPTURE_MODE_RELAXED));
    CUstreamCaptureStatus st;
    EXPECT_EQ(cuStreamIsCapturing(CU_STREAM_LEGACY, &st), CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    EXPECT_EQ(status(b), CU_STREAM_CAPTURE_STATUS_ACTIVE);
    EXPECT_EQ(on_thread(ctx, CU_STREAM_CAPTURE_MODE_RELAXED, u.call),
              CUDA_ERROR_STREAM_CAPTURE_IMPLICIT);
    EXPECT_EQ(status(b), CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    EXPECT_EQ(invalidations(), inv + 1);
    CUgraph graph;
    EXPECT_EQ(cuStreamEndCapture(b, &graph), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  }
  // A non-blocking stream's capture leaves the legacy stream usable.
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  CK(append_on(nullptr, 4));
  CK(cuStreamSynchronize(nullptr));
  CUgraph graph;
  CK(cuStreamEndCapture(s, &graph));
  CK(cuGraphDestroy(graph));
  EXPECT_EQ(read_log(), std::vector<int32_t>{4});
  CK(cuStreamDestroy(b));
  CK(cuMemFree(dev));
}

// Batch copies cannot be captured: the driver refuses them on a capturing stream.
TEST_F(Capture, BatchCopiesAreRefusedOnACapturingStream) {
  CUdeviceptr dev;
  CK(cuMemAlloc(&dev, 64));
  uint8_t host[64] = {};
  CUdeviceptr dsts[] = {dev}, srcs[] = {reinterpret_cast<CUdeviceptr>(host)};
  size_t sizes[] = {64}, idx[] = {0};
  CUmemcpyAttributes attr{};
  attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  unsigned long long inv = invalidations();
  CK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 1, &attr, idx, 1, s),
            CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
  EXPECT_EQ(invalidations(), inv + 1);
  expect_end_fails(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
  CK(cuMemFree(dev));
}
