// hooks_memory.cpp: allocation, free and memory queries. Large allocations become regions
// (residency.cpp); small ones go to the driver and count against the budget. cuMemAllocAsync is
// emulated as a region rather than forwarded, because stream-ordered pool memory cannot be
// unmapped and remapped at the same address.
#include "interpose/driver.h"
#include "interpose/hooks.h"
#include "interpose/log.h"
#include "interpose/process.h"

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace gswap::interpose {
namespace {

// Whether `pool` is the current device's current or default memory pool: what a region stands
// in for. Another pool (one of another device, or made for its own properties) and a handle the
// driver does not know are the driver's to answer.
bool device_pool(CUmemoryPool pool) {
  const Real& r = real();
  CUdevice dev = 0;
  if (!pool || !r.cuCtxGetDevice || r.cuCtxGetDevice(&dev) != CUDA_SUCCESS) return false;
  CUmemoryPool p = nullptr;
  if (r.cuDeviceGetMemPool && r.cuDeviceGetMemPool(&p, dev) == CUDA_SUCCESS && p == pool)
    return true;
  p = nullptr;
  return r.cuDeviceGetDefaultMemPool && r.cuDeviceGetDefaultMemPool(&p, dev) == CUDA_SUCCESS &&
         p == pool;
}

// from_pool: cuMemAllocFromPoolAsync, whose pool decides whether a region may stand in.
CUresult alloc(CUdeviceptr* out, size_t bytes, CUstream s, bool async, bool pt, CUmemoryPool pool,
               bool from_pool = false) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  // A stream-ordered call on a stream the driver does not know fails as it does without gswap,
  // before gswap takes a region on it: gswap's own event there would fail only after, and the
  // call report success.
  if (async) {
    if (CUresult e = check_app_stream(s); e != CUDA_SUCCESS) return e;
  }
  if (from_pool && !pool) return CUDA_ERROR_INVALID_VALUE;  // as the driver answers
  if (from_pool && !device_pool(pool)) return arena_alloc(out, bytes, s, async, pt, pool);
  bool handled = false;
  CUresult e = region_alloc(out, bytes, s, async, pt, &handled);
  if (handled) return e;
  return arena_alloc(out, bytes, s, async, pt, pool);
}

}  // namespace

CUresult hook_cuMemAlloc_v2(CUdeviceptr* p, size_t n) {
  return alloc(p, n, nullptr, false, false, nullptr);
}

CUresult hook_cuMemAllocPitch_v2(CUdeviceptr* p, size_t* pitch, size_t w, size_t h, unsigned elem) {
  return arena_alloc_pitch(p, pitch, w, h, elem);
}

CUresult hook_cuMemFree_v2(CUdeviceptr p) {
  return free_any(p, nullptr, false, false);
}

CUresult hook_cuMemAllocAsync(CUdeviceptr* p, size_t n, CUstream s) {
  return alloc(p, n, s, true, false, nullptr);
}
CUresult hook_cuMemAllocAsync_ptsz(CUdeviceptr* p, size_t n, CUstream s) {
  return alloc(p, n, s, true, true, nullptr);
}
CUresult hook_cuMemAllocFromPoolAsync(CUdeviceptr* p, size_t n, CUmemoryPool pool, CUstream s) {
  return alloc(p, n, s, true, false, pool, true);
}
CUresult hook_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* p, size_t n, CUmemoryPool pool,
                                           CUstream s) {
  return alloc(p, n, s, true, true, pool, true);
}
CUresult hook_cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  if (CUresult e = check_app_stream(s); e != CUDA_SUCCESS) return e;
  return free_any(p, s, true, false);
}
CUresult hook_cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
  if (CUresult e = check_app_stream(s); e != CUDA_SUCCESS) return e;
  return free_any(p, s, true, true);
}

CUresult hook_cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (memory_info(free, total)) return CUDA_SUCCESS;
  return real().cuMemGetInfo_v2(free, total);
}

CUresult hook_cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  CUresult e = real().cuDeviceTotalMem_v2(bytes, dev);
  if (e == CUDA_SUCCESS && bytes) *bytes = budget_total(dev, *bytes);
  return e;
}

// The CUDA 2.0 ABIs, with 32-bit sizes: the same answers, capped at 4 GiB - 1 as the driver caps
// its own.
namespace {
unsigned int capped_32(std::uint64_t v) {
  return static_cast<unsigned int>(std::min<std::uint64_t>(v, 0xffffffffu));
}
}  // namespace

