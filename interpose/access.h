// access.h: the launch/copy/memset hot path: make sure every region a call touches is resident,
// then enqueue it.
//
// Fast path, when every touched region is resident: per region one pin (seq_cst fetch_add), one
// state load, the use marks and one unpin; no lock, no allocation (up to TouchSet::kCapacity
// regions), no syscall. Why a per-region
// pin count rather than a per-thread epoch: the evictor needs to know about exactly one region,
// and a pin is one cache line the launch already touches; an epoch would make every eviction
// wait for every thread's launch in progress.
// The pin and the evictor's state store are a Dekker pair (both seq_cst): either the evictor sees
// the pin and backs off, or the launch sees kEvicting and takes the slow path.
//
// Wait path, when a region is mapped but its restore is still in flight (kRestoring, e.g. a
// prefetch): the caller's stream waits for the restore's event on the device, with no lock.
#pragma once

#include <algorithm>

#include "interpose/param_scan.h"
#include "interpose/process.h"
#include "interpose/recompute.h"
#include "interpose/telemetry.h"

namespace gswap::interpose {

// The pieces of the fast path, separate so the launch-path benchmark times exactly this code.

enum class Pinned { kAllResident, kSomeRestoring, kNo };

// Pins every region of t when each is resident or being restored. On kNo, no pin is left behind.
inline Pinned pin_if_mapped(TouchSet& t) {
  Pinned result = Pinned::kAllResident;
  for (std::size_t i = 0; i < t.n; ++i) {
    Region* r = t.regions[i];
    r->pins.fetch_add(1, std::memory_order_seq_cst);
    std::uint32_t st = r->state.load(std::memory_order_seq_cst);
    if (st == kRegionResident) continue;
    if (st == kRegionRestoring) {
      result = Pinned::kSomeRestoring;
      continue;
    }
    for (std::size_t j = 0; j <= i; ++j) t.regions[j]->pins.fetch_sub(1, std::memory_order_release);
    return Pinned::kNo;
  }
  return result;
}

// Last use (for LRU) and the stream's bucket (for stream-ordered swap-out and free). Both are
// written only when they change, so launches on many threads sharing a region do not fight over
// its cache line: the LRU mark moves at most once per 2^16 ticks (tens of microseconds).
inline void mark_use(TouchSet& t, std::uint64_t tick, std::uint64_t stream_bit) {
  for (std::size_t i = 0; i < t.n; ++i) {
    Region* r = t.regions[i];
    if (tick - r->last_use.load(std::memory_order_relaxed) > (1u << 16))
      r->last_use.store(tick, std::memory_order_relaxed);
    if ((r->streams.load(std::memory_order_relaxed) & stream_bit) != stream_bit)
      r->streams.fetch_or(stream_bit, std::memory_order_relaxed);
  }
}

inline void unpin(TouchSet& t) {
  for (std::size_t i = 0; i < t.n; ++i) t.regions[i]->pins.fetch_sub(1, std::memory_order_release);
}

// function_id: the kernel's (handle | 1), or proto::kCopyFunction and friends for copies: while
// gswapd records, every kernel launch is a position in the trace (with or without regions), and
// every copy that touches a region.
template <class Enqueue>
CUresult with_access(TouchSet& t, CUstream stream, bool per_thread, bool sync, Enqueue&& enqueue,
                     std::uint64_t function_id, const char* name = nullptr) {
  FastState& f = fast();
  if (t.n == 0 && !(function_id & 1 && f.ordered.load(std::memory_order_relaxed))) return enqueue();
  Pinned p = t.n ? pin_if_mapped(t) : Pinned::kAllResident;
  if (p == Pinned::kNo) {
    CUresult e = prepare_slow(t, stream, per_thread, sync);  // pins all on success
    if (e != CUDA_SUCCESS) return e;
  } else if (p == Pinned::kSomeRestoring) {
    CUresult e = wait_restoring(t, stream, per_thread, sync);
    if (e != CUDA_SUCCESS) {
      unpin(t);
      return e;
    }
  }
  unsigned stream_number = 0;
  std::uint64_t bit =
      f.streams.bit(reinterpret_cast<std::uintptr_t>(stream), per_thread, &stream_number);
  mark_use(t, lru_tick(), bit);
  // A recomputation callback's own launches are no positions of the iteration (recompute.h).
  if (f.ordered.load(std::memory_order_relaxed) && !in_recompute()) {
    std::uint64_t seq = f.seq.fetch_add(1, std::memory_order_relaxed);
    // The wire carries fewer regions than this per launch (the rest flagged as cut off).
    std::uint64_t ids[TouchSet::kCapacity];
    const std::size_t named = std::min(t.n, TouchSet::kCapacity);
    for (std::size_t i = 0; i < named; ++i) ids[i] = t.regions[i]->id;
    telemetry::launch(seq, stream_number, function_id, ids, static_cast<std::uint32_t>(named));
    if (f.plan_active.load(std::memory_order_relaxed)) {
      PlanStep step;
      step.stream_number = stream_number;
      step.name = name;
      plan_before(seq, function_id, t, per_thread && !stream ? CU_STREAM_PER_THREAD : stream,
                  per_thread, &step);
      CUresult res = enqueue();
      // Unpinned first: a planned swap-out the swapper takes up at once must find its region
      // free to leave (a pinned one is skipped, and the eviction would be lost).
      unpin(t);
      plan_after(&step);
      return res;
    }
  }
  CUresult res = enqueue();
  unpin(t);
  return res;
}

}  // namespace gswap::interpose
