// upload_scan.h: small host-to-device copies scanned for device pointers (fact 4).
//
// A kernel may follow an array of device pointers (batched GEMM) that no launch parameter names.
// Such arrays reach device memory as small copies from host memory: cuMemcpyHtoD*, a unified
// cuMemcpy* whose source is a host address, a 2D/3D copy from host memory, or one copy of a batch.
// Their bytes are scanned word by word; the regions they name stay resident from then on. Large
// copies (data) are not scanned, and cost nothing here beyond a size compare.
//
// Whether a unified address is host memory is asked of the driver, and only for small copies whose
// source is not in gswap's reservation. Scanning happens before the copy is enqueued, on the
// calling thread; no state of its own.
#pragma once

#include <cstddef>
#include <cstdint>

#include "interpose/access.h"
#include "interpose/driver.h"
#include "interpose/log.h"

namespace gswap::interpose {

// Uploads up to this size are scanned: pointer arrays are small, data batches are not.
inline constexpr std::size_t kPointerScanMax = 16 << 10;

// Whether a copy of n bytes is small enough to be a pointer array, while regions exist.
inline bool may_carry_pointers(std::size_t n) {
  return n >= 8 && n <= kPointerScanMax && fast().active.load(std::memory_order_acquire);
}

// Whether p, the source of a unified-address copy, is host memory. gswap's reservation is device
// memory; otherwise the driver reports pinned memory as host and does not know pageable memory,
// which a unified copy then reads as host memory itself (so reading it here is as safe as the
// copy). Device, managed and array memory are never read on the host.
inline bool host_source(CUdeviceptr p) {
  const RegionMap& map = fast().map;
  if (p - map.base() < map.span() || !real().cuPointerGetAttribute) return false;
  unsigned int type = 0;
  CUresult e = real().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
  if (e == CUDA_SUCCESS) return type == CU_MEMORYTYPE_HOST;
  return e == CUDA_ERROR_INVALID_VALUE;
}

// Whether a kernel can read p, the destination of a unified-address copy: any memory the driver
// knows (device, managed, pinned host) or a region; a copy into pageable host memory is not an
// upload.
inline bool kernel_visible(CUdeviceptr p) {
  const RegionMap& map = fast().map;
  if (p - map.base() < map.span()) return true;
  unsigned int type = 0;
  return real().cuPointerGetAttribute &&
         real().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p) == CUDA_SUCCESS;
}

// Whether a box of width x height x depth bytes is small enough to be a pointer array (no
// product is formed before it is known not to overflow).
inline bool small_box(std::size_t width, std::size_t height, std::size_t depth) {
  if (width < 8 || height == 0 || depth == 0) return false;
  if (height > kPointerScanMax || depth > kPointerScanMax) return false;
  if (width > kPointerScanMax / height / depth) return false;
  return may_carry_pointers(width * height * depth);
}

// Rows of host bytes, `width` each, `pitch` apart, `rows` of them: what a 2D/3D copy (rows of
// every layer, in order) or a pointer-operand batch copy reads from host memory.
inline void scan_host_rows(const void* host, std::size_t width, std::size_t pitch, std::size_t rows,
                           TouchSet* t) {
  const unsigned char* p = static_cast<const unsigned char*>(host);
  for (std::size_t r = 0; r < rows; ++r) scan_bytes(fast().map, p + r * pitch, width, t);
}

// The regions named by scanned uploads stay resident from now on.
inline CUresult keep_named(TouchSet& t, CUstream s, bool per_thread) {
  if (t.overflow)
    return keep_all_resident(
        "a host-to-device copy naming more allocations than gswap found memory to list");
  if (t.n == 0) return CUDA_SUCCESS;
  GSWAP_LOG_ONCE(
      kInfo,
      "a host-to-device copy carries device pointers; the allocations it names stay resident");
  return keep_resident(t, s, per_thread);
}

}  // namespace gswap::interpose
