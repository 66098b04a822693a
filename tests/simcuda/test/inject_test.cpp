// inject_test.cpp: driver error injection. Every exported entry point honours an armed failure;
// a failed call has no side effect (nothing enqueued, mapped, unmapped or charged, no output
// written); N, N+ and =CODE work as documented, through cuGetProcAddress too; SIMCUDA_FAIL arms
// the same rules at the first cuInit and a malformed value makes cuInit fail.
#include <dlfcn.h>

#include <string>
#include <vector>

#include "sc_test.h"
#include "simcuda.h"

extern "C" size_t simcuda_api_table(const char** names, int* versions, void** fns, void** pt_fns,
                                    size_t cap);

namespace {

unsigned long long counter(const char* name) {
  unsigned long long v = 0;
  EXPECT_EQ(simcudaGetCounter(name, &v), 0) << name;
  return v;
}

// Disarms whatever a test armed, so that a failing test does not poison the next one.
class Inject : public Sim {
 protected:
  void TearDown() override {
    simcudaInjectFailure(nullptr);
    Sim::TearDown();
  }
};

CUmemAllocationProp dev_prop(int dev) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  return p;
}

size_t free_bytes() {
  size_t f = 0, t = 0;
  EXPECT_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
  return f;
}

}  // namespace

// Each entry point is called through a pointer with no arguments: an armed call must return its
// code before it reads any argument, so a missing check shows up as a wrong code or a crash.
TEST_F(Inject, EveryExportedEntryPointHonoursAnArmedFailure) {
  size_t n = simcuda_api_table(nullptr, nullptr, nullptr, nullptr, 0);
  std::vector<const char*> names(n);
  std::vector<void*> fns(n), pts(n);
  simcuda_api_table(names.data(), nullptr, fns.data(), pts.data(), n);
  std::vector<void*> all;
  for (size_t i = 0; i < n; ++i)
    for (void* f : {fns[i], pts[i]})
      if (f && std::find(all.begin(), all.end(), f) == all.end()) all.push_back(f);
  ASSERT_GT(all.size(), 200u);
  const CUresult code = static_cast<CUresult>(4242);
  for (void* f : all) {
    Dl_info info{};
    ASSERT_NE(dladdr(f, &info), 0);
    ASSERT_NE(info.dli_sname, nullptr);
    std::string sym = info.dli_sname;
    SCOPED_TRACE(sym);
    ASSERT_EQ(simcudaInjectFailure((sym + ":1=4242").c_str()), 0);
    unsigned long long calls = counter(("calls:" + sym).c_str());
    unsigned long long injected = counter("failures_injected");
    EXPECT_EQ(reinterpret_cast<CUresult (*)()>(f)(), code);
    EXPECT_EQ(counter(("calls:" + sym).c_str()), calls + 1);
    EXPECT_EQ(counter("failures_injected"), injected + 1);
  }
}

TEST_F(Inject, NthCallOnlyThenEveryLaterCall) {
  CUdeviceptr p = 0;
  ASSERT_EQ(simcudaInjectFailure("cuMemAlloc_v2:2, cuMemAlloc_v2:4+=CUDA_ERROR_OUT_OF_MEMORY"), 0);
  CK(cuMemAlloc(&p, 4096));
  CK(cuMemFree(p));
  EXPECT_EQ(cuMemAlloc(&p, 4096), CUDA_ERROR_UNKNOWN);  // the default code, 999
  CK(cuMemAlloc(&p, 4096));
  CK(cuMemFree(p));
  for (int i = 0; i < 3; ++i) EXPECT_EQ(cuMemAlloc(&p, 4096), CUDA_ERROR_OUT_OF_MEMORY);
  // Re-arming restarts the count for the named symbol.
  ASSERT_EQ(simcudaInjectFailure("cuMemAlloc_v2:2=2"), 0);
  CK(cuMemAlloc(&p, 4096));
  CK(cuMemFree(p));
  EXPECT_EQ(cuMemAlloc(&p, 4096), CUDA_ERROR_OUT_OF_MEMORY);  // 2 is CUDA_ERROR_OUT_OF_MEMORY
  CK(cuMemAlloc(&p, 4096));
  CK(cuMemFree(p));
  ASSERT_EQ(simcudaInjectFailure(""), 0);
  CK(cuMemAlloc(&p, 4096));
  CK(cuMemFree(p));
}

