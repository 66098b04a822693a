// hooks_copy.cpp: every cuMemcpy*/cuMemset* form. The device ranges a copy or memset reads and
// writes are its accesses; host pointers and arena memory fall outside the region map and cost
// one compare. Synchronous forms wait for a restore on the host, asynchronous ones on their
// stream. Small copies from host memory (HtoD, unified, 2D/3D) are scanned for device pointers
// first (upload_scan.h).
#include "interpose/access.h"
#include "interpose/driver.h"
#include "interpose/hooks.h"
#include "interpose/log.h"
#include "interpose/upload_scan.h"

namespace gswap::interpose {
namespace {

// What crosses the host link, for gswapd's simulator: a side with no device bytes is host memory
// unless the caller says otherwise (an array side).
constexpr std::uint64_t kLinkFromSides = ~0ull;

// Whether n bytes from p, which lies in region r (if any), run past r's end. The driver refuses
// such a copy or memset (CUDA_ERROR_INVALID_VALUE); behind a region lie the rest of its granule
// and a guard granule of gswap's reservation, which the driver would accept while the region is
// resident, and whose bytes no swap keeps.
bool past_end(const Region* r, CUdeviceptr p, std::size_t n) {
  if (!r) return false;
  const std::uint64_t off = p - r->base;
  return off > r->size || n > r->size - off;
}

// dst/src: the device bytes written and read (0, 0 for a host or array side).
// function: how the access appears in gswapd's trace (a copy or a memset).
// link: proto::kCopyLink..., or kLinkFromSides.
template <class Enqueue>
CUresult access(CUdeviceptr dst, std::size_t dn, CUdeviceptr src, std::size_t sn, CUstream s,
                bool pt, bool sync, Enqueue&& enqueue,
                std::uint64_t function = proto::kCopyFunction,
                std::uint64_t link = kLinkFromSides) {
  FastState& fs = fast();
  if (!fs.active.load(std::memory_order_acquire)) return enqueue();
  // The regions the two sides start in.
  Region* d = dn ? fs.map.find(dst) : nullptr;
  Region* r = sn ? fs.map.find(src) : nullptr;
  if (past_end(d, dst, dn) || past_end(r, src, sn)) return CUDA_ERROR_INVALID_VALUE;
  TouchSet t;
  t.add_range(fs.map, dst, dn);
  t.add_range(fs.map, src, sn);
  if (t.n) {
    unsigned stream_number = 0;
    fs.streams.bit(reinterpret_cast<std::uintptr_t>(s), pt, &stream_number);
    if (link == kLinkFromSides)
      link = function != proto::kCopyFunction ? proto::kCopyLinkNone
             : dn && !sn                      ? proto::kCopyLinkToDevice
             : sn && !dn                      ? proto::kCopyLinkToHost
                                              : proto::kCopyLinkNone;
    telemetry::copy(fs.seq.load(std::memory_order_relaxed), stream_number, r ? r->id : 0,
                    d ? d->id : 0, dn ? dn : sn, link);
  }
  if (t.n && fs.capturing.load(std::memory_order_relaxed) > 0) {
    CUresult e = keep_resident_captured(t);
    if (e != CUDA_SUCCESS) return e;
  }
  return with_access(t, s, pt, sync, enqueue, function,
                     function == proto::kMemsetFunction ? "memset" : "memcpy");
}

// Fact 4: a small copy from host memory may upload an array of device pointers (upload_scan.h).
CUresult scan_upload(const void* host, std::size_t n, CUstream s, bool pt) {
  if (!host || !may_carry_pointers(n)) return CUDA_SUCCESS;
  TouchSet t;
  scan_bytes(fast().map, host, n, &t);
  return keep_named(t, s, pt);
}

// A unified-address copy uploads when its source is host memory and a kernel can read its
// destination. The driver is asked only for small copies.
CUresult scan_unified(CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream s, bool pt) {
  if (!may_carry_pointers(n) || !host_source(src)) return CUDA_SUCCESS;
  TouchSet t;
  scan_bytes(fast().map, reinterpret_cast<const void*>(src), n, &t);
  if ((t.n == 0 && !t.overflow) || !kernel_visible(dst)) return CUDA_SUCCESS;
  return keep_named(t, s, pt);
}

// The host bytes a 2D/3D copy side reads, when it is host memory (nullptr otherwise).
const void* host_side(CUmemorytype type, const void* host, CUdeviceptr unified) {
  if (type == CU_MEMORYTYPE_HOST) return host;
  if (type == CU_MEMORYTYPE_UNIFIED && host_source(unified))
    return reinterpret_cast<const void*>(unified);
  return nullptr;
}

// Whether kernels can read a 2D/3D copy's destination side.
bool kernel_side(CUmemorytype type, CUdeviceptr unified) {
  if (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_ARRAY) return true;
  return type == CU_MEMORYTYPE_UNIFIED && kernel_visible(unified);
}

// A 2D/3D copy's shape as the driver reads it: a Height or Depth of 0 copies one row or layer, a
// pitch of 0 is the width, and a layer height of 0 is the copy's height.
struct Box {
  std::size_t width, height, depth;
  std::size_t src_pitch, dst_pitch, src_height, dst_height;
};

Box box_of(const CUDA_MEMCPY2D* c) {
  const std::size_t w = c->WidthInBytes, h = c->Height ? c->Height : 1;
  return {w, h, 1, c->srcPitch ? c->srcPitch : w, c->dstPitch ? c->dstPitch : w, h, h};
}

template <class C>
Box box_of(const C* c) {
  const std::size_t w = c->WidthInBytes, h = c->Height ? c->Height : 1;
  return {w,
          h,
          c->Depth ? c->Depth : 1,
          c->srcPitch ? c->srcPitch : w,
          c->dstPitch ? c->dstPitch : w,
          c->srcHeight ? c->srcHeight : h,
          c->dstHeight ? c->dstHeight : h};
}

// A small 2D/3D copy from host memory: its source rows, layer after layer.
template <class C>
CUresult scan_box(const C* c, const Box& b, std::size_t src_z, CUstream s, bool pt) {
  if (!small_box(b.width, b.height, b.depth)) return CUDA_SUCCESS;
  const void* src = host_side(c->srcMemoryType, c->srcHost, c->srcDevice);
  if (!src) return CUDA_SUCCESS;
  const unsigned char* first = static_cast<const unsigned char*>(src) +
                               (src_z * b.src_height + c->srcY) * b.src_pitch + c->srcXInBytes;
  TouchSet t;
  for (std::size_t z = 0; z < b.depth; ++z)
    scan_host_rows(first + z * b.src_height * b.src_pitch, b.width, b.src_pitch, b.height, &t);
  if ((t.n == 0 && !t.overflow) || !kernel_side(c->dstMemoryType, c->dstDevice))
    return CUDA_SUCCESS;
  return keep_named(t, s, pt);
}

// The device bytes a 2D/3D copy side covers: from its first to its last byte.
// Past the address space, it is the largest size_t, which no region holds (the copy is refused).
std::size_t span_2d(std::size_t pitch, std::size_t width, std::size_t height) {
  std::size_t rows = 0, span = 0;
  if (height == 0) return 0;
  if (__builtin_mul_overflow(height - 1, pitch, &rows) ||
      __builtin_add_overflow(rows, width, &span))
    return SIZE_MAX;
  return span;
}

// n elements of `elem` bytes, saturating as span_2d does: a memset of more than the address
// space holds is refused as past the end, not taken for the few bytes its size wraps to.
std::size_t elements(std::size_t n, std::size_t elem) {
  std::size_t bytes = 0;
  return __builtin_mul_overflow(n, elem, &bytes) ? SIZE_MAX : bytes;
}

// (depth - 1) * layer_height + height rows, saturating.
std::size_t rows_3d(std::size_t depth, std::size_t layer_height, std::size_t height) {
  std::size_t layers = 0, rows = 0;
  if (__builtin_mul_overflow(depth - 1, layer_height, &layers) ||
      __builtin_add_overflow(layers, height, &rows))
    return SIZE_MAX;
  return rows;
}

// The link a 2D/3D copy crosses, by its sides' memory types (an array is device memory).
std::uint64_t box_link(CUmemorytype src, CUmemorytype dst) {
  bool from_host = src == CU_MEMORYTYPE_HOST, to_host = dst == CU_MEMORYTYPE_HOST;
  return from_host == to_host ? proto::kCopyLinkNone
         : from_host          ? proto::kCopyLinkToDevice
                              : proto::kCopyLinkToHost;
}

CUdeviceptr side_ptr(CUmemorytype type, CUdeviceptr dev) {
  return (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED) ? dev : 0;
}

template <class Enqueue>
CUresult copy2d(const CUDA_MEMCPY2D* c, CUstream s, bool pt, bool sync, Enqueue&& enqueue) {
  if (!c) return enqueue();
  const Box b = box_of(c);
  if (CUresult e = scan_box(c, b, 0, s, pt); e != CUDA_SUCCESS) return e;
  CUdeviceptr src = side_ptr(c->srcMemoryType, c->srcDevice);
  CUdeviceptr dst = side_ptr(c->dstMemoryType, c->dstDevice);
  if (src) src += c->srcY * b.src_pitch + c->srcXInBytes;
  if (dst) dst += c->dstY * b.dst_pitch + c->dstXInBytes;
  std::size_t sn = src ? span_2d(b.src_pitch, b.width, b.height) : 0;
  std::size_t dn = dst ? span_2d(b.dst_pitch, b.width, b.height) : 0;
  // access() takes the destination first.
  return access(dst, dn, src, sn, s, pt, sync, enqueue, proto::kCopyFunction,
                box_link(c->srcMemoryType, c->dstMemoryType));
}

template <class C, class Enqueue>
CUresult copy3d(const C* c, CUstream s, bool pt, bool sync, Enqueue&& enqueue) {
  if (!c) return enqueue();
  const Box b = box_of(c);
  if (CUresult e = scan_box(c, b, c->srcZ, s, pt); e != CUDA_SUCCESS) return e;
  CUdeviceptr src = side_ptr(c->srcMemoryType, c->srcDevice);
  CUdeviceptr dst = side_ptr(c->dstMemoryType, c->dstDevice);
  const std::size_t rows_src = rows_3d(b.depth, b.src_height, b.height);
  const std::size_t rows_dst = rows_3d(b.depth, b.dst_height, b.height);
  if (src) src += (c->srcZ * b.src_height + c->srcY) * b.src_pitch + c->srcXInBytes;
  if (dst) dst += (c->dstZ * b.dst_height + c->dstY) * b.dst_pitch + c->dstXInBytes;
  std::size_t sn = src ? span_2d(b.src_pitch, b.width, rows_src) : 0;
  std::size_t dn = dst ? span_2d(b.dst_pitch, b.width, rows_dst) : 0;
  // access() takes the destination first.
  return access(dst, dn, src, sn, s, pt, sync, enqueue, proto::kCopyFunction,
                box_link(c->srcMemoryType, c->dstMemoryType));
}

}  // namespace

#define GSWAP_R real()

// Linear copies.
CUresult hook_cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) {
  if (CUresult e = scan_unified(d, s, n, nullptr, false); e != CUDA_SUCCESS) return e;
  return access(d, n, s, n, nullptr, false, true, [&] { return GSWAP_R.cuMemcpy(d, s, n); });
}
CUresult hook_cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) {
  if (CUresult e = scan_unified(d, s, n, nullptr, true); e != CUDA_SUCCESS) return e;
  return access(d, n, s, n, nullptr, true, true, [&] { return GSWAP_R.cuMemcpy_ptds(d, s, n); });
}
CUresult hook_cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  if (CUresult e = scan_unified(d, s, n, st, false); e != CUDA_SUCCESS) return e;
  return access(d, n, s, n, st, false, false, [&] { return GSWAP_R.cuMemcpyAsync(d, s, n, st); });
}
CUresult hook_cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  if (CUresult e = scan_unified(d, s, n, st, true); e != CUDA_SUCCESS) return e;
  return access(d, n, s, n, st, true, false,
                [&] { return GSWAP_R.cuMemcpyAsync_ptsz(d, s, n, st); });
}
CUresult hook_cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n) {
  return access(d, n, s, n, nullptr, false, true,
                [&] { return GSWAP_R.cuMemcpyPeer(d, dc, s, sc, n); });
}
CUresult hook_cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                size_t n) {
  return access(d, n, s, n, nullptr, true, true,
                [&] { return GSWAP_R.cuMemcpyPeer_ptds(d, dc, s, sc, n); });
}
CUresult hook_cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc, size_t n,
                                CUstream st) {
  return access(d, n, s, n, st, false, false,
                [&] { return GSWAP_R.cuMemcpyPeerAsync(d, dc, s, sc, n, st); });
}
CUresult hook_cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                     size_t n, CUstream st) {
  return access(d, n, s, n, st, true, false,
                [&] { return GSWAP_R.cuMemcpyPeerAsync_ptsz(d, dc, s, sc, n, st); });
}
CUresult hook_cuMemcpyHtoD_v2(CUdeviceptr d, const void* h, size_t n) {
  if (CUresult e = scan_upload(h, n, nullptr, false); e != CUDA_SUCCESS) return e;
  return access(d, n, 0, 0, nullptr, false, true, [&] { return GSWAP_R.cuMemcpyHtoD_v2(d, h, n); });
}
CUresult hook_cuMemcpyHtoD_v2_ptds(CUdeviceptr d, const void* h, size_t n) {
  if (CUresult e = scan_upload(h, n, nullptr, true); e != CUDA_SUCCESS) return e;
  return access(d, n, 0, 0, nullptr, true, true,
                [&] { return GSWAP_R.cuMemcpyHtoD_v2_ptds(d, h, n); });
}
CUresult hook_cuMemcpyDtoH_v2(void* h, CUdeviceptr s, size_t n) {
  return access(0, 0, s, n, nullptr, false, true, [&] { return GSWAP_R.cuMemcpyDtoH_v2(h, s, n); });
}
CUresult hook_cuMemcpyDtoH_v2_ptds(void* h, CUdeviceptr s, size_t n) {
  return access(0, 0, s, n, nullptr, true, true,
                [&] { return GSWAP_R.cuMemcpyDtoH_v2_ptds(h, s, n); });
}
CUresult hook_cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
  return access(d, n, s, n, nullptr, false, true, [&] { return GSWAP_R.cuMemcpyDtoD_v2(d, s, n); });
}
CUresult hook_cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) {
  return access(d, n, s, n, nullptr, true, true,
                [&] { return GSWAP_R.cuMemcpyDtoD_v2_ptds(d, s, n); });
}
CUresult hook_cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* h, size_t n, CUstream st) {
  if (CUresult e = scan_upload(h, n, st, false); e != CUDA_SUCCESS) return e;
  return access(d, n, 0, 0, st, false, false,
                [&] { return GSWAP_R.cuMemcpyHtoDAsync_v2(d, h, n, st); });
}
CUresult hook_cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void* h, size_t n, CUstream st) {
  if (CUresult e = scan_upload(h, n, st, true); e != CUDA_SUCCESS) return e;
  return access(d, n, 0, 0, st, true, false,
                [&] { return GSWAP_R.cuMemcpyHtoDAsync_v2_ptsz(d, h, n, st); });
}
CUresult hook_cuMemcpyDtoHAsync_v2(void* h, CUdeviceptr s, size_t n, CUstream st) {
  return access(0, 0, s, n, st, false, false,
                [&] { return GSWAP_R.cuMemcpyDtoHAsync_v2(h, s, n, st); });
}
CUresult hook_cuMemcpyDtoHAsync_v2_ptsz(void* h, CUdeviceptr s, size_t n, CUstream st) {
  return access(0, 0, s, n, st, true, false,
                [&] { return GSWAP_R.cuMemcpyDtoHAsync_v2_ptsz(h, s, n, st); });
}
CUresult hook_cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  return access(d, n, s, n, st, false, false,
                [&] { return GSWAP_R.cuMemcpyDtoDAsync_v2(d, s, n, st); });
}
CUresult hook_cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream st) {
  return access(d, n, s, n, st, true, false,
                [&] { return GSWAP_R.cuMemcpyDtoDAsync_v2_ptsz(d, s, n, st); });
}
CUresult hook_cuMemcpyDtoA_v2(CUarray a, size_t off, CUdeviceptr s, size_t n) {
  return access(
      0, 0, s, n, nullptr, false, true, [&] { return GSWAP_R.cuMemcpyDtoA_v2(a, off, s, n); },
      proto::kCopyFunction, proto::kCopyLinkNone);
}
CUresult hook_cuMemcpyDtoA_v2_ptds(CUarray a, size_t off, CUdeviceptr s, size_t n) {
  return access(
      0, 0, s, n, nullptr, true, true, [&] { return GSWAP_R.cuMemcpyDtoA_v2_ptds(a, off, s, n); },
      proto::kCopyFunction, proto::kCopyLinkNone);
}
CUresult hook_cuMemcpyAtoD_v2(CUdeviceptr d, CUarray a, size_t off, size_t n) {
  return access(
      d, n, 0, 0, nullptr, false, true, [&] { return GSWAP_R.cuMemcpyAtoD_v2(d, a, off, n); },
      proto::kCopyFunction, proto::kCopyLinkNone);
}
CUresult hook_cuMemcpyAtoD_v2_ptds(CUdeviceptr d, CUarray a, size_t off, size_t n) {
  return access(
      d, n, 0, 0, nullptr, true, true, [&] { return GSWAP_R.cuMemcpyAtoD_v2_ptds(d, a, off, n); },
      proto::kCopyFunction, proto::kCopyLinkNone);
}

