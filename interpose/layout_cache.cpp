// layout_cache.cpp: see layout_cache.h. Locking: g_fill_mutex serialises fills; lookups are
// lock-free acquire loads.
#include "interpose/layout_cache.h"

#include <mutex>
#include <vector>

#include "interpose/driver.h"

namespace gswap::interpose {
namespace {

constexpr unsigned kSlots = 1u << 14;
struct Slot {
  std::atomic<std::uintptr_t> key{0};
  std::atomic<const CachedLayout*> value{nullptr};
};
Slot g_slots[kSlots];
std::mutex g_fill_mutex;

unsigned slot_of(std::uintptr_t key) {
  return static_cast<unsigned>((key * 0x9E3779B97F4A7C15ull) >> 50) & (kSlots - 1);
}

// Asks the driver for parameter i until it answers CUDA_ERROR_INVALID_VALUE (past the last one).
bool ask(bool as_kernel, CUfunction f, std::vector<std::uint32_t>* offsets,
         std::vector<std::uint32_t>* sizes) {
  offsets->clear();
  sizes->clear();
  auto fn_func = real().cuFuncGetParamInfo;
  auto fn_kernel = real().cuKernelGetParamInfo;
  if (as_kernel ? !fn_kernel : !fn_func) return false;
  for (size_t i = 0;; ++i) {
    size_t off = 0, size = 0;
    CUresult e = as_kernel ? fn_kernel(reinterpret_cast<CUkernel>(f), i, &off, &size)
                           : fn_func(f, i, &off, &size);
    if (e == CUDA_ERROR_INVALID_VALUE) return true;
    if (e != CUDA_SUCCESS) return false;
    offsets->push_back(static_cast<std::uint32_t>(off));
    sizes->push_back(static_cast<std::uint32_t>(size));
  }
}

const CachedLayout* query(CUfunction f) {
  std::vector<std::uint32_t> offsets, sizes;
  // f may be a CUkernel cast to CUfunction (fact 3): when the function query fails or finds no
  // parameter, ask again as a kernel.
  bool known = ask(false, f, &offsets, &sizes);
  if (!known || offsets.empty()) {
    std::vector<std::uint32_t> o2, s2;
    if (ask(true, f, &o2, &s2) && (!known || !o2.empty())) {
      known = true;
      offsets.swap(o2);
      sizes.swap(s2);
    }
  }
  auto* c = new CachedLayout();
  c->known = known;
  if (known) {
    auto* o = new std::uint32_t[offsets.size() + 1];
    auto* s = new std::uint32_t[sizes.size() + 1];
    for (size_t i = 0; i < offsets.size(); ++i) {
      o[i] = offsets[i];
      s[i] = sizes[i];
    }
    c->layout.count = static_cast<std::uint32_t>(offsets.size());
    c->layout.offsets = o;
    c->layout.sizes = s;
  }
  return c;
}

}  // namespace

const CachedLayout* layout_of(CUfunction f) {
  auto key = reinterpret_cast<std::uintptr_t>(f);
  unsigned h = slot_of(key);
  for (unsigned i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[(h + i) & (kSlots - 1)];
    std::uintptr_t k = s.key.load(std::memory_order_acquire);
    if (k == key) {
      if (const CachedLayout* v = s.value.load(std::memory_order_acquire)) return v;
      break;  // being filled by another thread
    }
    if (k == 0) break;
  }
  std::lock_guard<std::mutex> lock(g_fill_mutex);
  for (unsigned i = 0; i < kSlots; ++i) {
    Slot& s = g_slots[(h + i) & (kSlots - 1)];
    std::uintptr_t k = s.key.load(std::memory_order_acquire);
    if (k == key) {
      if (const CachedLayout* v = s.value.load(std::memory_order_acquire)) return v;
    }
    if (k == 0 || k == key) {
      const CachedLayout* c = query(f);
      s.key.store(key, std::memory_order_release);
      s.value.store(c, std::memory_order_release);
      return c;
    }
  }
  // Table full (more than 16384 distinct functions): still correct, not cached; each such
  // launch asks the driver again and keeps one more small layout.
  return query(f);
}

void layout_cache_reset() {
  for (auto& s : g_slots) {
    s.value.store(nullptr, std::memory_order_relaxed);
    s.key.store(0, std::memory_order_relaxed);
  }
}

}  // namespace gswap::interpose
