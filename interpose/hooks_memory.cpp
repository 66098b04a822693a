// hooks_memory.cpp: allocation, free and memory queries. Large allocations become regions
// (residency.cpp); small ones go to the driver and count against the budget. cuMemAllocAsync is
// emulated as a region rather than forwarded, because stream-ordered pool memory cannot be
// unmapped and remapped at the same address.
#include "interpose/driver.h"
#include "interpose/hooks.h"
#include "interpose/log.h"
#include "interpose/residency.h"

#include <atomic>

namespace gswap::interpose {
namespace {

CUresult alloc(CUdeviceptr* out, size_t bytes, CUstream s, bool async, bool pt, CUmemoryPool pool) {
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  bool handled = false;
  CUresult e = region_alloc(out, bytes, s, pt, &handled);
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
  return alloc(p, n, s, true, false, pool);
}
CUresult hook_cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* p, size_t n, CUmemoryPool pool,
                                           CUstream s) {
  return alloc(p, n, s, true, true, pool);
}
CUresult hook_cuMemFreeAsync(CUdeviceptr p, CUstream s) {
  return free_any(p, s, true, false);
}
CUresult hook_cuMemFreeAsync_ptsz(CUdeviceptr p, CUstream s) {
  return free_any(p, s, true, true);
}

CUresult hook_cuMemGetInfo_v2(size_t* free, size_t* total) {
  if (memory_info(free, total)) return CUDA_SUCCESS;
  return real().cuMemGetInfo_v2(free, total);
}

CUresult hook_cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  CUresult e = real().cuDeviceTotalMem_v2(bytes, dev);
  if (e == CUDA_SUCCESS && bytes) *bytes = budget_total(*bytes);
  return e;
}

CUresult hook_cuMemGetAddressRange_v2(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  // A region is a slice of gswap's one reservation: the driver would describe the reservation.
  if (region_range(p, base, size)) return CUDA_SUCCESS;
  return real().cuMemGetAddressRange_v2(base, size, p);
}

namespace {
// Attributes of a region address answered without the driver: an evicted region is unmapped, and
// the driver would describe gswap's reservation rather than the application's allocation.
bool region_attribute(CUpointer_attribute a, void* data, CUdeviceptr p) {
  CUdeviceptr base = 0;
  size_t size = 0;
  CUcontext ctx = nullptr;
  CUdevice dev = 0;
  if (!data || !region_range(p, &base, &size) || !region_owner(&ctx, &dev)) return false;
  switch (a) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      *static_cast<CUcontext*>(data) = ctx;
      return true;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      *static_cast<unsigned int*>(data) = CU_MEMORYTYPE_DEVICE;
      return true;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      *static_cast<CUdeviceptr*>(data) = p;
      return true;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      *static_cast<int*>(data) = dev;
      return true;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      *static_cast<CUdeviceptr*>(data) = base;
      return true;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      *static_cast<size_t*>(data) = size;
      return true;
    default:
      return false;  // the driver answers (the region may need to be resident)
  }
}
}  // namespace

CUresult hook_cuPointerGetAttribute(void* data, CUpointer_attribute a, CUdeviceptr p) {
  if (region_attribute(a, data, p)) return CUDA_SUCCESS;
  return real().cuPointerGetAttribute(data, a, p);
}

CUresult hook_cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attrs, void** data,
                                     CUdeviceptr p) {
  CUdeviceptr base = 0;
  size_t size = 0;
  if (!attrs || !data || !region_range(p, &base, &size))
    return real().cuPointerGetAttributes(n, attrs, data, p);
  // Ask the driver for the rest first, then overwrite what gswap knows better.
  CUresult e = real().cuPointerGetAttributes(n, attrs, data, p);
  bool all_ours = true;
  for (unsigned int i = 0; i < n; ++i)
    all_ours = region_attribute(attrs[i], data[i], p) && all_ours;
  return all_ours ? CUDA_SUCCESS : e;
}

CUresult hook_cuIpcGetMemHandle(CUipcMemHandle* h, CUdeviceptr p) {
  // Another process may map it: it must never move (fact 11).
  CUresult e = keep_resident_at(p, "cuIpcGetMemHandle");
  if (e != CUDA_SUCCESS) return e;
  return real().cuIpcGetMemHandle(h, p);
}

CUresult hook_cuStreamDestroy_v2(CUstream s) {
  stream_destroyed(s);
  return real().cuStreamDestroy_v2(s);
}

}  // namespace gswap::interpose
