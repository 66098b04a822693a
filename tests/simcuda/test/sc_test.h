// sc_test.h: shared fixture for simcuda's tests: initialise, make the primary context current,
// and find the test kernel modules.
#pragma once

#include <cuda.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <string>

#define CK(call) ASSERT_EQ((call), CUDA_SUCCESS) << #call

inline std::string module_path(const char* name) {
  const char* dir = std::getenv("SIMCUDA_TEST_MODULE_DIR");
  return std::string(dir ? dir : ".") + "/" + name + ".so";
}

// Holds a stream at a host function until released, so tests can observe "still busy" states
// without depending on timing. Gates are heap-allocated and never freed: a worker may still be
// leaving wait() after release() when a failing test unwinds.
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  static Gate* make() { return new Gate; }
  static void CUDA_CB wait(void* p) {
    auto* g = static_cast<Gate*>(p);
    std::unique_lock lk(g->m);
    g->cv.wait(lk, [&] { return g->open; });
  }
  CUresult block(CUstream s) { return cuLaunchHostFunc(s, wait, this); }
  void release() {
    {
      std::lock_guard lk(m);
      open = true;
    }
    cv.notify_all();
  }
};

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
