// chrome_trace.h: gswap's timelines in the Chrome trace event format (ui.perfetto.dev and
// chrome://tracing open them as they are). One model and one writer for the timelines gswapctl
// makes: a running program's (`trace dump --timeline`, from gswapd) and a simulated plan's
// (`simulate --timeline`), so prediction and measurement lay side by side track for track.
//
// The track layout is the one libgswap's own GSWAP_TIMELINE writer uses (interpose/timeline.cpp
// keeps a copy of it, since the preload library links neither this nor nlohmann):
//   process 1 "device": one track per stream ("stream N", kernels), "D2H (swap-outs)",
//     "H2D (restores)", "streams waiting for restores", "recomputations", and the counter
//     "memory" (resident_bytes, budget_bytes, pinned_host_bytes);
//   process 2 "host": one track per thread that waited in gswap ("thread TID").
// Times are microseconds; every track's events are written in time order.
#pragma once

#include <cstdint>
#include <ostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace gswap::policy::chrome {

inline constexpr int kDevicePid = 1, kHostPid = 2;
// The device's fixed tracks, past every stream number a trace may give (32 bits), so that no
// stream shares one.
inline constexpr std::uint64_t kD2HTrack = (std::uint64_t{1} << 32), kH2DTrack = kD2HTrack + 1,
                               kWaitTrack = kD2HTrack + 2, kRecomputeTrack = kD2HTrack + 3;
inline constexpr const char* kD2HName = "D2H (swap-outs)";
inline constexpr const char* kH2DName = "H2D (restores)";
inline constexpr const char* kWaitName = "streams waiting for restores";
inline constexpr const char* kRecomputeName = "recomputations";
inline constexpr const char* kCounterName = "memory";

struct Kernel {
  std::uint32_t stream = 0;
  std::string name;
  std::uint64_t seq = 0;
  double start_us = 0, dur_us = 0;
};

// A swap copy: a swap-out on the D2H track, a restore on the H2D track.
struct Copy {
  bool to_device = false;
  std::uint64_t region = 0;
  std::string region_name;  // empty: named by its id
  std::uint64_t bytes = 0;
  double start_us = 0, end_us = 0;
  bool planned = false;      // started by the plan (else on demand)
  std::optional<bool> late;  // restores: still in flight when the access came (when known)
};

// Compute that waited on the device (a stream for a restore, or the simulated launch for memory).
struct DeviceWait {
  std::string what;  // "region 7", "memory"
  std::optional<std::uint64_t> region;
  std::string kernel;  // the launch that waited, when known
  double start_us = 0, dur_us = 0;
};

// An application thread's wait in the library.
struct HostWait {
  std::uint64_t thread = 0;
  std::string why;
  double start_us = 0, dur_us = 0;
};

struct Recompute {
  std::uint64_t region = 0;
  std::string region_name;
  std::uint64_t bytes = 0;
  double start_us = 0, end_us = 0;
  bool failed = false;
};

struct Counters {
  double ts_us = 0;
  std::uint64_t resident = 0, budget = 0, pinned = 0;
};

struct Timeline {
  std::string producer;                // "gswapd" (measured) or "simulator"
  std::vector<std::uint32_t> streams;  // streams to name even without kernels (sorted on write)
  std::vector<Kernel> kernels;
  std::vector<Copy> copies;
  std::vector<DeviceWait> device_waits;
  std::vector<HostWait> host_waits;
  std::vector<Recompute> recomputes;
  std::vector<Counters> counters;
  std::vector<double> iterations;  // iteration starts (instant events)
  nlohmann::json other;            // extra otherData fields (budget, policy, pid...)
};

// The trace as a JSON document: {"displayTimeUnit": "ms", "otherData": {...}, "traceEvents":
// [...]}.
nlohmann::json to_json(const Timeline& t);
// The same document written to `out` one event at a time (bytes that are not UTF-8 replaced),
// never held whole: a timeline of a long iteration as one JSON tree took 14 times the memory of
// the simulation it shows.
void write_json(const Timeline& t, std::ostream& out);

}  // namespace gswap::policy::chrome