// 2D and 3D copies.
CUresult hook_cuMemcpy2D_v2(const CUDA_MEMCPY2D* c) {
  return copy2d(c, nullptr, false, true, [&] { return GSWAP_R.cuMemcpy2D_v2(c); });
}
CUresult hook_cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* c) {
  return copy2d(c, nullptr, true, true, [&] { return GSWAP_R.cuMemcpy2D_v2_ptds(c); });
}
CUresult hook_cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* c) {
  return copy2d(c, nullptr, false, true, [&] { return GSWAP_R.cuMemcpy2DUnaligned_v2(c); });
}
CUresult hook_cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* c) {
  return copy2d(c, nullptr, true, true, [&] { return GSWAP_R.cuMemcpy2DUnaligned_v2_ptds(c); });
}
CUresult hook_cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* c, CUstream st) {
  return copy2d(c, st, false, false, [&] { return GSWAP_R.cuMemcpy2DAsync_v2(c, st); });
}
CUresult hook_cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* c, CUstream st) {
  return copy2d(c, st, true, false, [&] { return GSWAP_R.cuMemcpy2DAsync_v2_ptsz(c, st); });
}
CUresult hook_cuMemcpy3D_v2(const CUDA_MEMCPY3D* c) {
  return copy3d(c, nullptr, false, true, [&] { return GSWAP_R.cuMemcpy3D_v2(c); });
}
CUresult hook_cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* c) {
  return copy3d(c, nullptr, true, true, [&] { return GSWAP_R.cuMemcpy3D_v2_ptds(c); });
}
CUresult hook_cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* c, CUstream st) {
  return copy3d(c, st, false, false, [&] { return GSWAP_R.cuMemcpy3DAsync_v2(c, st); });
}
CUresult hook_cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* c, CUstream st) {
  return copy3d(c, st, true, false, [&] { return GSWAP_R.cuMemcpy3DAsync_v2_ptsz(c, st); });
}
CUresult hook_cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* c) {
  return copy3d(c, nullptr, false, true, [&] { return GSWAP_R.cuMemcpy3DPeer(c); });
}
CUresult hook_cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* c) {
  return copy3d(c, nullptr, true, true, [&] { return GSWAP_R.cuMemcpy3DPeer_ptds(c); });
}
CUresult hook_cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* c, CUstream st) {
  return copy3d(c, st, false, false, [&] { return GSWAP_R.cuMemcpy3DPeerAsync(c, st); });
}
CUresult hook_cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* c, CUstream st) {
  return copy3d(c, st, true, false, [&] { return GSWAP_R.cuMemcpy3DPeerAsync_ptsz(c, st); });
}

