// many_streams_test.cpp: 128 user streams and the per-thread default streams of 16 threads, used
// at once, as the preload library's tests drive simcuda. Each thread runs a chain of kernels that
// alternates between user streams (blocking and non-blocking) and its own per-thread default
// stream, ordered only by event waits, with synchronous copies on the legacy stream in between;
// every step checks that the one before it had run.
#include <thread>
#include <vector>

#include "sc_test.h"

extern "C" {
CUresult cuLaunchKernel_ptsz(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void**, void**);
CUresult cuEventRecord_ptsz(CUevent, CUstream);
CUresult cuStreamWaitEvent_ptsz(CUstream, CUevent, unsigned);
CUresult cuStreamSynchronize_ptsz(CUstream);
}

TEST_F(Sim, ManyStreamsAndPerThreadStreamsFromSixteenThreads) {
  load_kernels();
  CUfunction step;
  CK(cuModuleGetFunction(&step, mod, "step"));
  constexpr int kStreams = 128, kThreads = 16, kRounds = 60;
  std::vector<CUstream> streams(kStreams);
  for (int i = 0; i < kStreams; ++i)
    CK(cuStreamCreateWithPriority(&streams[i], i % 2 ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT,
                                  -(i % 3)));
  CUdeviceptr counters, errors;
  CK(cuMemAlloc(&counters, kThreads * sizeof(uint64_t)));
  CK(cuMemAlloc(&errors, sizeof(uint64_t)));
  CK(cuMemsetD8(counters, 0, kThreads * sizeof(uint64_t)));
  CK(cuMemsetD8(errors, 0, sizeof(uint64_t)));
  std::vector<CUresult> result(kThreads, CUDA_ERROR_UNKNOWN);
  std::vector<uint64_t> seen(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      auto fail = [&](CUresult r) { return (result[t] = r) != CUDA_SUCCESS; };
      if (fail(cuCtxSetCurrent(ctx))) return;
      CUevent on_user, on_own;
      if (fail(cuEventCreate(&on_user, CU_EVENT_DISABLE_TIMING)) ||
          fail(cuEventCreate(&on_own, CU_EVENT_DISABLE_TIMING)))
        return;
      auto* counter = reinterpret_cast<uint64_t*>(counters) + t;
      auto* errs = reinterpret_cast<uint64_t*>(errors);
      uint64_t expect = 0;
      void* args[] = {&counter, &expect, &errs};
      for (int r = 0; r < kRounds; ++r) {
        CUstream user = streams[(t * 37 + r * 11) % kStreams];
        // The user stream's step follows this thread's previous step on its own stream...
        if (r > 0 && fail(cuStreamWaitEvent(user, on_own, 0))) return;
        if (fail(cuLaunchKernel(step, 1, 1, 1, 1, 1, 1, 0, user, args, nullptr))) return;
        ++expect;
        if (fail(cuEventRecord(on_user, user))) return;
        // ...and the per-thread default stream's step follows the user stream's.
        if (fail(cuStreamWaitEvent_ptsz(nullptr, on_user, 0))) return;
        if (fail(cuLaunchKernel_ptsz(step, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr))) return;
        ++expect;
        if (fail(cuEventRecord_ptsz(on_own, nullptr))) return;
        if (r % 20 == 19) {  // a synchronous copy: the legacy stream meets every blocking stream
          uint64_t v = 0;
          if (fail(cuMemcpyDtoH(&v, reinterpret_cast<CUdeviceptr>(counter), sizeof v))) return;
        }
      }
      if (fail(cuStreamSynchronize_ptsz(nullptr))) return;
      seen[t] = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
      if (fail(cuEventDestroy(on_user)) || fail(cuEventDestroy(on_own))) return;
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(result[t], CUDA_SUCCESS) << "thread " << t;
    EXPECT_EQ(seen[t], 2u * kRounds) << "thread " << t;
  }
  CK(cuCtxSynchronize());
  uint64_t errs = 1;
  CK(cuMemcpyDtoH(&errs, errors, sizeof errs));
  EXPECT_EQ(errs, 0u) << "steps that ran before the step they follow";
  for (CUstream s : streams) CK(cuStreamDestroy(s));
  CK(cuMemFree(counters));
  CK(cuMemFree(errors));
}
