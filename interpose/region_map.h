// region_map.h: address -> region lookup for the launch path.
//
// All swappable regions live inside one large VA reservation made at init, carved at granularity
// boundaries. So the lookup is direct: (addr - base) >> shift indexes a table of Region pointers,
// one per granule. That is O(1), exact (regions never share a granule), needs no hashing, and one
// compare rejects every address outside the reservation (host pointers, sizes, arena memory).
//
// Concurrency: readers (any thread) use acquire loads and take no lock. Writers (set/clear on
// alloc/free) must be serialised by the caller (the residency mutex). A reader may see a region
// that is being freed: Region objects are recycled, never freed, and the caller checks the state.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "interpose/region.h"

namespace gswap::interpose {

class RegionMap {
 public:
  RegionMap() = default;
  RegionMap(const RegionMap&) = delete;
  RegionMap& operator=(const RegionMap&) = delete;
  ~RegionMap();

  // Covers [base, base + span) with granules of 1 << shift bytes. Returns false when the table
  // cannot be allocated. Called once, before any reader.
  bool init(std::uint64_t base, std::uint64_t span, unsigned shift);
  void reset();  // back to empty and uninitialised (after fork)

  Region* find(std::uint64_t addr) const {
    std::uint64_t off = addr - base_;
    if (off >= span_) return nullptr;
    return slots_[off >> shift_].load(std::memory_order_acquire);
  }

  // Writers: [addr, addr + bytes) must be granularity-aligned and inside the span.
  void set(std::uint64_t addr, std::uint64_t bytes, Region* r);
  void clear(std::uint64_t addr, std::uint64_t bytes) { set(addr, bytes, nullptr); }

  std::uint64_t base() const { return base_; }
  std::uint64_t span() const { return span_; }
  unsigned shift() const { return shift_; }

 private:
  std::uint64_t base_ = 0;
  std::uint64_t span_ = 0;  // 0 until init: every find misses
  unsigned shift_ = 21;
  std::atomic<Region*>* slots_ = nullptr;
  std::size_t num_slots_ = 0;
};

}  // namespace gswap::interpose
