// simcuda_test.cpp: devices, contexts, initialisation and error strings.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "sc_test.h"
#include "simcuda.h"

TEST(SimcudaInit, CallsBeforeCuInitFail) {
  // The "threadsafe" style re-executes the binary for the child, so it has never called cuInit.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int n = -1;
        CUdeviceptr p;
        bool ok = cuDeviceGetCount(&n) == CUDA_ERROR_NOT_INITIALIZED &&
                  cuMemAlloc(&p, 16) == CUDA_ERROR_NOT_INITIALIZED && cuInit(0) == CUDA_SUCCESS &&
                  cuDeviceGetCount(&n) == CUDA_SUCCESS && n >= 1;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(Sim, DeviceQueries) {
  int n = 0;
  CK(cuDeviceGetCount(&n));
  EXPECT_GE(n, 1);
  char name[128];
  CK(cuDeviceGetName(name, sizeof name, dev));
  EXPECT_EQ(std::strncmp(name, SIMCUDA_DEVICE_NAME_PREFIX, strlen(SIMCUDA_DEVICE_NAME_PREFIX)), 0);
  int v = 0;
  CK(cuDriverGetVersion(&v));
  EXPECT_EQ(v, 13000);
  CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
  EXPECT_EQ(v, 1);
  CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, dev));
  EXPECT_EQ(v, 1);
  CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
  EXPECT_EQ(v, 9);
  CK(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
  EXPECT_GT(v, 0);
  size_t total = 0;
  CK(cuDeviceTotalMem(&total, dev));
  EXPECT_EQ(total, 1ull << 30);  // SIMCUDA_CAPACITY=1GiB in the test environment
  CUuuid a, b;
  CK(cuDeviceGetUuid(&a, dev));
  CK(cuDeviceGetUuid(&b, dev));
  EXPECT_EQ(std::memcmp(a.bytes, b.bytes, 16), 0);
  CUdevice bad;
  EXPECT_EQ(cuDeviceGet(&bad, 99), CUDA_ERROR_INVALID_DEVICE);
}

TEST_F(Sim, ContextStackAndNoContextThreads) {
  CUcontext c2 = nullptr, cur = nullptr;
  CK(cuCtxCreate(&c2, nullptr, 0, dev));
  CK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, c2);
  CUcontext popped = nullptr;
  CK(cuCtxPopCurrent(&popped));
  EXPECT_EQ(popped, c2);
  CK(cuCtxGetCurrent(&cur));
  EXPECT_EQ(cur, ctx);
  CK(cuCtxPushCurrent(c2));
  CK(cuCtxPopCurrent(nullptr));
  CK(cuCtxDestroy(c2));
  EXPECT_EQ(cuCtxPushCurrent(c2), CUDA_ERROR_INVALID_CONTEXT);

  // A fresh thread has no current context: cuCtxGetDevice answers 201.
  CUresult r = CUDA_SUCCESS;
  std::thread([&] {
    CUdevice d;
    r = cuCtxGetDevice(&d);
  }).join();
  EXPECT_EQ(r, CUDA_ERROR_INVALID_CONTEXT);
  CUdevice d = -1;
  CK(cuCtxGetDevice(&d));
  EXPECT_EQ(d, dev);
}

