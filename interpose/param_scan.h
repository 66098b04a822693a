// param_scan.h: which regions a launch touches, from its parameter bytes.
//
// Every 8-byte-aligned word of every parameter is looked up, so interior pointers and pointers
// inside by-value structs (TensorIterator arrays, multi_tensor_apply metadata) count, and so do
// one-past-the-end pointers (see scan_word). Pure and lock-free: unit-tested without a driver.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "interpose/region_map.h"

namespace gswap::interpose {

// A kernel's parameter layout, as cuFuncGetParamInfo reports it. Immutable once published.
struct ParamLayout {
  std::uint32_t count = 0;
  const std::uint32_t* offsets = nullptr;
  const std::uint32_t* sizes = nullptr;
};

// The distinct regions one call touches. The first kCapacity live inline, so the launch path
// allocates nothing; a call naming more (a multi-tensor optimizer kernel given 140 tensors) moves
// them to the heap, doubling as it grows.
struct TouchSet {
  static constexpr std::size_t kCapacity = 128;
  Region** regions = inline_;
  std::size_t n = 0;
  bool overflow = false;  // more distinct regions than memory could be found for

  TouchSet() = default;
  TouchSet(const TouchSet& o) { *this = o; }
  TouchSet& operator=(const TouchSet& o) {
    if (this == &o) return *this;
    n = 0;
    overflow = o.overflow;
    for (std::size_t i = 0; i < o.n; ++i) push(o.regions[i]);
    return *this;
  }
  ~TouchSet() {
    if (regions != inline_) std::free(regions);
  }

  void add(Region* r) {
    for (std::size_t i = 0; i < n; ++i)
      if (regions[i] == r) return;
    push(r);
  }
  // The regions [addr, addr + bytes) touches: only its two ends are looked up, because a copy or
  // memset may not span allocations.
  void add_range(const RegionMap& map, std::uint64_t addr, std::uint64_t bytes) {
    if (bytes == 0) return;
    if (Region* r = map.find(addr)) add(r);
    if (bytes > 1)
      if (Region* r = map.find(addr + bytes - 1)) add(r);
  }

 private:
  void push(Region* r) {
    if (n == capacity_) {
      const std::size_t grown = capacity_ * 2;
      auto* p = static_cast<Region**>(std::malloc(grown * sizeof(Region*)));
      if (!p) {
        overflow = true;
        return;
      }
      std::memcpy(p, regions, n * sizeof(Region*));
      if (regions != inline_) std::free(regions);
      regions = p;
      capacity_ = grown;
    }
    regions[n++] = r;
  }

  Region* inline_[kCapacity];
  std::size_t capacity_ = kCapacity;
};

// The region one word of parameter bytes names, if any. A one-past-the-end pointer
// (`end = base + size`, which a kernel may be given alone and read backwards from) needs nothing
// more: residency follows every region with one unmapped guard granule that the map assigns to
// the region before it, so `end` finds the region it ends, never the next one.
inline void scan_word(const RegionMap& map, std::uint64_t w, TouchSet* out) {
  if (Region* r = map.find(w)) out->add(r);
}

// Scans `bytes` bytes at p word by word (the words are 8-byte aligned relative to p).
inline void scan_bytes(const RegionMap& map, const void* p, std::size_t bytes, TouchSet* out) {
  const unsigned char* c = static_cast<const unsigned char*>(p);
  for (std::size_t off = 0; off + 8 <= bytes; off += 8) {
    std::uint64_t w;
    std::memcpy(&w, c + off, 8);
    scan_word(map, w, out);
  }
}

// kernelParams form: params[i] points at parameter i, whose size the layout gives.
inline void scan_kernel_params(const RegionMap& map, const ParamLayout& layout, void* const* params,
                               TouchSet* out) {
  for (std::uint32_t i = 0; i < layout.count; ++i)
    if (layout.sizes[i] >= 8) scan_bytes(map, params[i], layout.sizes[i], out);
}

// extra form: CU_LAUNCH_PARAM_BUFFER_POINTER / _SIZE pairs, ended by CU_LAUNCH_PARAM_END.
// Returns false for an array the driver refuses with CUDA_ERROR_INVALID_VALUE: a key other than
// those three, no BUFFER_SIZE, or no buffer for a size above 0. Such a launch never runs, so it
// touches nothing; the caller answers it as the driver does, and nothing else changes. (An
// unknown key cannot even be skipped safely: nothing says whether a value follows it.)
inline bool scan_extra(const RegionMap& map, void* const* extra, TouchSet* out) {
  const void* buf = nullptr;
  std::size_t size = 0;
  bool have_size = false;
  for (std::size_t i = 0; extra[i] != nullptr; i += 2) {
    auto key = reinterpret_cast<std::uintptr_t>(extra[i]);
    if (key == 0x01) {
      buf = extra[i + 1];      // CU_LAUNCH_PARAM_BUFFER_POINTER
    } else if (key == 0x02) {  // CU_LAUNCH_PARAM_BUFFER_SIZE
      if (extra[i + 1] == nullptr) return false;
      size = *static_cast<const std::size_t*>(extra[i + 1]);
      have_size = true;
    } else {
      return false;
    }
  }
  if (!have_size || (size > 0 && buf == nullptr)) return false;
  scan_bytes(map, buf, size, out);
  return true;
}

}  // namespace gswap::interpose
