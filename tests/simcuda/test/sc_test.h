// sc_test.h: shared fixture for simcuda's tests: initialise, make the primary context current,
// and find the test kernel modules.
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#define CK(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call

inline std::string module_path(const char* name) {
  const char* dir = std::getenv("SIMCUDA_TEST_MODULE_DIR");
  return std::string(dir ? dir : ".") + "/" + name + ".so";
}

class Sim : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
    ASSERT_EQ(cuDeviceGet(&dev, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuDevicePrimaryCtxRetain(&ctx, dev), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxSetCurrent(ctx), CUDA_SUCCESS);
  }
  void TearDown() override {
    cuCtxSynchronize();
    cuDevicePrimaryCtxRelease(dev);
  }
  void load_kernels() {
    ASSERT_EQ(cuModuleLoad(&mod, module_path("test_kernels").c_str()), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&append, mod, "append"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&sleep_append, mod, "sleep_append"), CUDA_SUCCESS);
    ASSERT_EQ(cuModuleGetFunction(&busy, mod, "busy"), CUDA_SUCCESS);
  }
  // Launches append/sleep_append(log, counter, id) on s.
  CUresult launch_append(CUfunction f, CUstream s, int32_t* log, int32_t* counter, int32_t id) {
    void* args[] = {&log, &counter, &id};
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, nullptr);
  }
  CUdevice dev = 0;
  CUcontext ctx = nullptr;
  CUmodule mod = nullptr;
  CUfunction append = nullptr, sleep_append = nullptr, busy = nullptr;
};