// Memsets: N elements of 1, 2 or 4 bytes; 2D forms cover Height rows of Width elements.
#define GSWAP_MEMSET(sym, T, elem, pt)                                                       \
  CUresult hook_##sym(CUdeviceptr d, T v, size_t n) {                                        \
    return access(                                                                           \
        d, elements(n, elem), 0, 0, nullptr, pt, true, [&] { return GSWAP_R.sym(d, v, n); }, \
        proto::kMemsetFunction);                                                             \
  }
#define GSWAP_MEMSET_ASYNC(sym, T, elem, pt)                                                 \
  CUresult hook_##sym(CUdeviceptr d, T v, size_t n, CUstream st) {                           \
    return access(                                                                           \
        d, elements(n, elem), 0, 0, st, pt, false, [&] { return GSWAP_R.sym(d, v, n, st); }, \
        proto::kMemsetFunction);                                                             \
  }
#define GSWAP_MEMSET2D(sym, T, elem, pt)                                         \
  CUresult hook_##sym(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h) {    \
    return access(                                                               \
        d, span_2d(pitch, elements(w, elem), h), 0, 0, nullptr, pt, true,        \
        [&] { return GSWAP_R.sym(d, pitch, v, w, h); }, proto::kMemsetFunction); \
  }
#define GSWAP_MEMSET2D_ASYNC(sym, T, elem, pt)                                             \
  CUresult hook_##sym(CUdeviceptr d, size_t pitch, T v, size_t w, size_t h, CUstream st) { \
    return access(                                                                         \
        d, span_2d(pitch, elements(w, elem), h), 0, 0, st, pt, false,                      \
        [&] { return GSWAP_R.sym(d, pitch, v, w, h, st); }, proto::kMemsetFunction);       \
  }

