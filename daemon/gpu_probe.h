// gpu_probe.h: finds a GPU's UUID and memory size through the driver, loaded at run time.
// gswapd never links libcuda: it dlopens libcuda.so.1, so the same binary runs on a real driver
// and on tests/simcuda (via LD_LIBRARY_PATH).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gswap::daemon {

struct GpuIdentity {
  int ordinal = 0;
  std::uint8_t uuid[16] = {};
  std::uint64_t total_bytes = 0;
  std::string uuid_text;  // "GPU-xxxxxxxx-..."
};

// Why `which` is not a GPU selector: "" for an ordinal (decimal digits: "0") or a UUID ("GPU-..."
// or 32 hex digits, dashes anywhere), else the reason (its bytes made printable). A selector
// names files (gswapd-<selector>.log), so it is checked before any path is built from it; one
// that passes holds no '/', '.' or NUL.
std::string gpu_selector_error(std::string_view which);

// `which` is an ordinal ("0") or a UUID ("GPU-..." or 32 hex digits). Returns false with *error
// set when it is neither, when the driver cannot be loaded or when no such GPU exists.
bool probe_gpu(const std::string& which, GpuIdentity* out, std::string* error);

}  // namespace gswap::daemon