TEST_F(Inject, MalformedSpecsAreRefusedAndKeepTheCurrentList) {
  ASSERT_EQ(simcudaInjectFailure("cuCtxSynchronize:1"), 0);
  for (const char* bad : {"cuMemAlloc", "cuMemAlloc_v2:", "cuMemAlloc_v2:0", "cuMemAlloc_v2:x",
                          "cuNoSuchThing:1", "cuMemAlloc_v2:1=", "cuMemAlloc_v2:1=0",
                          "cuMemAlloc_v2:1=CUDA_ERROR_NOPE", "cuMemAlloc_v2:1,", "cuMemAlloc:1"})
    EXPECT_EQ(simcudaInjectFailure(bad), -1) << bad;
  EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_UNKNOWN);
  CK(cuCtxSynchronize());
}

// A failure reached through cuGetProcAddress is counted under the ABI symbol it resolves to.
TEST_F(Inject, CallsThroughProcAddressAreCountedByAbiSymbol) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st;
  CK(cuGetProcAddress("cuMemsetD32Async", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                      &st));
  auto memset_pt = reinterpret_cast<CUresult (*)(CUdeviceptr, unsigned, size_t, CUstream)>(fn);
  CUdeviceptr p;
  CK(cuMemAlloc(&p, 64));
  ASSERT_EQ(simcudaInjectFailure("cuMemsetD32Async_ptsz:1"), 0);
  unsigned long long base = counter("calls:cuMemsetD32Async");
  EXPECT_EQ(memset_pt(p, 7, 16, nullptr), CUDA_ERROR_UNKNOWN);
  CK(cuMemsetD32Async(p, 7, 16, nullptr));  // the base form is a different symbol
  CK(memset_pt(p, 7, 16, nullptr));
  EXPECT_EQ(counter("calls:cuMemsetD32Async"), base + 1);
  CK(cuCtxSynchronize());
  CK(cuMemFree(p));
}