CUresult hook_cuMemGetInfo(unsigned int* free, unsigned int* total) {
  std::size_t f = 0, t = 0;
  if (free && total && memory_info(&f, &t)) {
    *free = capped_32(f);
    *total = capped_32(t);
    return CUDA_SUCCESS;
  }
  return real().cuMemGetInfo(free, total);
}

CUresult hook_cuDeviceTotalMem(unsigned int* bytes, CUdevice dev) {
  CUresult e = real().cuDeviceTotalMem(bytes, dev);
  // The budget is below the device's memory, so capping both commutes with taking the least.
  if (e == CUDA_SUCCESS && bytes) *bytes = capped_32(budget_total(dev, *bytes));
  return e;
}

CUresult hook_cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  // A region is a slice of gswap's one reservation: the driver would describe the reservation.
  if (region_range(p, base, size)) return CUDA_SUCCESS;
  if (region_slack(p)) return CUDA_ERROR_NOT_FOUND;  // as for memory nobody allocated
  return real().cuMemGetAddressRange_v2(base, size, p);
}

namespace {

// What a region looks like to the pointer-attribute queries. Every attribute is answered here,
// never by the driver: an evicted region is unmapped (the driver would fail), and a resident one
// is a slice of gswap's reservation backed by a VMM handle that changes with every restore, so
// the driver's answers would describe gswap's memory, not the application's allocation, and
// would change when the region moves.
struct RegionFacts {
  CUdeviceptr p, base;
  std::size_t size, mapping;  // the allocation, and its granule-aligned slice of the reservation
  CUcontext ctx;
  CUdevice dev;
  unsigned long long id;  // buffer and memory-block id
};

bool region_facts(CUdeviceptr p, RegionFacts* f) {
  CUdeviceptr base = 0;
  std::size_t size = 0;
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  if (!region_range(p, &base, &size) || !region_owner(&ctx, &dev)) return false;
  Region* r = fast().map.find(base);
  if (!r) return false;  // freed meanwhile: the driver answers
  std::uint64_t granule = std::uint64_t{1} << fast().map.shift();
  // Region ids are never reused, so the id is unique and stable over the process's life, as the
  // driver's buffer ids are. The top bit keeps it apart from the ids the driver gives its own
  // allocations (a counter, or on simcuda an address below 2^63).
  *f = {p,
        base,
        size,
        (size + granule - 1) & ~(granule - 1),
        ctx,
        dev,
        (1ull << 63) | __atomic_load_n(&r->id, __ATOMIC_RELAXED)};
  return true;
}

template <class T>
CUresult put(void* data, T value) {
  *static_cast<T*>(data) = value;
  return CUDA_SUCCESS;
}

// One attribute of a region, as the driver answers it for an ordinary device allocation of that
// size. `in_list`: for cuPointerGetAttributes, which writes every attribute it supports (a NULL
// value where there is none) instead of failing.
CUresult region_attribute(CUpointer_attribute a, void* data, const RegionFacts& f, bool in_list) {
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      return put(data, f.ctx);
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      return put<unsigned int>(data, CU_MEMORYTYPE_DEVICE);
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      return put(data, f.p);
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      // Device memory has no host address.
      if (in_list) return put<void*>(data, nullptr);
      return CUDA_ERROR_INVALID_VALUE;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      // Never set: the driver refuses to set it on VMM memory, and gswap's synchronous calls do
      // not promise more than the driver's default.
      return put<int>(data, 0);
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      return put<unsigned long long>(data, f.id);
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      return put<int>(data, 0);
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      return put<int>(data, f.dev);
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      // A region is VMM memory, which cuIpcGetMemHandle cannot export.
      return put<int>(data, 0);
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      return put(data, f.base);
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      return put<std::size_t>(data, f.size);
    case CU_POINTER_ATTRIBUTE_MAPPED:
      // Mapped as far as the application can tell: gswap maps it back before any access.
      return put<int>(data, 1);
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      // The physical handle changes on every restore: none may be exported.
      return put<unsigned long long>(data, CU_MEM_HANDLE_TYPE_NONE);
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
      // RDMA registration pins physical pages, which gswap unmaps on eviction.
      return put<int>(data, 0);
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: {
      // gswap maps regions for their own device only; another device has no access.
      CUdevice current = f.dev;
      if (real().cuCtxGetDevice && real().cuCtxGetDevice(&current) != CUDA_SUCCESS) current = f.dev;
      return put<unsigned int>(data, current == f.dev ? CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE
                                                      : CU_POINTER_ATTRIBUTE_ACCESS_FLAG_NONE);
    }
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      // cuMemAllocAsync is emulated with regions, not a pool.
      return put<CUmemoryPool>(data, nullptr);
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
      return put<std::size_t>(data, f.mapping);
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
      return put(data, f.base);
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
      return put<int>(data, 0);
    case CU_POINTER_ATTRIBUTE_P2P_TOKENS:
      // Tokens let a kernel driver pin the physical pages, which gswap moves: not offered.
      // cuPointerGetAttributes does not support this attribute at all.
      return in_list ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
    default:
      return CUDA_ERROR_INVALID_VALUE;  // not an attribute this driver API defines
  }
}

}  // namespace

