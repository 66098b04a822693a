// stream_table.h: a small stream -> slot index map, so a region can remember in one 64-bit word
// every stream that used it since its last eviction (fact 7: an event recorded later on a stream
// covers every earlier use, so one event per stream in that set orders a swap-out after them).
//
// Lock-free: the launch path looks a stream up (and inserts it on first sight) with atomics only.
// Slots are never reused while the process lives except through release() on cuStreamDestroy.
#pragma once

#include <atomic>
#include <cstdint>

namespace gswap::interpose {

class StreamTable {
 public:
  static constexpr unsigned kSlots = 62;
  static constexpr std::uint64_t kPerThreadBit = 1ull << 62;  // a per-thread default stream
  static constexpr std::uint64_t kUnknownBit = 1ull << 63;    // table full

  // The bit for this stream. per_thread: the call came through a _ptsz/_ptds entry point, where
  // stream 0 means the calling thread's own default stream, which no other thread can name.
  std::uint64_t bit(std::uintptr_t stream, bool per_thread) {
    if (stream == 0x2 || (per_thread && stream == 0)) return kPerThreadBit;
    std::uintptr_t key = stream + 1;  // 0 marks an empty slot; stream 0 (legacy) is a valid key
    unsigned h = static_cast<unsigned>((key >> 4) * 0x9E3779B97F4A7C15ull >> 58) % kSlots;
    for (unsigned i = 0; i < kSlots; ++i) {
      unsigned s = (h + i) % kSlots;
      std::uintptr_t k = keys_[s].load(std::memory_order_acquire);
      if (k == key) return 1ull << s;
      if (k == 0 || k == kTombstone) {
        // A reused tombstone may leave a duplicate of this key further on; two bits for one
        // stream only cost an extra event at eviction.
        std::uintptr_t expected = k;
        if (keys_[s].compare_exchange_strong(expected, key, std::memory_order_acq_rel))
          return 1ull << s;
        if (expected == key) return 1ull << s;
      }
    }
    return kUnknownBit;
  }

  // The stream in a slot, or false when the slot is empty.
  bool stream_of(unsigned slot, std::uintptr_t* stream) const {
    std::uintptr_t k = keys_[slot].load(std::memory_order_acquire);
    if (k == 0 || k == kTombstone) return false;
    *stream = k - 1;
    return true;
  }

  // Forgets a destroyed stream. The slot keeps a tombstone so lookups of other streams still probe
  // past it; a stale bit left in a region names no stream (skipped) or a later stream (an extra,
  // harmless event).
  void release(std::uintptr_t stream) {
    std::uintptr_t key = stream + 1;
    for (unsigned s = 0; s < kSlots; ++s) {
      std::uintptr_t k = key;
      keys_[s].compare_exchange_strong(k, kTombstone, std::memory_order_acq_rel);
    }
  }

  void reset() {
    for (auto& k : keys_) k.store(0, std::memory_order_relaxed);
  }

 private:
  static constexpr std::uintptr_t kTombstone = ~std::uintptr_t{0};
  std::atomic<std::uintptr_t> keys_[kSlots] = {};
};

}  // namespace gswap::interpose
