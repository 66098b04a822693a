// gpu_check.h: the little harness every GPU program in tests/gpu shares.
//
// These programs run on a machine that has the CUDA toolkit and a GPU but none of the project's
// Debian libraries (no GoogleTest, CLI11 or spdlog), so they are plain programs: they print one
// line per check, exit 0 when every check passed, 1 when one failed, and 2 when the harness itself
// could not run (a driver call failed). The checks print what they expected and what they got, so
// a log read on another machine is enough to tell what broke.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

namespace gswap::gpu_test {

inline int g_failures = 0;
inline int g_checks = 0;

[[noreturn]] inline void die_cu(CUresult r, const char* expr, const char* file, int line) {
  const char* name = nullptr;
  cuGetErrorName(r, &name);
  std::fprintf(stderr, "FATAL %s:%d: %s -> %d (%s)\n", file, line, expr, static_cast<int>(r),
               name ? name : "?");
  std::exit(2);
}

[[noreturn]] inline void die_rt(cudaError_t r, const char* expr, const char* file, int line) {
  std::fprintf(stderr, "FATAL %s:%d: %s -> %d (%s)\n", file, line, expr, static_cast<int>(r),
               cudaGetErrorName(r));
  std::exit(2);
}

// A driver or runtime call the harness needs: failure ends the program (exit 2).
#define GT_CU(expr)                                                                         \
  do {                                                                                      \
    CUresult gt_r_ = (expr);                                                                \
    if (gt_r_ != CUDA_SUCCESS) ::gswap::gpu_test::die_cu(gt_r_, #expr, __FILE__, __LINE__); \
  } while (0)
#define GT_RT(expr)                                                                        \
  do {                                                                                     \
    cudaError_t gt_r_ = (expr);                                                            \
    if (gt_r_ != cudaSuccess) ::gswap::gpu_test::die_rt(gt_r_, #expr, __FILE__, __LINE__); \
  } while (0)

// A behaviour under test: failure is counted and reported, and the program goes on so one run
// shows every broken check.
inline bool check(bool ok, const char* what, const std::string& detail, const char* file,
                  int line) {
  ++g_checks;
  if (ok) {
    std::printf("ok    %s%s%s\n", what, detail.empty() ? "" : ": ", detail.c_str());
  } else {
    ++g_failures;
    std::printf("FAIL  %s%s%s  (%s:%d)\n", what, detail.empty() ? "" : ": ", detail.c_str(), file,
                line);
  }
  std::fflush(stdout);
  return ok;
}
#define GT_CHECK(cond, what, detail) \
  ::gswap::gpu_test::check((cond), (what), (detail), __FILE__, __LINE__)

inline int finish(const char* program) {
  std::printf("%s: %d checks, %d failed -> %s\n", program, g_checks, g_failures,
              g_failures ? "FAIL" : "PASS");
  return g_failures ? 1 : 0;
}

// Command line: `--key value` pairs and bare `--flag`s. The programs take a handful of numbers,
// not enough to justify a dependency the GPU machine does not have.
class Args {
 public:
  Args(int argc, char** argv) : args_(argv + 1, argv + argc) {}
  bool flag(const char* name) const {
    return std::find(args_.begin(), args_.end(), std::string(name)) != args_.end();
  }
  std::string str(const char* name, const std::string& def) const {
    for (size_t i = 0; i + 1 < args_.size(); ++i)
      if (args_[i] == name) return args_[i + 1];
    return def;
  }
  std::uint64_t u64(const char* name, std::uint64_t def) const {
    std::string v = str(name, "");
    return v.empty() ? def : parse_size(v);
  }
  // Sizes are read as the library reads GSWAP_BUDGET: K/M/G/T alone or with "iB" are binary
  // units, with "B" decimal ones (6GiB = 6 << 30, 1.5GB = 1.5e9).
  static std::uint64_t parse_size(const std::string& s) {
    char* end = nullptr;
    double v = std::strtod(s.c_str(), &end);
    std::string unit(end);
    unit.erase(0, unit.find_first_not_of(' '));
    double mul = 1;
    if (!unit.empty()) {
      const char* letters = "KMGT";
      const char* pos = std::strchr(letters, std::toupper(static_cast<unsigned char>(unit[0])));
      std::string rest = unit.substr(1);
      if (!pos || !(rest.empty() || rest == "iB" || rest == "B")) {
        std::fprintf(stderr, "bad size '%s'\n", s.c_str());
        std::exit(2);
      }
      int power = static_cast<int>(pos - letters) + 1;
      mul = std::pow(rest == "B" ? 1000.0 : 1024.0, power);
    }
    return static_cast<std::uint64_t>(v * mul);
  }

 private:
  std::vector<std::string> args_;
};

// Whether the program runs under the preload library: the checks that need it are skipped (and
// say so) when it is absent, so each program is also a self-check against the bare driver.
inline bool under_gswap() {
  const char* p = std::getenv("LD_PRELOAD");
  return p && std::strstr(p, "libgswap") != nullptr;
}

// Initialises the driver and makes device 0's primary context current, the one the runtime uses
// too, so runtime launches and driver calls see the same allocations.
inline CUdevice init_primary_context() {
  GT_CU(cuInit(0));
  CUdevice dev;
  GT_CU(cuDeviceGet(&dev, 0));
  CUcontext ctx;
  GT_CU(cuDevicePrimaryCtxRetain(&ctx, dev));
  GT_CU(cuCtxSetCurrent(ctx));
  return dev;
}

// The device's physical memory, asked of a child process that runs without the preload library
// (this process's own answers may be the budget). Returns 0 when it cannot be learned.
inline std::uint64_t physical_total_bytes() {
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return 0;
  self[n] = '\0';
  std::string cmd = std::string("env -u LD_PRELOAD '") + self + "' --print-physical-total";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return 0;
  unsigned long long v = 0;
  if (std::fscanf(p, "physical_total: %llu", &v) != 1) v = 0;
  pclose(p);
  return v;
}

// The other half of physical_total_bytes(): every program calls this first in main().
inline void maybe_print_physical_total(const Args& args) {
  if (!args.flag("--print-physical-total")) return;
  CUdevice dev = init_primary_context();
  size_t total = 0;
  GT_CU(cuDeviceTotalMem(&total, dev));
  std::printf("physical_total: %llu\n", static_cast<unsigned long long>(total));
  std::exit(0);
}

inline double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

inline std::string mib(std::uint64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

inline std::string fmt(const char* f, unsigned long long a, unsigned long long b) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

}  // namespace gswap::gpu_test