// An injected copy enqueues nothing: the stream runs only what was really enqueued, and the
// destination keeps its bytes.
TEST_F(Inject, FailedCopiesAndLaunchesEnqueueNothing) {
  load_kernels();
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr d, log, ctr;
  CK(cuMemAlloc(&d, 4096));
  CK(cuMemAlloc(&log, 64));
  CK(cuMemAlloc(&ctr, 4));
  CK(cuMemsetD8(d, 0x11, 4096));
  CK(cuMemsetD32(ctr, 0, 1));
  std::vector<uint8_t> host(4096, 0x22), back(4096, 0);
  unsigned long long h2d = counter("h2d_copies");
  ASSERT_EQ(simcudaInjectFailure("cuMemcpyHtoDAsync_v2:1=CUDA_ERROR_LAUNCH_FAILED,"
                                 "cuMemcpyDtoHAsync_v2:1,cuLaunchKernel:1,cuMemsetD8Async:1,"
                                 "cuEventRecord:1"),
            0);
  EXPECT_EQ(cuMemcpyHtoDAsync(d, host.data(), 4096, s), CUDA_ERROR_LAUNCH_FAILED);
  EXPECT_EQ(cuMemcpyDtoHAsync(back.data(), d, 4096, s), CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(cuMemsetD8Async(d, 0x33, 4096, s), CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(
      launch_append(append, s, reinterpret_cast<int32_t*>(log), reinterpret_cast<int32_t*>(ctr), 1),
      CUDA_ERROR_UNKNOWN);
  CUevent e;
  CK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
  Gate* gate = Gate::make();
  CK(gate->block(s));
  EXPECT_EQ(cuEventRecord(e, s), CUDA_ERROR_UNKNOWN);
  CK(cuEventQuery(e));  // never recorded: complete, although its stream is held
  gate->release();
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(counter("h2d_copies"), h2d);
  CK(cuMemcpyDtoH(back.data(), d, 4096));
  EXPECT_EQ(back, std::vector<uint8_t>(4096, 0x11));
  int32_t n = -1;
  CK(cuMemcpyDtoH(&n, ctr, 4));
  EXPECT_EQ(n, 0);
  CK(cuEventDestroy(e));
  CK(cuStreamDestroy(s));
  for (CUdeviceptr p : {d, log, ctr}) CK(cuMemFree(p));
}

// Failed VMM calls change no mapping, no handle and no capacity; failed allocations write no
// pointer.
TEST_F(Inject, FailedVmmAndAllocationCallsChangeNothing) {
  CUmemAllocationProp prop = dev_prop(dev);
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  size_t f0 = free_bytes();
  ASSERT_EQ(simcudaInjectFailure("cuMemCreate:1,cuMemAlloc_v2:1,cuMemAllocHost_v2:1,"
                                 "cuMemAllocAsync:1"),
            0);
  CUmemGenericAllocationHandle h = 77;
  EXPECT_EQ(cuMemCreate(&h, gran, &prop, 0), CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(h, 77u);
  CUdeviceptr p = 0x1234;
  EXPECT_EQ(cuMemAlloc(&p, 4096), CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(cuMemAllocAsync(&p, 4096, nullptr), CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(p, 0x1234u);
  void* hp = reinterpret_cast<void*>(0x5678);
  EXPECT_EQ(cuMemAllocHost(&hp, 4096), CUDA_ERROR_UNKNOWN);
  EXPECT_EQ(hp, reinterpret_cast<void*>(0x5678));
  EXPECT_EQ(free_bytes(), f0);

  CK(cuMemCreate(&h, gran, &prop, 0));
  CUdeviceptr va;
  CK(cuMemAddressReserve(&va, gran, 0, 0, 0));
  ASSERT_EQ(simcudaInjectFailure("cuMemMap:1,cuMemSetAccess:1,cuMemUnmap:1,cuMemRelease:1"), 0);
  EXPECT_EQ(cuMemMap(va, gran, 0, h, 0), CUDA_ERROR_UNKNOWN);
  unsigned long long flags = 0;
  CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, dev};
  EXPECT_EQ(cuMemGetAccess(&flags, &loc, va), CUDA_ERROR_INVALID_VALUE);  // still unmapped
  CK(cuMemMap(va, gran, 0, h, 0));
  CUmemAccessDesc acc{};
  acc.location = loc;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  EXPECT_EQ(cuMemSetAccess(va, gran, &acc, 1), CUDA_ERROR_UNKNOWN);
  CK(cuMemGetAccess(&flags, &loc, va));
  EXPECT_EQ(flags, static_cast<unsigned long long>(CU_MEM_ACCESS_FLAGS_PROT_NONE));
  CK(cuMemSetAccess(va, gran, &acc, 1));
  CK(cuMemsetD32(va, 0xabcd, gran / 4));
  EXPECT_EQ(cuMemUnmap(va, gran), CUDA_ERROR_UNKNOWN);
  uint32_t word = 0;
  CK(cuMemcpyDtoH(&word, va + gran - 4, 4));  // still mapped, data intact
  EXPECT_EQ(word, 0xabcdu);
  EXPECT_EQ(cuMemRelease(h), CUDA_ERROR_UNKNOWN);
  CK(cuMemUnmap(va, gran));
  CK(cuMemRelease(h));  // the handle was still held: this release frees it
  EXPECT_EQ(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(free_bytes(), f0);
  CK(cuMemAddressFree(va, gran));
}

// Settings are read by the first cuInit, so these run in re-executed children that set them first.
static bool fail_env_child() {
  setenv("SIMCUDA_FAIL", "cuMemAlloc_v2:2=CUDA_ERROR_OUT_OF_MEMORY,cuInit:1", 1);
  CUdevice d;
  CUcontext c;
  CUdeviceptr p;
  if (cuInit(0) != CUDA_ERROR_UNKNOWN) return false;  // the first cuInit itself fails...
  if (cuDeviceGet(&d, 0) != CUDA_ERROR_NOT_INITIALIZED) return false;  // ...doing nothing
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c))
    return false;
  return cuMemAlloc(&p, 64) == CUDA_SUCCESS && cuMemAlloc(&p, 64) == CUDA_ERROR_OUT_OF_MEMORY &&
         cuMemAlloc(&p, 64) == CUDA_SUCCESS;
}

TEST(SimcudaFailEnv, ArmsRulesAtTheFirstCuInit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(fail_env_child() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}

static bool malformed_env_child() {
  setenv("SIMCUDA_FAIL", "cuMemAlloc_v2:two", 1);
  return cuInit(0) == CUDA_ERROR_INVALID_VALUE && cuInit(0) == CUDA_ERROR_INVALID_VALUE;
}

TEST(SimcudaFailEnv, MalformedValueFailsCuInitWithOneLine) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(malformed_env_child() ? 0 : 1), ::testing::ExitedWithCode(0),
              "^simcuda: SIMCUDA_FAIL: cannot parse 'cuMemAlloc_v2:two'[^\n]*\n$");
}
