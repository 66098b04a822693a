// layout_cache.cpp: see layout_cache.h.
//
// An open-addressing table of (function handle, layout), kept at most half full: when a fill
// would pass that, a table twice the size is built, every entry copied into it, and it is
// published with one release store. Lookups load the current table (acquire) and probe it
// without a lock. A reader still probing an older table finds every entry that table had (entries
// are copied, never moved) and, for one it lacks, takes the fill path, which looks in the current
// table under the mutex. Older tables are never freed, since a reader may be inside one at any
// time; together they are smaller than the current one (each is half the size of the next).
//
// A handle whose module is unloaded is forgotten (its slot's value set to null, the layout left
// behind): a lookup then takes the fill path, which asks the driver again and stores the answer
// in the same slot. Only the current table is cleared; a reader in an older one is a launch racing
// the unload of its own module, which the driver does not allow either.
//
// Locking: g_fill_mutex serialises fills, growth, resets and forgetting; lookups take no lock.
#include "interpose/layout_cache.h"

#include <cstring>
#include <mutex>
#include <new>
#include <vector>

#include "interpose/driver.h"
#include "interpose/log.h"

namespace gswap::interpose {
namespace {

struct Slot {
  std::atomic<std::uintptr_t> key{0};
  std::atomic<const CachedLayout*> value{nullptr};
};

struct Table {
  unsigned bits;  // 1 << bits slots
  Slot* slots;
  std::size_t used = 0;  // filled slots (fill mutex)
  std::size_t size() const { return std::size_t{1} << bits; }
  std::uintptr_t mask() const { return size() - 1; }
  std::uintptr_t home(std::uintptr_t key) const {
    return static_cast<std::uintptr_t>((key * 0x9E3779B97F4A7C15ull) >> (64 - bits));
  }
};

// The first table needs no allocation (it covers most programs); later ones come from new.
constexpr unsigned kFirstBits = 14;
Slot g_first_slots[1u << kFirstBits];
Table g_first{kFirstBits, g_first_slots};
std::atomic<Table*> g_table{&g_first};
std::mutex g_fill_mutex;

// key's slot in t, or nullptr. A slot keeps its key once set; its value is null while being
// filled, or forgotten (layout_cache_forget) until the next fill stores a new one.
Slot* slot_of(const Table& t, std::uintptr_t key) {
  std::uintptr_t m = t.mask();
  for (std::uintptr_t i = t.home(key), n = 0; n <= m; i = (i + 1) & m, ++n) {
    std::uintptr_t k = t.slots[i].key.load(std::memory_order_acquire);
    if (k == key) return &t.slots[i];
    if (k == 0) return nullptr;
  }
  return nullptr;
}

// The layout of key in t, or nullptr (absent, being filled, or forgotten).
const CachedLayout* find(const Table& t, std::uintptr_t key) {
  const Slot* s = slot_of(t, key);
  return s ? s->value.load(std::memory_order_acquire) : nullptr;
}

// Under the fill mutex; t has a free slot. The value is stored before the key, so a reader that
// sees the key sees the layout.
void insert(Table& t, std::uintptr_t key, const CachedLayout* c) {
  std::uintptr_t m = t.mask();
  for (std::uintptr_t i = t.home(key);; i = (i + 1) & m) {
    if (t.slots[i].key.load(std::memory_order_relaxed) != 0) continue;
    t.slots[i].value.store(c, std::memory_order_release);
    t.slots[i].key.store(key, std::memory_order_release);
    ++t.used;
    return;
  }
}

// Under the fill mutex: a table twice the size with every entry of t, or nullptr when memory is
// short (then t keeps filling up to its last slot).
Table* grown(const Table& t) {
  unsigned bits = t.bits + 1;
  auto* slots = new (std::nothrow) Slot[std::size_t{1} << bits];
  auto* next = slots ? new (std::nothrow) Table{bits, slots} : nullptr;
  if (!next) {
    delete[] slots;
    return nullptr;
  }
  for (std::uintptr_t i = 0; i <= t.mask(); ++i) {
    std::uintptr_t k = t.slots[i].key.load(std::memory_order_relaxed);
    if (k) insert(*next, k, t.slots[i].value.load(std::memory_order_relaxed));
  }
  return next;
}

enum class Asked { kKnown, kUnknown, kInvalidHandle };

// Asks the driver for parameter i until it answers CUDA_ERROR_INVALID_VALUE (past the last one).
// kInvalidHandle: the driver does not know f at all (its first answer).
Asked ask(bool as_kernel, CUfunction f, std::vector<std::uint32_t>* offsets,
          std::vector<std::uint32_t>* sizes) {
  offsets->clear();
  sizes->clear();
  auto fn_func = real().cuFuncGetParamInfo;
  auto fn_kernel = real().cuKernelGetParamInfo;
  if (as_kernel ? !fn_kernel : !fn_func) return Asked::kUnknown;
  for (size_t i = 0;; ++i) {
    size_t off = 0, size = 0;
    CUresult e = as_kernel ? fn_kernel(reinterpret_cast<CUkernel>(f), i, &off, &size)
                           : fn_func(f, i, &off, &size);
    if (e == CUDA_ERROR_INVALID_VALUE) return Asked::kKnown;
    if (e == CUDA_ERROR_INVALID_HANDLE && i == 0) return Asked::kInvalidHandle;
    if (e != CUDA_SUCCESS) return Asked::kUnknown;
    offsets->push_back(static_cast<std::uint32_t>(off));
    sizes->push_back(static_cast<std::uint32_t>(size));
  }
}

// A handle the driver knows neither as a function nor as a kernel (an unloaded module's, say):
// never cached, since the driver may hand the same value out for a kernel later.
const CachedLayout g_invalid{ParamLayout{}, false, nullptr, {0}, true};

const CachedLayout* query(CUfunction f) {
  std::vector<std::uint32_t> offsets, sizes;
  // f may be a CUkernel cast to CUfunction (fact 3): when the function query fails or finds no
  // parameter, ask again as a kernel.
  const Asked as_function = ask(false, f, &offsets, &sizes);
  bool known = as_function == Asked::kKnown;
  if (!known || offsets.empty()) {
    std::vector<std::uint32_t> o2, s2;
    const Asked as_kernel = ask(true, f, &o2, &s2);
    if (as_kernel == Asked::kKnown && (!known || !o2.empty())) {
      known = true;
      offsets.swap(o2);
      sizes.swap(s2);
    }
    if (as_function == Asked::kInvalidHandle &&
        (as_kernel == Asked::kInvalidHandle || !real().cuKernelGetParamInfo))
      return &g_invalid;
  }
  auto* c = new CachedLayout();
  c->known = known;
  // Its name, for gswapd's traces: as a function, else as a kernel (fact 3).
  const char* name = nullptr;
  if (!(real().cuFuncGetName && real().cuFuncGetName(&name, f) == CUDA_SUCCESS && name) &&
      real().cuKernelGetName)
    if (real().cuKernelGetName(&name, reinterpret_cast<CUkernel>(f)) != CUDA_SUCCESS)
      name = nullptr;
  if (name) {
    std::size_t len = std::strlen(name);
    char* copy = new char[len + 1];
    std::memcpy(copy, name, len + 1);
    c->name = copy;
  }
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
  if (key == 0) {
    // 0 marks an empty slot. The driver refuses a launch of no function; it needs no scan.
    static const CachedLayout none{ParamLayout{}, true};
    return &none;
  }
  if (const CachedLayout* c = find(*g_table.load(std::memory_order_acquire), key)) return c;
  std::lock_guard<std::mutex> lock(g_fill_mutex);
  Table* t = g_table.load(std::memory_order_relaxed);
  Slot* slot = slot_of(*t, key);
  if (slot) {
    if (const CachedLayout* c = slot->value.load(std::memory_order_relaxed)) return c;
    const CachedLayout* c = query(f);  // forgotten: the handle may name another kernel now
    if (!c->invalid_handle) slot->value.store(c, std::memory_order_release);
    return c;
  }
  const CachedLayout* c = query(f);
  if (c->invalid_handle) return c;
  // At most half full keeps probe chains short; the last free slot is never taken, so a probe
  // always ends at an empty slot.
  if (2 * (t->used + 1) > t->size()) {
    if (Table* next = grown(*t)) {
      g_table.store(next, std::memory_order_release);
      t = next;
    } else if (t->used + 2 > t->size()) {
      GSWAP_LOG_ONCE(kWarn, "cannot grow the kernel layout cache: layouts are no longer cached");
      return c;  // correct, not cached (one small layout kept per such launch)
    }
  }
  insert(*t, key, c);
  return c;
}

void layout_cache_forget(bool (*belongs)(CUfunction f, void* ctx), void* ctx) {
  std::lock_guard<std::mutex> lock(g_fill_mutex);
  Table* t = g_table.load(std::memory_order_relaxed);
  for (std::uintptr_t i = 0; i <= t->mask(); ++i) {
    std::uintptr_t k = t->slots[i].key.load(std::memory_order_relaxed);
    if (k && t->slots[i].value.load(std::memory_order_relaxed) &&
        belongs(reinterpret_cast<CUfunction>(k), ctx))
      t->slots[i].value.store(nullptr, std::memory_order_release);  // the layout itself is kept
  }
}

void layout_cache_reset() {
  // After fork, in the child, which has one thread: back to the first table, emptied. Layouts and
  // grown tables of the parent are left behind.
  for (auto& s : g_first_slots) {
    s.value.store(nullptr, std::memory_order_relaxed);
    s.key.store(0, std::memory_order_relaxed);
  }
  g_first.used = 0;
  g_table.store(&g_first, std::memory_order_release);
}

}  // namespace gswap::interpose