TEST_F(Sim, ErrorStrings) {
  const char* s = nullptr;
  for (CUresult e : {CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_OUT_OF_MEMORY,
                     CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_INVALID_HANDLE, CUDA_ERROR_NOT_READY,
                     CUDA_ERROR_INVALID_IMAGE, CUDA_ERROR_NOT_FOUND,
                     CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, CUDA_ERROR_INVALID_CONTEXT,
                     CUDA_ERROR_NOT_SUPPORTED, CUDA_ERROR_STREAM_CAPTURE_INVALIDATED}) {
    CK(cuGetErrorName(e, &s));
    ASSERT_NE(s, nullptr);
    CK(cuGetErrorString(e, &s));
    ASSERT_NE(s, nullptr);
  }
  CK(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
  EXPECT_STREQ(s, "CUDA_ERROR_OUT_OF_MEMORY");
  EXPECT_EQ(cuGetErrorName(static_cast<CUresult>(123456), &s), CUDA_ERROR_INVALID_VALUE);
  const void* table = nullptr;
  CUuuid id{};
  EXPECT_EQ(cuGetExportTable(&table, &id), CUDA_ERROR_NOT_SUPPORTED);
}

TEST_F(Sim, ForkedChildWithoutCudaWorks) {
  CUstream s;
  CK(cuStreamCreate(&s, 0));
  pid_t pid = fork();
  if (pid == 0) _exit(7);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
  CK(cuStreamDestroy(s));
}

// The README's settings table must list every setting of settings.def with its default.
TEST(SimcudaReadme, SettingsTableMatchesDeclarations) {
  std::ifstream f(SIMCUDA_README);
  ASSERT_TRUE(f.good()) << SIMCUDA_README;
  std::vector<std::string> rows;
  for (std::string line; std::getline(f, line);)
    if (line.rfind("| `SIMCUDA_", 0) == 0) rows.push_back(line);
  size_t declared = 0;
#define SC_SETTING(ident, env, type, dflt, doc)                                         \
  ++declared;                                                                           \
  EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [](const std::string& r) {          \
    std::string shown = *dflt ? std::string("`") + dflt + "`" : std::string("unset");   \
    return r.find(std::string("| `") + env + "` | " + shown + " | " + doc + " |") == 0; \
  })) << env;
#include "settings.def"
#undef SC_SETTING
  EXPECT_EQ(rows.size(), declared);
}

// The README's counter table must list every counter of counters.def with its meaning.
TEST(SimcudaReadme, CounterTableMatchesDeclarations) {
  std::ifstream f(SIMCUDA_README);
  ASSERT_TRUE(f.good()) << SIMCUDA_README;
  // The rows of the table under the "| Counter | Meaning |" header.
  std::vector<std::string> rows;
  bool in_table = false;
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("| Counter | Meaning |", 0) == 0) in_table = true;
    if (in_table && line.rfind("|", 0) != 0) break;
    if (in_table && line.rfind("| `", 0) == 0) rows.push_back(line);
  }
  size_t declared = 0;
#define SC_COUNTER(name, doc)                                                  \
  ++declared;                                                                  \
  EXPECT_TRUE(std::any_of(rows.begin(), rows.end(), [](const std::string& r) { \
    return r == std::string("| `") + #name + "` | " + doc + " |";              \
  })) << #name;
#include "counters.def"
#undef SC_COUNTER
  // One more row: calls:<ABI symbol>.
  EXPECT_EQ(rows.size(), declared + 1);
}

// Settings are read by the first cuInit, so this runs in a re-executed child that sets them first.
static bool several_devices_child() {
  setenv("SIMCUDA_DEVICE_COUNT", "2", 1);
  setenv("SIMCUDA_CAPACITY", "64MiB", 1);
  setenv("SIMCUDA_GRANULARITY", "64KiB", 1);
  int n = 0;
  CUcontext c0 = nullptr, c1 = nullptr;
  CUdeviceptr p = 0;
  size_t f0 = 0, f1 = 0, t = 0, gran = 0;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  if (cuInit(0) || cuDeviceGetCount(&n) || n != 2) return false;
  if (cuDevicePrimaryCtxRetain(&c0, 0) || cuDevicePrimaryCtxRetain(&c1, 1) || c0 == c1)
    return false;
  if (cuCtxSetCurrent(c1) || cuMemAlloc(&p, 16 << 20) || cuMemGetInfo(&f1, &t)) return false;
  if (t != (64u << 20) || f1 != (48u << 20)) return false;
  if (cuCtxSetCurrent(c0) || cuMemGetInfo(&f0, &t) || f0 != (64u << 20)) return false;
  if (cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ||
      gran != (64u << 10))
    return false;
  return cuMemAlloc(&p, 65u << 20) == CUDA_ERROR_OUT_OF_MEMORY;
}

TEST(SimcudaSettings, SeveralDevicesWithTheirOwnCapacity) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(std::exit(several_devices_child() ? 0 : 1), ::testing::ExitedWithCode(0), "");
}
