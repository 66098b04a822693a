// host_memory.h: where swapped-out bytes live on the host.
//
// Pinned buffers (cuMemAllocHost) up to the pinned cap, kept in a pool when released so the next
// swap-out of a similar size reuses one: a released buffer serves any request of at least 3/4 of
// its size (so sizes need not match exactly), and at the cap any smaller request. The pool gives
// memory back to the driver only when a buffer sits unused for kIdleTrimNs, never to make room:
// cuMemFreeHost waits until the device is idle and holds up every thread's driver calls until
// then. Beyond the cap, ordinary pageable memory filled and drained through a two-half pinned
// staging ring (vDNN++: the pinned requirement stays bounded whatever is swapped).
//
// Threads: the pool has its own mutex (pool_mutex_), held only for list operations, never across
// a driver call, so the swapper allocating pinned memory never holds up a free on another thread.
// The staging ring belongs to the swapper thread alone (its copies wait on the host).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>

#include "interpose/device.h"
#include "interpose/region.h"

namespace gswap::interpose {

class HostMemory {
 public:
  static constexpr std::uint64_t kIdleTrimNs = 10'000'000'000ull;

  explicit HostMemory(Device& device) : device_(device) {}
  HostMemory(const HostMemory&) = delete;
  HostMemory& operator=(const HostMemory&) = delete;

  void configure(std::uint64_t pinned_cap, std::uint64_t staging_bytes) {
    pinned_cap_ = pinned_cap;
    staging_bytes_ = staging_bytes;
  }

  // A host buffer of at least `bytes`: pooled pinned, new pinned within the cap, else pageable.
  // False only when even pageable memory cannot be had (then *out is untouched).
  bool acquire(std::uint64_t bytes, std::uint64_t now_ns, HostBuffer* out);
  // Gives a buffer back (pinned to the pool, pageable to the OS); *b is cleared.
  void release(HostBuffer* b, std::uint64_t now_ns);
  // Frees pooled pinned buffers idle for longer than kIdleTrimNs (the swapper calls it). Each
  // free waits for the device to be idle: a workload whose swapping has shrunk for that long pays
  // it once.
  void trim_idle(std::uint64_t now_ns);

  std::uint64_t pinned_bytes() const;  // held: in use, pooled and the staging ring
  std::uint64_t pooled_bytes() const;

  // Pageable host memory <-> device through the staging ring, on stream s. The host waits (the
  // swapper thread only). A failed driver call is returned after the ring has drained.
  CUresult staged_d2h(void* host, std::uint64_t src, std::uint64_t bytes, Device::Stream s);
  CUresult staged_h2d(std::uint64_t dst, const void* host, std::uint64_t bytes, Device::Stream s);

  // Forgets everything without freeing (after fork, in the child: the parent's pinned memory is
  // not the child's to free).
  void forget();

 private:
  bool ensure_staging();

  Device& device_;
  std::uint64_t pinned_cap_ = 0;
  std::uint64_t staging_bytes_ = 0;

  mutable std::mutex pool_mutex_;
  struct Pooled {
    void* ptr;
    std::uint64_t since_ns;
  };
  std::multimap<std::uint64_t, Pooled> pool_;  // size -> buffer
  std::uint64_t pinned_ = 0;                   // pinned bytes held (pool, in use, staging)
  std::uint64_t pooled_ = 0;

  // Staging ring (swapper thread).
  void* staging_ = nullptr;
  Device::Event staging_events_[2] = {};
};

}  // namespace gswap::interpose
