// timeline.h: what the library did, kept for GSWAP_TIMELINE=FILE and written at exit as a Chrome
// trace event file (ui.perfetto.dev and chrome://tracing open it as it is), with no daemon.
//
// Tracks: kernels per stream (timed on the device), swap-outs on a D2H track and restores on an
// H2D track (region id and name, bytes, planned or on demand, late or not), streams waiting for
// restores, recomputations, host waits on the thread that waited, and counters for resident
// bytes, budget and pinned host bytes. Device times (kernels, copies) and host times (waits,
// counters) are put on one axis by the offset measured when the first device timestamp is taken.
// Names (kernels, regions) keep their first 39 bytes, cut before a character the limit would split;
// in the file, control characters and bytes that are not valid UTF-8 are written as the text
// `\xNN` (`\u0085` for C1 characters), as gswapd shows the names clients send.
//
// Bounded: the last GSWAP_TIMELINE_EVENTS records are kept (a ring); older ones are dropped.
// Threads: records come from the swapper thread and from application threads on slow paths
// (never from the launch path); one mutex owns the ring. Nothing is written before exit.
#pragma once

#include <cstdint>

namespace gswap::interpose::timeline {

// At init; an empty path leaves recording off (every function below then returns at once).
// False, with recording off, when the ring of max_events records cannot be allocated.
bool configure(const char* path, std::uint64_t max_events);
// The host memory a ring of `events` records takes.
std::uint64_t ring_bytes(std::uint64_t events);
bool enabled();

// Device-time records (nanoseconds on the kernel-timing axis of timings.h).
void kernel(std::uint64_t seq, std::uint32_t stream, const char* name, std::uint64_t start_ns,
            std::uint64_t dur_ns);
void copy(bool to_device, std::uint64_t region, const char* region_name, std::uint64_t bytes,
          std::uint64_t start_ns, std::uint64_t end_ns, bool planned);
void stream_waited(std::uint64_t region, std::uint64_t late_ns, std::uint64_t end_ns);
// A recomputation (recompute.h) on the stream of the access that needed it; failed: the
// callback failed and the host copy was used.
void recompute(std::uint64_t region, const char* region_name, std::uint64_t bytes,
               std::uint64_t start_ns, std::uint64_t end_ns, bool failed);
// The host time (monotonic ns) that device time `device_ns` corresponds to, once known.
void align(std::uint64_t device_ns, std::uint64_t host_ns);
// A host time on the device axis (for copies timed on the host: staged through pageable memory).
std::uint64_t to_device(std::uint64_t host_ns);

// Host-time records (monotonic ns).
void host_wait(const char* why, std::uint64_t start_ns, std::uint64_t end_ns);
void counters(std::uint64_t host_ns, std::uint64_t resident, std::uint64_t budget,
              std::uint64_t pinned);
void iteration(std::uint64_t host_ns);

// Writes the file (at exit, from the process's at-exit handler).
void write();

}  // namespace gswap::interpose::timeline
