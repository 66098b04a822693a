// va_space.h: first-fit allocator of device addresses inside gswap's one VA reservation.
//
// Freed ranges are coalesced with their neighbours, so a long training run that frees and
// reallocates activations does not fragment the reservation into unusable slivers. Pure (no
// driver), not thread-safe: the residency mutex owns it.
#pragma once

#include <cstdint>
#include <iterator>
#include <map>

namespace gswap::interpose {

class VaSpace {
 public:
  void init(std::uint64_t base, std::uint64_t span) {
    free_.clear();
    if (span) free_[base] = span;
  }

  // The lowest free range that fits, or 0 when none does.
  std::uint64_t alloc(std::uint64_t bytes) {
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->second < bytes) continue;
      std::uint64_t addr = it->first, size = it->second;
      free_.erase(it);
      if (size > bytes) free_[addr + bytes] = size - bytes;
      return addr;
    }
    return 0;
  }

  void release(std::uint64_t addr, std::uint64_t bytes) {
    auto next = free_.lower_bound(addr);
    if (next != free_.end() && addr + bytes == next->first) {
      bytes += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == addr) {
        prev->second += bytes;
        return;
      }
    }
    free_[addr] = bytes;
  }

  std::size_t fragments() const { return free_.size(); }
  std::uint64_t free_bytes() const {
    std::uint64_t n = 0;
    for (const auto& [addr, size] : free_) n += size;
    return n;
  }

 private:
  std::map<std::uint64_t, std::uint64_t> free_;  // address -> size
};

}  // namespace gswap::interpose
