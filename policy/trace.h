// trace.h: the access-trace model every planner, the simulator and the daemon share.
//
// A trace is what one process did during one or more training iterations: the device-memory
// regions it allocated, and the launches (kernels, copies, memsets) with the regions each touched.
// Its JSON form is documented in policy/README.md and read/written by trace_json.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gswap::policy {

using RegionId = std::uint64_t;
using Seq = std::uint64_t;  // launch sequence number, increasing within a trace

struct DeviceInfo {
  std::uint64_t capacity_bytes = 0;
  double h2d_bytes_per_s = 0;  // measured pinned bandwidth, host to device
  double d2h_bytes_per_s = 0;  // measured pinned bandwidth, device to host
  // Regions below this size are never evicted. The default is a real GPU's VMM granularity, under
  // which the preload library leaves allocations to the driver; traces gswapd captures carry the
  // library's own figure (0: every region it reports can move).
  std::uint64_t min_evictable_bytes = 2ull << 20;
};

// Present only for regions a framework registered as recomputable.
struct Recompute {
  double cost_us = 0;             // time to recompute the region from its sources
  std::vector<RegionId> sources;  // regions the recomputation reads
};

struct Region {
  RegionId id = 0;
  std::uint64_t bytes = 0;
  Seq alloc_seq = 0;
  std::optional<Seq> free_seq;  // empty: lives past the trace (weights, optimiser state)
  std::optional<Recompute> recompute;
};

// A launch that is the program's own copy over the host link holds that direction's copy engine
// for its duration, as gswap's swaps do.
enum class CopyLink : std::uint8_t { kNone, kToDevice, kToHost };

struct Launch {
  Seq seq = 0;
  double start_us = 0;  // observed start, relative to the trace
  double dur_us = 0;    // observed GPU duration
  std::uint32_t stream = 0;
  std::vector<RegionId> regions;  // regions the launch touches
  std::string kernel;             // kernel identity (name or hash)
  CopyLink link = CopyLink::kNone;
};

struct IterationMark {
  Seq first_seq = 0;
  Seq last_seq = 0;
};

struct Trace {
  DeviceInfo device;
  std::vector<Region> regions;
  std::vector<Launch> launches;  // ordered by seq
  std::vector<IterationMark> iterations;
};

}  // namespace gswap::policy
