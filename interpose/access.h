// access.h: the launch/copy/memset hot path: make sure every region a call touches is resident,
// then enqueue it.
//
// Fast path, when every touched region is resident and no restore is in flight: per region one
// pin (seq_cst fetch_add), one state load, the use marks (relaxed) and one unpin; no lock, no
// allocation, no syscall. Why a per-region pin count rather than a per-thread epoch: the evictor
// needs to know about exactly one region, and a pin is one cache line the launch already touches;
// an epoch would make every eviction wait for every thread's launch in progress.
// The pin and the evictor's state store are a Dekker pair (both seq_cst): either the evictor sees
// the pin and backs off, or the launch sees kRegionEvicting and takes the slow path.
#pragma once

#include "interpose/param_scan.h"
#include "interpose/residency.h"
#include "interpose/telemetry.h"

namespace gswap::interpose {

// The pieces of the fast path, separate so the launch-path benchmark times exactly this code.

// Pins every region of t; true when all are resident with no restore in flight. On false, no
// pin is left behind.
inline bool pin_if_resident(TouchSet& t) {
  for (std::size_t i = 0; i < t.n; ++i) {
    Region* r = t.regions[i];
    r->pins.fetch_add(1, std::memory_order_seq_cst);
    if (r->state.load(std::memory_order_seq_cst) != kRegionResident ||
        r->restore_pending.load(std::memory_order_acquire)) {
      for (std::size_t j = 0; j <= i; ++j)
        t.regions[j]->pins.fetch_sub(1, std::memory_order_release);
      return false;
    }
  }
  return true;
}

// Last use (for LRU) and the stream's bit (for stream-ordered swap-out and free).
inline void mark_use(TouchSet& t, std::uint64_t seq, std::uint64_t stream_bit) {
  for (std::size_t i = 0; i < t.n; ++i) {
    Region* r = t.regions[i];
    r->last_use.store(seq, std::memory_order_relaxed);
    if ((r->streams.load(std::memory_order_relaxed) & stream_bit) != stream_bit)
      r->streams.fetch_or(stream_bit, std::memory_order_relaxed);
  }
}

inline void unpin(TouchSet& t) {
  for (std::size_t i = 0; i < t.n; ++i) t.regions[i]->pins.fetch_sub(1, std::memory_order_release);
}

template <class Enqueue>
CUresult with_access(TouchSet& t, CUstream stream, bool per_thread, bool sync, Enqueue&& enqueue,
                     std::uint64_t function_id = 0) {
  if (t.n == 0) return enqueue();
  FastState& f = fast();
  if (!pin_if_resident(t)) {
    CUresult e = prepare_slow(t, stream, per_thread, sync);  // pins all on success
    if (e != CUDA_SUCCESS) return e;
  }
  std::uint64_t seq = f.seq.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t bit = f.streams.bit(reinterpret_cast<std::uintptr_t>(stream), per_thread);
  mark_use(t, seq, bit);
  if (function_id) {
    std::uint64_t ids[TouchSet::kCapacity];
    for (std::size_t i = 0; i < t.n; ++i) ids[i] = t.regions[i]->id;
    telemetry::launch(seq, static_cast<std::uint32_t>(__builtin_ctzll(bit)), function_id, ids,
                      static_cast<std::uint32_t>(t.n));
  }
  CUresult res = enqueue();
  unpin(t);
  return res;
}

}  // namespace gswap::interpose
