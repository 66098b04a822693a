// procaddr_test.cpp: cuGetProcAddress version and per-thread-stream handling, and that every
// entry of simcuda's API table is exported under its ABI name.
#include <dlfcn.h>

#include <string>
#include <vector>

#include "sc_test.h"

extern "C" size_t simcuda_api_table(const char** names, int* versions, void** fns, void** pt_fns,
                                    size_t cap);

TEST_F(Sim, ProcAddressHonoursVersion) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st;
  CK(cuGetProcAddress("cuMemAlloc", &fn, 12000, 0, &st));
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS);
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
  EXPECT_EQ(cuGetProcAddress("cuMemAlloc", &fn, 3000, 0, &st), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
  EXPECT_EQ(cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);

  CK(cuGetProcAddress("cuStreamBeginCapture", &fn, 10000, 0, &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuStreamBeginCapture"));
  CK(cuGetProcAddress("cuStreamBeginCapture", &fn, 10010, 0, &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuStreamBeginCapture_v2"));
  CK(cuGetProcAddress("cuCtxCreate", &fn, 11000, 0, &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuCtxCreate_v2"));
  CK(cuGetProcAddress("cuCtxCreate", &fn, 13000, 0, &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuCtxCreate_v4"));
  CK(cuGetProcAddress("cuEventElapsedTime", &fn, 12000, 0, &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuEventElapsedTime"));
  CK(cuGetProcAddress("cuEventElapsedTime", &fn, 12080, 0, &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuEventElapsedTime_v2"));
  // CUDA 13.0 gave cuCtxSynchronize and cuCtxGetDevice a context argument under their base names.
  CK(cuGetProcAddress("cuCtxSynchronize", &fn, 12090, 0, &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuCtxSynchronize"));
  CK(cuGetProcAddress("cuCtxSynchronize", &fn, 13000, 0, &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuCtxSynchronize_v2"));
  CK(cuGetProcAddress("cuCtxGetDevice", &fn, 13000, 0, &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuCtxGetDevice_v2"));

  // The older ABI without the status argument.
  using OldGpa = CUresult (*)(const char*, void**, int, cuuint64_t);
  auto old = reinterpret_cast<OldGpa>(dlsym(RTLD_DEFAULT, "cuGetProcAddress"));
  ASSERT_NE(old, nullptr);
  CK(old("cuMemFree", &fn, 12000, 0));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemFree_v2"));
}

// The 13.0 forms take a context, nullptr meaning the current one; a context that is not live is
// refused rather than taken for the current one.
TEST_F(Sim, CtxSynchronizeAndGetDeviceNameTheirContext) {
  void* fn = nullptr;
  CK(cuGetProcAddress("cuCtxSynchronize", &fn, 13000, 0, nullptr));
  auto sync = reinterpret_cast<CUresult (*)(CUcontext)>(fn);
  CK(cuGetProcAddress("cuCtxGetDevice", &fn, 13000, 0, nullptr));
  auto get_device = reinterpret_cast<CUresult (*)(CUdevice*, CUcontext)>(fn);
  CUcontext current = nullptr;
  CK(cuCtxGetCurrent(&current));
  ASSERT_NE(current, nullptr);
  EXPECT_EQ(sync(nullptr), CUDA_SUCCESS);
  EXPECT_EQ(sync(current), CUDA_SUCCESS);
  CUdevice dev = -1;
  CK(get_device(&dev, current));
  EXPECT_EQ(dev, 0);
  dev = -1;
  CK(get_device(&dev, nullptr));
  EXPECT_EQ(dev, 0);
  int not_a_context = 0;
  auto bogus = reinterpret_cast<CUcontext>(&not_a_context);
  EXPECT_EQ(sync(bogus), CUDA_ERROR_INVALID_CONTEXT);
  EXPECT_EQ(get_device(&dev, bogus), CUDA_ERROR_INVALID_CONTEXT);
}

TEST_F(Sim, ProcAddressPerThreadStreamFlag) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st;
  CK(cuGetProcAddress("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                      &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"));
  CK(cuGetProcAddress("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuLaunchKernel"));
  CK(cuGetProcAddress("cuMemcpyHtoD", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                      &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemcpyHtoD_v2_ptds"));
  CK(cuGetProcAddress("cuMemsetD32Async", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                      &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemsetD32Async_ptsz"));
  // No per-thread form: the flag falls back to the only one.
  CK(cuGetProcAddress("cuMemAlloc", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                      &st));
  EXPECT_EQ(fn, dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"));
}

TEST(SimcudaExports, EveryTableEntryIsExported) {
  size_t n = simcuda_api_table(nullptr, nullptr, nullptr, nullptr, 0);
  ASSERT_GT(n, 100u);
  std::vector<const char*> names(n);
  std::vector<void*> fns(n), pts(n);
  simcuda_api_table(names.data(), nullptr, fns.data(), pts.data(), n);
  Dl_info info;
  for (size_t i = 0; i < n; ++i) {
    ASSERT_NE(dladdr(fns[i], &info), 0) << names[i];
    ASSERT_NE(info.dli_sname, nullptr) << names[i];
    EXPECT_EQ(dlsym(RTLD_DEFAULT, info.dli_sname), fns[i]) << names[i];
    if (pts[i]) {
      ASSERT_NE(dladdr(pts[i], &info), 0) << names[i];
      std::string s = info.dli_sname;
      EXPECT_TRUE(s.ends_with("_ptsz") || s.ends_with("_ptds")) << s;
      EXPECT_EQ(dlsym(RTLD_DEFAULT, s.c_str()), pts[i]) << s;
    }
  }
}
