// gpu_probe.h: finds a GPU's UUID and memory size through the driver, loaded at run time.
// gswapd never links libcuda: it dlopens libcuda.so.1, so the same binary runs on a real driver
// and on tests/simcuda (via LD_LIBRARY_PATH).
#pragma once

#include <cstdint>
#include <string>

namespace gswap::daemon {

struct GpuIdentity {
  int ordinal = 0;
  std::uint8_t uuid[16] = {};
  std::uint64_t total_bytes = 0;
  std::string uuid_text;  // "GPU-xxxxxxxx-..."
};

// `which` is an ordinal ("0") or a UUID ("GPU-..." or 32 hex digits). Returns false with *error
// set when the driver cannot be loaded or no such GPU exists.
bool probe_gpu(const std::string& which, GpuIdentity* out, std::string* error);

}  // namespace gswap::daemon
