// counters_test.cpp: simcudaGetCounter (calls per ABI symbol, synchronisations, copies) and the
// JSON file SIMCUDA_STATS_FILE names, written when the process exits.
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sc_test.h"
#include "simcuda.h"

namespace {

unsigned long long counter(const char* name) {
  unsigned long long v = 0;
  EXPECT_EQ(simcudaGetCounter(name, &v), 0) << name;
  return v;
}

// The change of every named counter across a piece of work.
struct Delta {
  std::vector<std::string> names;
  std::vector<unsigned long long> base;
  explicit Delta(std::vector<std::string> n) : names(std::move(n)) {
    for (const auto& s : names) base.push_back(counter(s.c_str()));
  }
  unsigned long long operator()(const std::string& name) const {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == name) return counter(name.c_str()) - base[i];
    ADD_FAILURE() << name << " not tracked";
    return 0;
  }
};

}  // namespace

TEST_F(Sim, CountersNameEveryEntryPointAndRefuseUnknownNames) {
  unsigned long long v = 7;
  EXPECT_EQ(simcudaGetCounter("calls:cuNoSuchThing", &v), -1);
  EXPECT_EQ(simcudaGetCounter("no_such_counter", &v), -1);
  EXPECT_EQ(simcudaGetCounter("calls:cuMemAlloc", &v), -1);  // a name, not an ABI symbol
  EXPECT_EQ(simcudaGetCounter(nullptr, &v), -1);
  EXPECT_EQ(v, 7u);
  for (const char* name :
       {"calls:cuLaunchKernel_ptsz", "calls:cuMemcpyHtoD_v2_ptds",
        "calls:cuGraphInstantiateWithFlags", "ctx_synchronize", "device_wide_syncs",
        "stream_synchronize", "event_synchronize", "capture_invalidations", "h2d_copies",
        "h2d_bytes", "d2h_copies", "d2h_bytes", "failures_injected"})
    EXPECT_EQ(simcudaGetCounter(name, &v), 0) << name;
}

TEST_F(Sim, CountersFollowCallsSynchronisationsAndCopies) {
  Delta d({"calls:cuCtxSynchronize", "ctx_synchronize", "device_wide_syncs", "stream_synchronize",
           "event_synchronize", "h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes",
           "calls:cuMemcpyHtoDAsync_v2", "calls:cuStreamSynchronize"});
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr p;
  CK(cuMemAlloc(&p, 1000));
  std::vector<uint8_t> host(1000, 3);
  CK(cuMemcpyHtoDAsync(p, host.data(), 1000, s));
  CK(cuMemcpyHtoDAsync(p, host.data(), 500, s));
  CK(cuMemcpyDtoH(host.data(), p, 100));  // synchronous: legacy stream
  CUevent e;
  CK(cuEventCreate(&e, 0));
  CK(cuEventRecord(e, s));
  CK(cuEventSynchronize(e));
  CK(cuStreamSynchronize(s));
  CK(cuCtxSynchronize());
  CK(cuMemFree(p));  // waits for the context's work as on a real driver
  EXPECT_EQ(d("calls:cuCtxSynchronize"), 1u);
  EXPECT_EQ(d("ctx_synchronize"), 1u);
  EXPECT_EQ(d("device_wide_syncs"), 2u);
  EXPECT_EQ(d("stream_synchronize"), 1u);
  EXPECT_EQ(d("calls:cuStreamSynchronize"), 1u);
  EXPECT_EQ(d("event_synchronize"), 1u);
  EXPECT_EQ(d("calls:cuMemcpyHtoDAsync_v2"), 2u);
  EXPECT_EQ(d("h2d_copies"), 2u);
  EXPECT_EQ(d("h2d_bytes"), 1500u);
  EXPECT_EQ(d("d2h_copies"), 1u);
  EXPECT_EQ(d("d2h_bytes"), 100u);
  CK(cuEventDestroy(e));
  CK(cuStreamDestroy(s));
}

// The stats file is written by a re-executed child at its exit; the parent reads it.
static std::string stats_path(pid_t test_process) {
  return "/tmp/simcuda-stats-test-" + std::to_string(test_process) + ".json";
}

static bool stats_child() {
  setenv("SIMCUDA_STATS_FILE", stats_path(getppid()).c_str(), 1);
  CUdevice d;
  CUcontext c;
  CUdeviceptr p;
  if (cuInit(0) || cuDeviceGet(&d, 0) || cuDevicePrimaryCtxRetain(&c, d) || cuCtxSetCurrent(c))
    return false;
  for (int i = 0; i < 3; ++i)
    if (cuMemAlloc(&p, 64) || cuMemFree(p)) return false;
  return cuCtxSynchronize() == CUDA_SUCCESS;
}

TEST(SimcudaStatsFile, WrittenAtExitWithEveryNonZeroCounter) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  std::string path = stats_path(getpid());
  unlink(path.c_str());
  EXPECT_EXIT(std::exit(stats_child() ? 0 : 1), ::testing::ExitedWithCode(0), "");
  std::ifstream f(path);
  ASSERT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  std::string json = ss.str();
  unlink(path.c_str());
  EXPECT_EQ(json.front(), '{');
  for (const char* want :
       {"\"calls:cuInit\": 1", "\"calls:cuMemAlloc_v2\": 3", "\"calls:cuMemFree_v2\": 3",
        "\"ctx_synchronize\": 1", "\"device_wide_syncs\": 4"})
    EXPECT_NE(json.find(want), std::string::npos) << want << " in\n" << json;
  // Zero counters are left out.
  EXPECT_EQ(json.find("\"calls:cuLaunchKernel\""), std::string::npos) << json;
  EXPECT_EQ(json.find("\"h2d_copies\""), std::string::npos) << json;
}
