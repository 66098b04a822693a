// region_map.cpp: the granule table (see region_map.h). The table is mmap'ed so that untouched
// granules cost no memory.
#include "interpose/region_map.h"

#include <sys/mman.h>

#include "interpose/check.h"

namespace gswap::interpose {

RegionMap::~RegionMap() {
  reset();
}

bool RegionMap::init(std::uint64_t base, std::uint64_t span, unsigned shift) {
  GSWAP_CHECK(slots_ == nullptr);
  std::size_t n = static_cast<std::size_t>(span >> shift);
  void* p = ::mmap(nullptr, n * sizeof(std::atomic<Region*>), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  slots_ = static_cast<std::atomic<Region*>*>(p);  // zero pages read as nullptr
  num_slots_ = n;
  base_ = base;
  shift_ = shift;
  span_ = static_cast<std::uint64_t>(n) << shift;
  return true;
}

void RegionMap::reset() {
  span_ = 0;
  if (slots_) ::munmap(slots_, num_slots_ * sizeof(std::atomic<Region*>));
  slots_ = nullptr;
  num_slots_ = 0;
}

void RegionMap::set(std::uint64_t addr, std::uint64_t bytes, Region* r) {
  GSWAP_CHECK(addr >= base_ && addr - base_ + bytes <= span_);
  GSWAP_CHECK(((addr - base_) & ((1ull << shift_) - 1)) == 0);
  std::size_t first = static_cast<std::size_t>((addr - base_) >> shift_);
  std::size_t count = static_cast<std::size_t>((bytes + (1ull << shift_) - 1) >> shift_);
  for (std::size_t i = 0; i < count; ++i) slots_[first + i].store(r, std::memory_order_release);
}

}  // namespace gswap::interpose
