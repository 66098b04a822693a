// memory.cpp: device capacity, linear and managed allocations, pinned host memory, VMM
// (reserve/create/map/access/unmap on mmap and memfd), pointer queries, pools and IPC handles.
//
// g().mem_mu guards ranges, reservations and phys; it is held shared by copy validation and
// exclusively by every change. Capacity is an atomic per device, so OOM is decided without it.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>

#include "internal.h"

namespace simcuda {

static constexpr size_t kPage = 4096;
static size_t round_up(size_t v, size_t a) {
  return (v + a - 1) / a * a;
}
// Linear allocations are charged in 512-byte units, the real driver's minimum alignment.
static size_t charge(size_t n) {
  return round_up(n, 512);
}

CUresult reserve_capacity(int dev, uint64_t bytes) {
  auto& used = g().devices[dev]->used;
  uint64_t cap = g().cfg.capacity;
  uint64_t cur = used.load();
  do {
    if (cur + bytes > cap || cur + bytes < cur) return CUDA_ERROR_OUT_OF_MEMORY;
  } while (!used.compare_exchange_weak(cur, cur + bytes));
  return CUDA_SUCCESS;
}
void release_capacity(int dev, uint64_t bytes) {
  g().devices[dev]->used.fetch_sub(bytes);
}

// The entry containing p, or end(). Caller holds mem_mu.
static std::map<uintptr_t, Range>::iterator find_range(uintptr_t p) {
  auto& m = g().ranges;
  auto it = m.upper_bound(p);
  if (it == m.begin()) return m.end();
  --it;
  if (p >= it->first && p < it->first + it->second.size) return it;
  return m.end();
}

// A graph allocation's address is valid for its node's lifetime; touching it while no memory
// backs it faults, as a use outside its lifetime does on a GPU.
static bool device_visible(const Range& r) {
  if (r.free_pending) return false;
  if (r.kind == RangeKind::VmmMapping) return r.accessible;
  return true;
}

bool device_range_ok(uintptr_t p, size_t n) {
  if (n == 0) return true;
  std::shared_lock lk(g().mem_mu);
  auto it = find_range(p);
  if (it == g().ranges.end() || !device_visible(it->second)) return false;
  uintptr_t end = p + n;
  if (end < p) return false;
  // Adjacent VMM mappings form one contiguous device range; linear allocations stand alone.
  for (;;) {
    uintptr_t rend = it->first + it->second.size;
    if (end <= rend) return true;
    if (it->second.kind != RangeKind::VmmMapping) return false;
    auto next = std::next(it);
    if (next == g().ranges.end() || next->first != rend ||
        next->second.kind != RangeKind::VmmMapping || !device_visible(next->second))
      return false;
    it = next;
  }
}

bool is_device_ptr(uintptr_t p) {
  std::shared_lock lk(g().mem_mu);
  auto it = find_range(p);
  return it != g().ranges.end() && it->second.kind != RangeKind::Pinned &&
         it->second.kind != RangeKind::Registered;
}

bool in_unmapped_reservation(uintptr_t p) {
  std::shared_lock lk(g().mem_mu);
  auto it = g().reservations.upper_bound(p);
  if (it == g().reservations.begin()) return false;
  --it;
  if (p >= it->first + it->second) return false;
  auto r = find_range(p);
  return r == g().ranges.end() || !device_visible(r->second);
}

static void* map_anon(size_t len) {
  void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                 -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

// `stream_ordered` allocations (cuMemAllocAsync and friends) are legal during stream capture;
// the synchronous allocators are not.
static CUresult linear_alloc(CUdeviceptr* dptr, size_t n, RangeKind kind, unsigned flags,
                             bool stream_ordered = false) {
  Ctx* c = nullptr;
  if (CUresult r = need_ctx(&c)) return r;
  if (!dptr || n == 0) return CUDA_ERROR_INVALID_VALUE;
  if (!stream_ordered && capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (CUresult r = reserve_capacity(c->device, charge(n))) return r;
  size_t len = round_up(n, kPage);
  void* p = map_anon(len);
  if (!p) {
    release_capacity(c->device, charge(n));
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Range r;
  r.size = n;
  r.kind = kind;
  r.device = c->device;
  r.map_len = len;
  r.flags = flags;
  {
    std::unique_lock lk(g().mem_mu);
    g().ranges[reinterpret_cast<uintptr_t>(p)] = r;
  }
  *dptr = reinterpret_cast<CUdeviceptr>(p);
  return CUDA_SUCCESS;
}

// Removes a linear/managed allocation; INVALID_VALUE when p is not the start of a live one.
static CUresult linear_free(uintptr_t p, bool sync_first) {
  Range r;
  {
    std::unique_lock lk(g().mem_mu);
    auto it = g().ranges.find(p);
    if (it == g().ranges.end() || it->second.free_pending ||
        (it->second.kind != RangeKind::Linear && it->second.kind != RangeKind::Managed))
      return CUDA_ERROR_INVALID_VALUE;
    r = it->second;
    g().ranges.erase(it);
  }
  munmap(reinterpret_cast<void*>(p), r.map_len);
  release_capacity(r.device, charge(r.size));
  return CUDA_SUCCESS;
}

std::shared_ptr<GraphMem> graph_mem_at(uintptr_t p) {
  std::shared_lock lk(g().mem_mu);
  auto it = g().graph_mems.find(p);
  return it == g().graph_mems.end() ? nullptr : it->second;
}

void free_async_now(uintptr_t p) {
  Range r;
  {
    std::unique_lock lk(g().mem_mu);
    auto it = g().ranges.find(p);
    if (it == g().ranges.end()) return;
    r = it->second;
    g().ranges.erase(it);
  }
  munmap(reinterpret_cast<void*>(p), r.map_len);
  release_capacity(r.device, charge(r.size));
}

}  // namespace simcuda

using namespace simcuda;

SC_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t n) {
  SC_ENTRY(cuMemAlloc_v2);
  return linear_alloc(dptr, n, RangeKind::Linear, 0);
}
SC_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t n, unsigned int flags) {
  SC_ENTRY(cuMemAllocManaged);
  return linear_alloc(dptr, n, RangeKind::Managed, flags);
}
SC_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t w, size_t h,
                                      unsigned int elem) {
  SC_ENTRY(cuMemAllocPitch_v2);
  if (!pitch || w == 0 || h == 0 || (elem != 4 && elem != 8 && elem != 16))
    return CUDA_ERROR_INVALID_VALUE;
  size_t p = round_up(w, 512);
  CUresult r = linear_alloc(dptr, p * h, RangeKind::Linear, 0);
  if (r == CUDA_SUCCESS) *pitch = p;
  return r;
}
SC_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  SC_ENTRY(cuMemFree_v2);
  if (CUresult r = check_init()) return r;
  if (p == 0) return CUDA_SUCCESS;
  if (capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  // cuMemFree synchronises with the device on real drivers: work still using p must finish.
  if (Ctx* c = current_ctx(); c && live(g().ctxs, c)) sync_ctx(c);
  if (std::shared_ptr<GraphMem> gm = graph_mem_at(static_cast<uintptr_t>(p)))
    return graph_mem_free_now(gm);
  return linear_free(static_cast<uintptr_t>(p), true);
}

