// gpu_probe.cpp: the driver calls gswapd needs, resolved once with dlsym (see gpu_probe.h).
#include "daemon/gpu_probe.h"

#include <dlfcn.h>

#include <cstring>

#include <fmt/format.h>

#include "daemon/untrusted_text.h"

#include "proto/settings.h"
#include "proto/wire.h"

namespace gswap::daemon {
namespace {

// Driver ABI, spelled out so that cuda.h's version macros cannot pick another entry point.
using CuInit = int (*)(unsigned);
using CuDeviceGetCount = int (*)(int*);
using CuDeviceGet = int (*)(int*, int);
using CuDeviceGetUuid = int (*)(void* /* CUuuid* */, int);
using CuDeviceTotalMem = int (*)(std::size_t*, int);

}  // namespace

std::string gpu_selector_error(std::string_view which) {
  // Digits only: parse_uint would also take surrounding blanks. A UUID may be 32 decimal digits.
  const bool digits = !which.empty() && which.find_first_not_of("0123456789") == which.npos;
  std::uint64_t ordinal = 0;
  std::uint8_t uuid[16];
  if ((digits && settings::parse_uint(which, &ordinal)) ||
      (which.find('\0') == which.npos && proto::parse_uuid(std::string(which).c_str(), uuid)))
    return "";
  return printable_text(
      fmt::format("'{}' is neither a GPU ordinal (0, 1, ...) nor a GPU UUID "
                  "(GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, as nvidia-smi -L prints it)",
                  which));
}

bool probe_gpu(const std::string& which, GpuIdentity* out, std::string* error) {
  if (*error = gpu_selector_error(which); !error->empty()) return false;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    *error = fmt::format("cannot load libcuda.so.1: {}", dlerror());
    return false;
  }
  auto init = reinterpret_cast<CuInit>(dlsym(lib, "cuInit"));
  auto count = reinterpret_cast<CuDeviceGetCount>(dlsym(lib, "cuDeviceGetCount"));
  auto get = reinterpret_cast<CuDeviceGet>(dlsym(lib, "cuDeviceGet"));
  auto uuid = reinterpret_cast<CuDeviceGetUuid>(dlsym(lib, "cuDeviceGetUuid_v2"));
  if (!uuid) uuid = reinterpret_cast<CuDeviceGetUuid>(dlsym(lib, "cuDeviceGetUuid"));
  auto total = reinterpret_cast<CuDeviceTotalMem>(dlsym(lib, "cuDeviceTotalMem_v2"));
  if (!init || !count || !get || !uuid || !total) {
    *error =
        "libcuda.so.1 lacks cuInit/cuDeviceGetCount/cuDeviceGet/cuDeviceGetUuid/cuDeviceTotalMem";
    return false;
  }
  if (int rc = init(0); rc != 0) {
    *error = fmt::format("cuInit failed -> {}", rc);
    return false;
  }
  int n = 0;
  if (int rc = count(&n); rc != 0) {
    *error = fmt::format("cuDeviceGetCount failed -> {}", rc);
    return false;
  }
  std::uint64_t ordinal = 0;
  std::uint8_t want[16];
  const bool by_ordinal = settings::parse_uint(which, &ordinal);
  if (!by_ordinal) proto::parse_uuid(which.c_str(), want);  // checked above
  for (int i = 0; i < n; ++i) {
    if (by_ordinal && static_cast<std::uint64_t>(i) != ordinal) continue;
    int dev = 0;
    if (int rc = get(&dev, i); rc != 0) {
      *error = fmt::format("cuDeviceGet({}) failed -> {}", i, rc);
      return false;
    }
    std::uint8_t u[16];
    if (int rc = uuid(u, dev); rc != 0) {
      *error = fmt::format("cuDeviceGetUuid({}) failed -> {}", i, rc);
      return false;
    }
    if (!by_ordinal && std::memcmp(u, want, 16) != 0) continue;
    std::size_t bytes = 0;
    if (int rc = total(&bytes, dev); rc != 0) {
      *error = fmt::format("cuDeviceTotalMem({}) failed -> {}", i, rc);
      return false;
    }
    out->ordinal = i;
    std::memcpy(out->uuid, u, 16);
    out->total_bytes = bytes;
    char text[48];
    out->uuid_text = proto::format_uuid(u, text);
    return true;
  }
  *error = fmt::format("no GPU '{}' (the driver reports {} device{})", which, n, n == 1 ? "" : "s");
  return false;
}

}  // namespace gswap::daemon