GSWAP_MEMSET(cuMemsetD8_v2, unsigned char, 1, false)
GSWAP_MEMSET(cuMemsetD8_v2_ptds, unsigned char, 1, true)
GSWAP_MEMSET(cuMemsetD16_v2, unsigned short, 2, false)
GSWAP_MEMSET(cuMemsetD16_v2_ptds, unsigned short, 2, true)
GSWAP_MEMSET(cuMemsetD32_v2, unsigned int, 4, false)
GSWAP_MEMSET(cuMemsetD32_v2_ptds, unsigned int, 4, true)
GSWAP_MEMSET_ASYNC(cuMemsetD8Async, unsigned char, 1, false)
GSWAP_MEMSET_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1, true)
GSWAP_MEMSET_ASYNC(cuMemsetD16Async, unsigned short, 2, false)
GSWAP_MEMSET_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2, true)
GSWAP_MEMSET_ASYNC(cuMemsetD32Async, unsigned int, 4, false)
GSWAP_MEMSET_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4, true)
GSWAP_MEMSET2D(cuMemsetD2D8_v2, unsigned char, 1, false)
GSWAP_MEMSET2D(cuMemsetD2D8_v2_ptds, unsigned char, 1, true)
GSWAP_MEMSET2D(cuMemsetD2D16_v2, unsigned short, 2, false)
GSWAP_MEMSET2D(cuMemsetD2D16_v2_ptds, unsigned short, 2, true)
GSWAP_MEMSET2D(cuMemsetD2D32_v2, unsigned int, 4, false)
GSWAP_MEMSET2D(cuMemsetD2D32_v2_ptds, unsigned int, 4, true)
GSWAP_MEMSET2D_ASYNC(cuMemsetD2D8Async, unsigned char, 1, false)
GSWAP_MEMSET2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, 1, true)
GSWAP_MEMSET2D_ASYNC(cuMemsetD2D16Async, unsigned short, 2, false)
GSWAP_MEMSET2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, 2, true)
GSWAP_MEMSET2D_ASYNC(cuMemsetD2D32Async, unsigned int, 4, false)
GSWAP_MEMSET2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int, 4, true)

}  // namespace gswap::interpose