CUresult hook_cuPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr p) {
  RegionFacts f;
  if (region_facts(p, &f)) return region_attribute(a, data, f, false);
  if (region_slack(p)) return CUDA_ERROR_INVALID_VALUE;  // as for memory nobody allocated
  return real().cuPointerGetAttribute(data, a, p);
}

CUresult hook_cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attrs, void** data,
                                     CUdeviceptr p) {
  RegionFacts f;
  // Past a region's end, in the rest of its mapping: the driver's answers for a pointer it does
  // not know (defaults, CUDA_SUCCESS), whether the region is resident or not.
  if (attrs && data && region_slack(p)) return real().cuPointerGetAttributes(n, attrs, data, 0);
  if (!attrs || !data || !region_facts(p, &f))
    return real().cuPointerGetAttributes(n, attrs, data, p);
  // As the driver does: every requested attribute is written, or the call fails.
  for (unsigned int i = 0; i < n; ++i)
    if (CUresult e = region_attribute(attrs[i], data[i], f, true); e != CUDA_SUCCESS) return e;
  return CUDA_SUCCESS;
}

CUresult hook_cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr p) {
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!region_range(p, &base, &size)) return real().cuIpcGetMemHandle(h, p);
  // A region is VMM memory, which legacy IPC cannot export: the driver refuses it, and the
  // region is left free to move. Where a driver exports it, another process may map it: it must
  // never move again (fact 11).
  CUresult e = real().cuIpcGetMemHandle(h, p);
  if (e != CUDA_SUCCESS) {
    GSWAP_LOG_ONCE(kWarn,
                   "cuIpcGetMemHandle -> %d: gswap's regions are VMM memory, which legacy IPC "
                   "cannot export (allocations below GSWAP_SWAP_THRESHOLD stay the driver's "
                   "own)",
                   (int)e);
    return e;
  }
  return keep_resident_at(p, "cuIpcGetMemHandle");
}

// Non-blocking streams are remembered: a cuMemFree of a region waits for them (residency.cpp).
CUresult hook_cuStreamCreate(CUstream* s, unsigned int flags) {
  CUresult e = real().cuStreamCreate(s, flags);
  if (e == CUDA_SUCCESS) stream_created(*s, flags);
  return e;
}

CUresult hook_cuStreamCreateWithPriority(CUstream* s, unsigned int flags, int priority) {
  CUresult e = real().cuStreamCreateWithPriority(s, flags, priority);
  if (e == CUDA_SUCCESS) stream_created(*s, flags);
  return e;
}

namespace {
// Both ABIs of cuStreamDestroy: gswap forgets the stream first, so that no swap-out is ordered
// after a handle the driver may reuse.
CUresult destroy_stream(CUstream s, CUresult (*destroy)(CUstream)) {
  const CUcontext tracked = stream_destroyed(s);
  const CUresult e = destroy(s);
  if (e != CUDA_SUCCESS) stream_destroy_failed(s, tracked);  // it lives on
  return e;
}
}  // namespace

CUresult hook_cuStreamDestroy_v2(CUstream s) {
  return destroy_stream(s, real().cuStreamDestroy_v2);
}
CUresult hook_cuStreamDestroy(CUstream s) {
  return destroy_stream(s, real().cuStreamDestroy);
}

}  // namespace gswap::interpose
