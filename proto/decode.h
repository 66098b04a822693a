// decode.h: the daemon's decoder of ring records. A pure function over untrusted bytes.
//
// The records come from another process's shared memory, so every type, count, flag and reserved
// field is checked before anything is passed on; the first violation stops decoding and is
// reported, and the daemon then disconnects that client. Nothing here allocates or throws.
#pragma once

#include <cstddef>
#include <cstdint>

#include "proto/wire.h"

namespace gswap::proto {

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on_alloc(std::uint64_t seq, std::uint32_t stream, std::uint64_t region,
                        std::uint64_t base, std::uint64_t bytes) = 0;
  virtual void on_free(std::uint64_t seq, std::uint64_t region) = 0;
  // regions points at num_regions ids valid only during the call.
  virtual void on_launch(std::uint64_t seq, std::uint32_t stream, std::uint64_t function_id,
                         const std::uint64_t* regions, std::uint32_t num_regions,
                         bool truncated) = 0;
  // link: kCopyLink... (validated).
  virtual void on_copy(std::uint64_t seq, std::uint32_t stream, std::uint64_t src,
                       std::uint64_t dst, std::uint64_t bytes, std::uint32_t link) = 0;
  virtual void on_eviction(std::uint64_t seq, std::uint64_t region, std::uint64_t bytes) = 0;
  virtual void on_restore(std::uint64_t seq, std::uint64_t region, std::uint64_t bytes,
                          bool late) = 0;
  virtual void on_stall(std::uint64_t seq, std::uint64_t ns) = 0;
  virtual void on_gpu_timing(std::uint64_t seq, std::uint64_t start_ns,
                             std::uint64_t duration_ns) = 0;
  virtual void on_iteration_mark(std::uint64_t seq) = 0;
  // Protocol 2. A sink that does not care keeps these defaults.
  enum class NameKind { kKernel, kRegion };
  // One chunk of a name: chunk k holds bytes [32k, 32k + 32) (NUL-padded), `last` on the last.
  virtual void on_name(NameKind kind, std::uint64_t id, std::uint32_t chunk, const char* bytes32,
                       bool last) {}
  virtual void on_lateness(std::uint64_t generation, std::uint64_t entry, std::uint64_t late_ns,
                           bool missed) {}
  virtual void on_divergence(std::uint64_t generation, std::uint64_t offset, std::uint64_t expected,
                             std::uint64_t got) {}
  // A completed swap copy (device-axis ns; flags kSwapToDevice | kSwapPlanned).
  virtual void on_swap_done(std::uint64_t region, std::uint64_t bytes, std::uint64_t start_ns,
                            std::uint64_t end_ns, std::uint64_t flags) {}
  // The device-axis time that matches a host CLOCK_MONOTONIC time.
  virtual void on_clock(std::uint64_t device_ns, std::uint64_t host_ns) {}
  // Recomputation: a region registered (cost hint ns, 0 when unknown; its sources), no longer
  // registered, and one recomputation run (device ns, 0/0 when not timed; failed: the host copy
  // was used).
  virtual void on_recomputable(std::uint64_t region, std::uint64_t cost_ns,
                               const std::uint64_t* sources, std::uint32_t num_sources) {}
  virtual void on_not_recomputable(std::uint64_t region) {}
  virtual void on_recomputed(std::uint64_t region, std::uint64_t bytes, std::uint64_t start_ns,
                             std::uint64_t end_ns, bool failed) {}
  // A stall that says when it started (host ns) and on which thread (after its on_stall).
  virtual void on_host_wait(std::uint64_t seq, std::uint64_t start_ns, std::uint64_t ns,
                            std::uint64_t thread) {}
};

struct DecodeResult {
  bool ok = true;
  std::size_t consumed = 0;     // records fully decoded (whole groups only)
  const char* error = nullptr;  // static text when !ok
  std::size_t error_index = 0;  // record at fault
};

// Decodes records [0, n). When `complete` is true the batch is everything the producer published,
// so a launch group cut short is an error (producers publish whole groups); otherwise a trailing
// partial group is left unconsumed.
DecodeResult decode_events(const EventRecord* records, std::size_t n, bool complete,
                           EventSink& sink);

// Same, over raw bytes (len must be a multiple of sizeof(EventRecord)).
DecodeResult decode_event_bytes(const void* bytes, std::size_t len, EventSink& sink);

}  // namespace gswap::proto
