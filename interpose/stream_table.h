// stream_table.h: stream -> slot map, so a region can remember in one 64-bit word every stream
// that used it since its last swap-out (fact 7: an event recorded later on a stream covers every
// earlier use, so one event per such stream orders a swap-out or a free after them).
//
// There is no ceiling of 62 streams: the table has kSlots slots (PyTorch alone keeps 32+32 pool
// streams per device), and a region's word holds one bit per *bucket* of slots (slot % kBuckets).
// Ordering after a bucket records an event on every stream in it: a superset of the streams
// that really used the region, which only orders a swap-out after a little more work.
// Two bits are special: kPerThreadBit (a per-thread default stream, which only its own thread can
// name; residency orders after it through the legacy stream, which follows every blocking stream)
// and kUnknownBit (the table is full: residency falls back to waiting for the whole context).
//
// Lock-free: the launch path looks a stream up (and inserts it on first sight) with atomics only.
// A slot is reused only after release() on cuStreamDestroy (tombstone).
#pragma once

#include <atomic>
#include <cstdint>

namespace gswap::interpose {

class StreamTable {
 public:
  static constexpr unsigned kSlots = 4096;
  static constexpr unsigned kBuckets = 62;
  static constexpr std::uint64_t kPerThreadBit = 1ull << 62;  // a per-thread default stream
  static constexpr std::uint64_t kUnknownBit = 1ull << 63;    // table full

  static constexpr std::uint64_t bucket_bit(unsigned slot) { return 1ull << (slot % kBuckets); }

  // Stream numbers as traces name them: the slot, or these two for the special bits.
  static constexpr unsigned kPerThreadStream = kSlots;
  static constexpr unsigned kUnknownStream = kSlots + 1;

  // The bit for this stream. per_thread: the call came through a _ptsz/_ptds entry point, where
  // stream 0 means the calling thread's own default stream. *number (optional) receives the
  // stream's number for traces.
  std::uint64_t bit(std::uintptr_t stream, bool per_thread, unsigned* number = nullptr) {
    unsigned slot;
    if (stream == 0x2 || (per_thread && stream == 0)) {
      if (number) *number = kPerThreadStream;
      return kPerThreadBit;
    }
    if (!find_or_insert(stream, &slot)) {
      if (number) *number = kUnknownStream;
      return kUnknownBit;
    }
    if (number) *number = slot;
    return bucket_bit(slot);
  }

  // The slot of a stream (inserting it); false when the table is full.
  bool find_or_insert(std::uintptr_t stream, unsigned* slot) {
    std::uintptr_t key = stream + 1;  // 0 marks an empty slot; stream 0 (legacy) is a valid key
    unsigned h = hash(key);
    for (unsigned i = 0; i < kSlots; ++i) {
      unsigned s = (h + i) & (kSlots - 1);
      std::uintptr_t k = keys_[s].load(std::memory_order_acquire);
      if (k == key) return *slot = s, true;
      if (k == 0) {
        // An empty slot ends the probe: the key is not further on. Claim it.
        std::uintptr_t expected = 0;
        if (keys_[s].compare_exchange_strong(expected, key, std::memory_order_acq_rel))
          return *slot = s, true;
        if (expected == key) return *slot = s, true;
      }
    }
    // Full of live keys and tombstones: reuse a tombstone (a duplicate of this key further on
    // only costs an extra event).
    for (unsigned i = 0; i < kSlots; ++i) {
      unsigned s = (h + i) & (kSlots - 1);
      std::uintptr_t k = keys_[s].load(std::memory_order_acquire);
      if (k == kTombstone && keys_[s].compare_exchange_strong(k, key, std::memory_order_acq_rel))
        return *slot = s, true;
      if (k == key) return *slot = s, true;
    }
    return false;
  }

  // The stream in a slot, or false when the slot is empty.
  bool stream_of(unsigned slot, std::uintptr_t* stream) const {
    std::uintptr_t k = keys_[slot].load(std::memory_order_acquire);
    if (k == 0 || k == kTombstone) return false;
    *stream = k - 1;
    return true;
  }

  // Forgets a destroyed stream. The slot keeps a tombstone so lookups of other streams still probe
  // past it; a stale bit left in a region names other streams of its bucket (an extra, harmless
  // event) or none.
  void release(std::uintptr_t stream) {
    std::uintptr_t key = stream + 1;
    unsigned h = hash(key);
    for (unsigned i = 0; i < kSlots; ++i) {
      unsigned s = (h + i) & (kSlots - 1);
      std::uintptr_t k = keys_[s].load(std::memory_order_acquire);
      if (k == 0) return;
      if (k == key) keys_[s].compare_exchange_strong(k, kTombstone, std::memory_order_acq_rel);
    }
  }

  void reset() {
    for (auto& k : keys_) k.store(0, std::memory_order_relaxed);
  }

 private:
  static unsigned hash(std::uintptr_t key) {
    return static_cast<unsigned>((key >> 4) * 0x9E3779B97F4A7C15ull >> 52) & (kSlots - 1);
  }
  static constexpr std::uintptr_t kTombstone = ~std::uintptr_t{0};
  static_assert((kSlots & (kSlots - 1)) == 0, "kSlots is a power of two");
  std::atomic<std::uintptr_t> keys_[kSlots] = {};
};

}  // namespace gswap::interpose