static CUresult alloc_async(CUdeviceptr* dptr, size_t n, CUstream h, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (CUresult r = legacy_use(s)) return r;
  // During a capture, an allocation node of the graph.
  bool captured = false;
  if (s->capture.load(std::memory_order_acquire)) {
    CUresult r = graph_mem_alloc(s, n, dptr, &captured);
    if (captured || r) return r;
  }
  // Outside one the allocation exists at once, which satisfies every stream-ordered use of it.
  return linear_alloc(dptr, n, RangeKind::Linear, 0, true);
}
SC_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t n, CUstream h) {
  SC_ENTRY(cuMemAllocAsync);
  return alloc_async(dptr, n, h, false);
}
SC_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t n, CUstream h) {
  SC_ENTRY(cuMemAllocAsync_ptsz);
  return alloc_async(dptr, n, h, true);
}
// The one default pool per device: an opaque non-null token.
static CUmemoryPool default_pool(int dev) {
  return reinterpret_cast<CUmemoryPool>(reinterpret_cast<uintptr_t>(&g().devices[dev]->used));
}
static CUresult default_mem_pool(CUmemoryPool* pool, CUdevice dev) {
  if (CUresult r = check_init()) return r;
  if (!pool) return CUDA_ERROR_INVALID_VALUE;
  if (dev < 0 || dev >= static_cast<int>(g().devices.size())) return CUDA_ERROR_INVALID_DEVICE;
  *pool = default_pool(dev);
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice dev) {
  SC_ENTRY(cuDeviceGetDefaultMemPool);
  return default_mem_pool(pool, dev);
}
SC_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  SC_ENTRY(cuDeviceGetMemPool);
  return default_mem_pool(pool, dev);
}
static CUresult alloc_from_pool(CUdeviceptr* dptr, size_t n, CUmemoryPool pool, CUstream h,
                                bool pt) {
  if (CUresult r = check_init()) return r;
  bool known = false;
  for (size_t i = 0; i < g().devices.size(); ++i)
    known |= pool == default_pool(static_cast<int>(i));
  if (!known) return CUDA_ERROR_INVALID_VALUE;
  return alloc_async(dptr, n, h, pt);
}
SC_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t n, CUmemoryPool pool,
                                           CUstream h) {
  SC_ENTRY(cuMemAllocFromPoolAsync);
  return alloc_from_pool(dptr, n, pool, h, false);
}
SC_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t n, CUmemoryPool pool,
                                                CUstream h) {
  SC_ENTRY(cuMemAllocFromPoolAsync_ptsz);
  return alloc_from_pool(dptr, n, pool, h, true);
}

static CUresult free_async(CUdeviceptr p, CUstream h, bool pt) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (CUresult r = legacy_use(s)) return r;
  if (std::shared_ptr<GraphMem> gm = graph_mem_at(static_cast<uintptr_t>(p)))
    return graph_mem_free_async(s, gm);
  // During a capture a free becomes a free node, which must name a graph allocation.
  if (s->capture.load(std::memory_order_acquire)) return CUDA_ERROR_INVALID_VALUE;
  {
    std::unique_lock lk(g().mem_mu);
    auto it = g().ranges.find(static_cast<uintptr_t>(p));
    if (it == g().ranges.end() || it->second.free_pending || it->second.kind != RangeKind::Linear)
      return CUDA_ERROR_INVALID_VALUE;
    it->second.free_pending = true;  // a second free is a double free from now on
  }
  Op op;
  op.kind = OpKind::FreeAsync;
  op.free_ptr = static_cast<uintptr_t>(p);
  return submit(s, std::move(op));
}
SC_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, CUstream h) {
  SC_ENTRY(cuMemFreeAsync);
  return free_async(p, h, false);
}
SC_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream h) {
  SC_ENTRY(cuMemFreeAsync_ptsz);
  return free_async(p, h, true);
}

static CUresult mem_get_info(size_t* free_b, size_t* total) {
  Ctx* c = nullptr;
  if (CUresult r = need_ctx(&c)) return r;
  if (!free_b || !total) return CUDA_ERROR_INVALID_VALUE;
  uint64_t cap = g().cfg.capacity, used = g().devices[c->device]->used.load();
  *total = cap;
  *free_b = used >= cap ? 0 : cap - used;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuMemGetInfo_v2(size_t* free_b, size_t* total) {
  SC_ENTRY(cuMemGetInfo_v2);
  return mem_get_info(free_b, total);
}
SC_EXPORT CUresult cuMemGetInfo(unsigned int* free_b, unsigned int* total) {
  SC_ENTRY(cuMemGetInfo);
  size_t f = 0, t = 0;
  CUresult r = mem_get_info(&f, &t);
  if (r) return r;
  if (!free_b || !total) return CUDA_ERROR_INVALID_VALUE;
  *free_b = f > 0xffffffffu ? 0xffffffffu : static_cast<unsigned>(f);
  *total = t > 0xffffffffu ? 0xffffffffu : static_cast<unsigned>(t);
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  SC_ENTRY(cuMemGetAddressRange_v2);
  if (CUresult r = check_init()) return r;
  std::shared_lock lk(g().mem_mu);
  auto it = find_range(static_cast<uintptr_t>(p));
  if (it == g().ranges.end() || it->second.free_pending ||
      it->second.kind == RangeKind::Registered || it->second.kind == RangeKind::Pinned)
    return CUDA_ERROR_NOT_FOUND;
  if (base) *base = it->first;
  if (size) *size = it->second.size;
  return CUDA_SUCCESS;
}

// ---- pinned host memory ----
static CUresult host_alloc(void** pp, size_t n, unsigned flags) {
  if (CUresult r = check_init()) return r;
  if (!pp || n == 0) return CUDA_ERROR_INVALID_VALUE;
  if (capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  size_t len = round_up(n, kPage);
  void* p = map_anon(len);
  if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
  Range r;
  r.size = n;
  r.kind = RangeKind::Pinned;
  r.map_len = len;
  r.flags = flags;
  {
    std::unique_lock lk(g().mem_mu);
    g().ranges[reinterpret_cast<uintptr_t>(p)] = r;
  }
  *pp = p;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuMemAllocHost_v2(void** pp, size_t n) {
  SC_ENTRY(cuMemAllocHost_v2);
  return host_alloc(pp, n, 0);
}
SC_EXPORT CUresult cuMemAllocHost(void** pp, unsigned int n) {
  SC_ENTRY(cuMemAllocHost);
  return host_alloc(pp, n, 0);
}
SC_EXPORT CUresult cuMemHostAlloc(void** pp, size_t n, unsigned int flags) {
  SC_ENTRY(cuMemHostAlloc);
  return host_alloc(pp, n, flags);
}
// Giving pinned memory back waits for the device on real drivers (measured on an H200: behind a
// kernel running on another stream, cuMemFreeHost and cuMemHostUnregister return when it ends).
static void sync_current_ctx() {
  if (Ctx* c = current_ctx(); c && live(g().ctxs, c)) sync_ctx(c);
}
SC_EXPORT CUresult cuMemFreeHost(void* p) {
  SC_ENTRY(cuMemFreeHost);
  if (CUresult r = check_init()) return r;
  if (capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Range r;
  {
    std::unique_lock lk(g().mem_mu);
    auto it = g().ranges.find(reinterpret_cast<uintptr_t>(p));
    if (it == g().ranges.end() || it->second.kind != RangeKind::Pinned)
      return CUDA_ERROR_INVALID_VALUE;
    r = it->second;
    g().ranges.erase(it);
  }
  sync_current_ctx();
  munmap(p, r.map_len);
  return CUDA_SUCCESS;
}
static CUresult host_register(void* p, size_t n, unsigned int flags) {
  if (CUresult r = check_init()) return r;
  if (!p || n == 0) return CUDA_ERROR_INVALID_VALUE;
  if (capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  auto b = reinterpret_cast<uintptr_t>(p);
  std::unique_lock lk(g().mem_mu);
  auto it = g().ranges.lower_bound(b);
  if (it != g().ranges.end() && it->first < b + n) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (find_range(b) != g().ranges.end()) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  Range r;
  r.size = n;
  r.kind = RangeKind::Registered;
  r.flags = flags;
  g().ranges[b] = r;
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t n, unsigned int flags) {
  SC_ENTRY(cuMemHostRegister_v2);
  return host_register(p, n, flags);
}
SC_EXPORT CUresult cuMemHostRegister(void* p, size_t n, unsigned int flags) {
  SC_ENTRY(cuMemHostRegister);
  return host_register(p, n, flags);
}
SC_EXPORT CUresult cuMemHostUnregister(void* p) {
  SC_ENTRY(cuMemHostUnregister);
  if (CUresult r = check_init()) return r;
  if (capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  std::unique_lock lk(g().mem_mu);
  auto it = g().ranges.find(reinterpret_cast<uintptr_t>(p));
  if (it == g().ranges.end() || it->second.kind != RangeKind::Registered)
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  g().ranges.erase(it);
  lk.unlock();
  sync_current_ctx();
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* d, void* p, unsigned int flags) {
  SC_ENTRY(cuMemHostGetDevicePointer_v2);
  if (CUresult r = check_init()) return r;
  if (!d || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::shared_lock lk(g().mem_mu);
  auto it = find_range(reinterpret_cast<uintptr_t>(p));
  if (it == g().ranges.end() ||
      (it->second.kind != RangeKind::Pinned && it->second.kind != RangeKind::Registered))
    return CUDA_ERROR_INVALID_VALUE;
  *d = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the same address
  return CUDA_SUCCESS;
}
SC_EXPORT CUresult cuMemHostGetFlags(unsigned int* flags, void* p) {
  SC_ENTRY(cuMemHostGetFlags);
  if (CUresult r = check_init()) return r;
  std::shared_lock lk(g().mem_mu);
  auto it = find_range(reinterpret_cast<uintptr_t>(p));
  if (!flags || it == g().ranges.end() || it->second.kind != RangeKind::Pinned)
    return CUDA_ERROR_INVALID_VALUE;
  *flags = it->second.flags;
  return CUDA_SUCCESS;
}

// ---- pointer attributes ----
static CUresult pointer_attribute(void* data, CUpointer_attribute attr, CUdeviceptr p) {
  if (CUresult r = check_init()) return r;
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  std::shared_lock lk(g().mem_mu);
  auto it = find_range(static_cast<uintptr_t>(p));
  if (it == g().ranges.end() || it->second.free_pending) return CUDA_ERROR_INVALID_VALUE;
  const Range& r = it->second;
  bool host = r.kind == RangeKind::Pinned || r.kind == RangeKind::Registered;
  switch (attr) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(g().devices[r.device]->primary);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned*>(data) = host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = p;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (!host && r.kind != RangeKind::Managed) return CUDA_ERROR_INVALID_VALUE;
      *static_cast<void**>(data) = reinterpret_cast<void*>(p);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      *static_cast<int*>(data) = r.kind == RangeKind::Managed;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = r.device;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = it->first;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = r.size;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      *static_cast<int*>(data) = 1;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      *static_cast<int*>(data) = r.kind == RangeKind::Linear;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
      *static_cast<unsigned long long*>(data) = it->first;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      *static_cast<int*>(data) = 1;
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      *static_cast<unsigned long long*>(data) =
          r.kind == RangeKind::VmmMapping ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : 0;
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}
SC_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr p) {
  SC_ENTRY(cuPointerGetAttribute);
  return pointer_attribute(data, attr, p);
}
SC_EXPORT CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attrs, void** data,
                                          CUdeviceptr p) {
  SC_ENTRY(cuPointerGetAttributes);
  if (!attrs || !data) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n; ++i) {
    CUresult r = pointer_attribute(data[i], attrs[i], p);
    if (r == CUDA_ERROR_NOT_INITIALIZED) return r;
    // As the real driver does, an unknown pointer answers MEMORY_TYPE 0 instead of failing.
    if (r != CUDA_SUCCESS && attrs[i] == CU_POINTER_ATTRIBUTE_MEMORY_TYPE)
      *static_cast<unsigned*>(data[i]) = 0;
  }
  return CUDA_SUCCESS;
}

// ---- IPC ----
SC_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr p) {
  SC_ENTRY(cuIpcGetMemHandle);
  if (CUresult r = check_init()) return r;
  if (!h) return CUDA_ERROR_INVALID_VALUE;
  std::unique_lock lk(g().mem_mu);
  auto it = g().ranges.find(static_cast<uintptr_t>(p));
  if (it == g().ranges.end() || it->second.kind != RangeKind::Linear)
    return CUDA_ERROR_INVALID_VALUE;
  it->second.ipc_exported = true;
  std::memset(h->reserved, 0, sizeof(h->reserved));
  uint64_t a = it->first, n = it->second.size;
  int pid = getpid();
  std::memcpy(h->reserved, "simcuda", 8);
  std::memcpy(h->reserved + 8, &a, 8);
  std::memcpy(h->reserved + 16, &n, 8);
  std::memcpy(h->reserved + 24, &pid, sizeof(pid));
  return CUDA_SUCCESS;
}

// ---- VMM ----
static CUresult check_prop(const CUmemAllocationProp* prop) {
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (prop->location.id < 0 || prop->location.id >= static_cast<int>(g().devices.size()))
    return CUDA_ERROR_INVALID_DEVICE;
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuMemGetAllocationGranularity(size_t* gran, const CUmemAllocationProp* prop,
                                                 CUmemAllocationGranularity_flags option) {
  SC_ENTRY(cuMemGetAllocationGranularity);
  if (CUresult r = check_init()) return r;
  if (!gran) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_prop(prop)) return r;
  *gran = g().cfg.granularity;
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t align,
                                       CUdeviceptr addr, unsigned long long flags) {
  SC_ENTRY(cuMemAddressReserve);
  if (CUresult r = check_init()) return r;
  size_t gran = g().cfg.granularity;
  if (!ptr || size == 0 || size % gran) return CUDA_ERROR_INVALID_VALUE;
  if (align && (align & (align - 1))) return CUDA_ERROR_INVALID_VALUE;
  size_t a = align > gran ? align : gran;
  void* base = nullptr;
  if (addr && addr % a == 0) {
    void* p = mmap(reinterpret_cast<void*>(addr), size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED && p == reinterpret_cast<void*>(addr))
      base = p;
    else if (p != MAP_FAILED)
      munmap(p, size);
  }
  if (!base) {
    void* p =
        mmap(nullptr, size + a, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    uintptr_t raw = reinterpret_cast<uintptr_t>(p), aligned = round_up(raw, a);
    if (aligned > raw) munmap(p, aligned - raw);
    if (aligned + size < raw + size + a)
      munmap(reinterpret_cast<void*>(aligned + size), raw + size + a - (aligned + size));
    base = reinterpret_cast<void*>(aligned);
  }
  {
    std::unique_lock lk(g().mem_mu);
    g().reservations[reinterpret_cast<uintptr_t>(base)] = size;
  }
  *ptr = reinterpret_cast<CUdeviceptr>(base);
  return CUDA_SUCCESS;
}

static void drop_mapping_locked(std::map<uintptr_t, Range>::iterator it);

SC_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  SC_ENTRY(cuMemAddressFree);
  if (CUresult r = check_init()) return r;
  std::unique_lock lk(g().mem_mu);
  auto it = g().reservations.find(static_cast<uintptr_t>(ptr));
  if (it == g().reservations.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  // Mappings left inside the range are dropped with it (the physical handles stay owned).
  auto m = g().ranges.lower_bound(ptr);
  while (m != g().ranges.end() && m->first < ptr + size) {
    auto next = std::next(m);
    if (m->second.kind == RangeKind::VmmMapping) drop_mapping_locked(m);
    m = next;
  }
  g().reservations.erase(it);
  munmap(reinterpret_cast<void*>(ptr), size);
  return CUDA_SUCCESS;
}

static void maybe_free_phys_locked(uint64_t h) {
  auto it = g().phys.find(h);
  if (it == g().phys.end()) return;
  Phys& ph = it->second;
  if (ph.refs > 0 || ph.mappings > 0) return;
  close(ph.fd);
  release_capacity(ph.prop.location.id, ph.size);
  g().phys.erase(it);
}

static void drop_mapping_locked(std::map<uintptr_t, Range>::iterator it) {
  uint64_t h = it->second.handle;
  auto p = g().phys.find(h);
  if (p != g().phys.end()) p->second.mappings--;
  g().ranges.erase(it);
  maybe_free_phys_locked(h);
}

SC_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                               const CUmemAllocationProp* prop, unsigned long long flags) {
  SC_ENTRY(cuMemCreate);
  if (CUresult r = check_init()) return r;
  if (!handle || size == 0 || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_prop(prop)) return r;
  if (size % g().cfg.granularity) return CUDA_ERROR_INVALID_VALUE;
  int dev = prop->location.id;
  if (CUresult r = reserve_capacity(dev, size)) return r;
  int fd = memfd_create("simcuda-vmm", MFD_CLOEXEC);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(size)) != 0) {
    if (fd >= 0) close(fd);
    release_capacity(dev, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  std::unique_lock lk(g().mem_mu);
  uint64_t h = g().next_phys++;
  Phys ph;
  ph.fd = fd;
  ph.size = size;
  ph.prop = *prop;
  g().phys[h] = ph;
  *handle = h;
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle h) {
  SC_ENTRY(cuMemRelease);
  if (CUresult r = check_init()) return r;
  std::unique_lock lk(g().mem_mu);
  auto it = g().phys.find(h);
  if (it == g().phys.end() || it->second.refs <= 0) return CUDA_ERROR_INVALID_VALUE;
  it->second.refs--;
  maybe_free_phys_locked(h);
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle h, unsigned long long flags) {
  SC_ENTRY(cuMemMap);
  if (CUresult r = check_init()) return r;
  size_t gran = g().cfg.granularity;
  if (flags != 0 || size == 0 || size % gran || offset % gran || ptr % gran)
    return CUDA_ERROR_INVALID_VALUE;
  std::unique_lock lk(g().mem_mu);
  auto ph = g().phys.find(h);
  if (ph == g().phys.end() || ph->second.refs <= 0) return CUDA_ERROR_INVALID_HANDLE;
  if (offset + size > ph->second.size) return CUDA_ERROR_INVALID_VALUE;
  // Must lie inside one reservation.
  auto rv = g().reservations.upper_bound(ptr);
  if (rv == g().reservations.begin()) return CUDA_ERROR_INVALID_VALUE;
  --rv;
  if (ptr + size > rv->first + rv->second) return CUDA_ERROR_INVALID_VALUE;
  // Must not overlap an existing mapping.
  if (find_range(ptr) != g().ranges.end()) return CUDA_ERROR_INVALID_VALUE;
  auto nx = g().ranges.lower_bound(ptr);
  if (nx != g().ranges.end() && nx->first < ptr + size) return CUDA_ERROR_INVALID_VALUE;
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                 ph->second.fd, static_cast<off_t>(offset));
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  Range r;
  r.size = size;
  r.kind = RangeKind::VmmMapping;
  r.device = ph->second.prop.location.id;
  r.handle = h;
  r.offset = offset;
  r.accessible = false;
  g().ranges[ptr] = r;
  ph->second.mappings++;
  return CUDA_SUCCESS;
}

// Collects the mappings exactly covering [ptr, ptr+size); false if any byte is unmapped.
static bool covering_mappings(uintptr_t ptr, size_t size,
                              std::vector<std::map<uintptr_t, Range>::iterator>* out) {
  uintptr_t at = ptr, end = ptr + size;
  auto it = g().ranges.find(ptr);
  if (it == g().ranges.end()) return false;
  while (at < end) {
    if (it == g().ranges.end() || it->first != at || it->second.kind != RangeKind::VmmMapping)
      return false;
    out->push_back(it);
    at += it->second.size;
    ++it;
  }
  return at == end;
}

SC_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                  size_t count) {
  SC_ENTRY(cuMemSetAccess);
  if (CUresult r = check_init()) return r;
  if (!desc || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  int prot = PROT_NONE;
  for (size_t i = 0; i < count; ++i) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
        desc[i].location.id >= static_cast<int>(g().devices.size()))
      return CUDA_ERROR_INVALID_DEVICE;
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
      prot = PROT_READ | PROT_WRITE;
    else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE)
      prot = PROT_READ;
  }
  std::unique_lock lk(g().mem_mu);
  std::vector<std::map<uintptr_t, Range>::iterator> maps;
  if (!covering_mappings(ptr, size, &maps)) return CUDA_ERROR_INVALID_VALUE;
  if (mprotect(reinterpret_cast<void*>(ptr), size, prot) != 0) return CUDA_ERROR_INVALID_VALUE;
  for (auto& m : maps) m->second.accessible = prot != PROT_NONE;
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* loc,
                                  CUdeviceptr ptr) {
  SC_ENTRY(cuMemGetAccess);
  if (CUresult r = check_init()) return r;
  if (!flags || !loc) return CUDA_ERROR_INVALID_VALUE;
  std::shared_lock lk(g().mem_mu);
  auto it = find_range(ptr);
  if (it == g().ranges.end() || it->second.kind != RangeKind::VmmMapping)
    return CUDA_ERROR_INVALID_VALUE;
  *flags =
      it->second.accessible ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_NONE;
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  SC_ENTRY(cuMemUnmap);
  if (CUresult r = check_init()) return r;
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  std::unique_lock lk(g().mem_mu);
  std::vector<std::map<uintptr_t, Range>::iterator> maps;
  if (!covering_mappings(ptr, size, &maps)) return CUDA_ERROR_INVALID_VALUE;
  // Back to an inaccessible placeholder: a later touch faults, as a GPU access would.
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (p == MAP_FAILED) return CUDA_ERROR_UNKNOWN;
  for (auto& m : maps) drop_mapping_locked(m);
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                          CUmemGenericAllocationHandle h) {
  SC_ENTRY(cuMemGetAllocationPropertiesFromHandle);
  if (CUresult r = check_init()) return r;
  if (!prop) return CUDA_ERROR_INVALID_VALUE;
  std::shared_lock lk(g().mem_mu);
  auto it = g().phys.find(h);
  if (it == g().phys.end()) return CUDA_ERROR_INVALID_VALUE;
  *prop = it->second.prop;
  return CUDA_SUCCESS;
}

SC_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* h, void* addr) {
  SC_ENTRY(cuMemRetainAllocationHandle);
  if (CUresult r = check_init()) return r;
  if (!h) return CUDA_ERROR_INVALID_VALUE;
  std::unique_lock lk(g().mem_mu);
  auto it = find_range(reinterpret_cast<uintptr_t>(addr));
  if (it == g().ranges.end() || it->second.kind != RangeKind::VmmMapping)
    return CUDA_ERROR_INVALID_VALUE;
  auto ph = g().phys.find(it->second.handle);
  if (ph == g().phys.end()) return CUDA_ERROR_INVALID_VALUE;
  ph->second.refs++;
  *h = it->second.handle;
  return CUDA_SUCCESS;
}
