// copies.cpp: cuMemcpy* and cuMemset* in every direction, synchronous and asynchronous.
//
// Every device-side range is validated at enqueue time against the live address map, so a bad
// address returns CUDA_ERROR_INVALID_VALUE without touching memory. The bytes move later, on the
// stream's worker thread (see streams.cpp for the copy engines and throttling). No state of its
// own.
#include "internal.h"

namespace simcuda {
namespace {

struct Side {
  const uint8_t* base;
  bool device;
};

// For unified-address copies: a pointer inside a device allocation or mapping is device memory;
// anything else is host memory (pinned or pageable), as unified addressing infers it.
CUresult classify(uintptr_t p, size_t extent, bool* device) {
  if (in_unmapped_reservation(p)) return CUDA_ERROR_INVALID_VALUE;
  *device = is_device_ptr(p);
  if (*device && !device_range_ok(p, extent)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

Dir dir_of(bool src_dev, bool dst_dev) {
  if (src_dev && dst_dev) return Dir::D2D;
  if (src_dev) return Dir::D2H;
  if (dst_dev) return Dir::H2D;
  return Dir::H2H;
}

Op linear_copy(void* dst, const void* src, size_t n, Dir d) {
  Op op;
  op.kind = OpKind::Copy;
  op.dst = static_cast<uint8_t*>(dst);
  op.src = static_cast<const uint8_t*>(src);
  op.width = n;
  op.dir = d;
  return op;
}

// Runs a validated op synchronously (on the legacy or per-thread stream) or enqueues it.
CUresult issue(Op&& op, CUstream h, bool pt, bool sync) {
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  if (sync) {
    if (capture_violation()) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return submit_and_wait(s, std::move(op));
  }
  return submit(s, std::move(op));
}

CUresult copy_typed(uintptr_t dst, const void* src, size_t n, Dir d, CUstream h, bool pt,
                    bool sync) {
  if (CUresult r = check_init()) return r;
  if (n == 0) return CUDA_SUCCESS;
  uintptr_t s = reinterpret_cast<uintptr_t>(src);
  if ((d == Dir::H2D || d == Dir::D2D) && !device_range_ok(dst, n)) return CUDA_ERROR_INVALID_VALUE;
  if ((d == Dir::D2H || d == Dir::D2D) && !device_range_ok(s, n)) return CUDA_ERROR_INVALID_VALUE;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  return issue(linear_copy(reinterpret_cast<void*>(dst), src, n, d), h, pt, sync);
}

CUresult copy_unified(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h, bool pt, bool sync) {
  if (CUresult r = check_init()) return r;
  if (n == 0) return CUDA_SUCCESS;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  bool sd = false, dd = false;
  if (CUresult r = classify(src, n, &sd)) return r;
  if (CUresult r = classify(dst, n, &dd)) return r;
  return issue(linear_copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n,
                           dir_of(sd, dd)),
               h, pt, sync);
}

// Resolves one side of a 2D/3D copy descriptor to an address and a device flag.
CUresult side_of(CUmemorytype t, const void* host, CUdeviceptr dev, size_t off, size_t extent,
                 const uint8_t** out, bool* is_dev) {
  uintptr_t base;
  switch (t) {
    case CU_MEMORYTYPE_HOST:
      base = reinterpret_cast<uintptr_t>(host);
      *is_dev = false;
      break;
    case CU_MEMORYTYPE_DEVICE:
      base = dev;
      if (!device_range_ok(base + off, extent)) return CUDA_ERROR_INVALID_VALUE;
      *is_dev = true;
      break;
    case CU_MEMORYTYPE_UNIFIED:
      base = dev;
      if (CUresult r = classify(base + off, extent, is_dev)) return r;
      break;
    default:
      return CUDA_ERROR_NOT_SUPPORTED;  // CUDA arrays are not simulated
  }
  if (!base) return CUDA_ERROR_INVALID_VALUE;
  *out = reinterpret_cast<const uint8_t*>(base + off);
  return CUDA_SUCCESS;
}

// *out = x * y + z; false where that is past the address space (sizes are refused, not wrapped).
bool mad(size_t x, size_t y, size_t z, size_t* out) {
  return !__builtin_mul_overflow(x, y, out) && !__builtin_add_overflow(*out, z, out);
}

// Validates a 3D copy (WidthInBytes > 0) and builds its op; touches no memory.
CUresult build_3d(const CUDA_MEMCPY3D* c, Op* out) {
  size_t w = c->WidthInBytes, hgt = c->Height ? c->Height : 1, dep = c->Depth ? c->Depth : 1;
  size_t sp = c->srcPitch ? c->srcPitch : w, dp = c->dstPitch ? c->dstPitch : w;
  size_t sh = c->srcHeight ? c->srcHeight : hgt, dh = c->dstHeight ? c->dstHeight : hgt;
  if (w > sp || w > dp || hgt > sh || hgt > dh) return CUDA_ERROR_INVALID_VALUE;
  // Offsets and extents past the address space are refused, not wrapped.
  size_t soff = 0, doff = 0, sext = 0, dext = 0, send = 0, dend = 0;
  if (!mad(c->srcZ, sh, c->srcY, &soff) || !mad(soff, sp, c->srcXInBytes, &soff) ||
      !mad(c->dstZ, dh, c->dstY, &doff) || !mad(doff, dp, c->dstXInBytes, &doff) ||
      !mad(dep - 1, sh, hgt - 1, &sext) || !mad(sext, sp, w, &sext) ||
      !mad(dep - 1, dh, hgt - 1, &dext) || !mad(dext, dp, w, &dext) ||
      __builtin_add_overflow(soff, sext, &send) || __builtin_add_overflow(doff, dext, &dend))
    return CUDA_ERROR_INVALID_VALUE;
  const uint8_t *s = nullptr, *d = nullptr;
  bool sd = false, dd = false;
  if (CUresult r = side_of(c->srcMemoryType, c->srcHost, c->srcDevice, 0, send, &s, &sd)) return r;
  if (CUresult r = side_of(c->dstMemoryType, c->dstHost, c->dstDevice, 0, dend, &d, &dd)) return r;
  Op& op = *out;
  op.kind = OpKind::Copy;
  op.src = s + soff;
  op.dst = const_cast<uint8_t*>(d) + doff;
  op.width = w;
  op.height = hgt;
  op.depth = dep;
  op.spitch = sp;
  op.dpitch = dp;
  op.sheight = sh;
  op.dheight = dh;
  op.dir = dir_of(sd, dd);
  return CUDA_SUCCESS;
}

CUresult copy_3d(const CUDA_MEMCPY3D* c, CUstream h, bool pt, bool sync) {
  if (CUresult r = check_init()) return r;
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (c->WidthInBytes == 0) return CUDA_SUCCESS;
  Op op;
  if (CUresult r = build_3d(c, &op)) return r;
  return issue(std::move(op), h, pt, sync);
}

// ---- batch copies (cuMemcpyBatchAsync_v2, cuMemcpy3DBatchAsync_v2) ----
// Every copy of a batch is validated before any is enqueued, so a rejected batch leaves the
// stream untouched. The copies then run in list order (CUDA promises no order within a batch,
// so this is one of the allowed orders), each on the copy engine of its direction.

bool src_order_ok(CUmemcpySrcAccessOrder o) {
  return o == CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
         o == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL || o == CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
}

// Batches may not go to the legacy NULL stream (a per-thread default stream is fine), and cannot
// be captured: the driver refuses them on a capturing stream, invalidating the capture.
CUresult batch_stream(CUstream h, bool pt, Stream** out) {
  if (CUresult r = resolve_stream(h, pt, out)) return r;
  if ((*out)->legacy) return CUDA_ERROR_INVALID_VALUE;
  return refuse_in_capture(*out);
}

// Enqueues validated ops in order. A source read "during the API call" must be finished when
// the call returns, so such a batch waits for its stream.
CUresult submit_batch(Stream* s, std::vector<Op>& ops, bool during_call) {
  for (Op& op : ops)
    if (CUresult r = submit(s, std::move(op))) return r;
  if (during_call) sync_stream(s);
  return CUDA_SUCCESS;
}

// One copy of a batch, validated; nothing is built for an empty one.
CUresult batch_copy_op(CUdeviceptr dst, CUdeviceptr src, size_t n, std::vector<Op>* ops) {
  if (n == 0) return CUDA_SUCCESS;
  if (!dst || !src) return CUDA_ERROR_INVALID_VALUE;
  bool sd = false, dd = false;
  if (CUresult r = classify(src, n, &sd)) return r;
  if (CUresult r = classify(dst, n, &dd)) return r;
  ops->push_back(linear_copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n,
                             dir_of(sd, dd)));
  return CUDA_SUCCESS;
}

// fail (the 12.8 ABI's failIdx, may be null): the index of the copy that was refused, or
// SIZE_MAX when the error concerns no single copy.
CUresult copy_batch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count,
                    CUmemcpyAttributes* attrs, size_t* idxs, size_t num_attrs, size_t* fail,
                    CUstream h, bool pt) {
  if (fail) *fail = SIZE_MAX;
  if (CUresult r = check_init()) return r;
  if (count == 0 || !dsts || !srcs || !sizes || num_attrs == 0 || num_attrs > count || !attrs ||
      !idxs || idxs[0] != 0)
    return CUDA_ERROR_INVALID_VALUE;
  bool during_call = false;
  for (size_t a = 0; a < num_attrs; ++a) {
    if (a > 0 && idxs[a] <= idxs[a - 1]) return CUDA_ERROR_INVALID_VALUE;
    if (idxs[a] >= count) return CUDA_ERROR_INVALID_VALUE;
    if (!src_order_ok(attrs[a].srcAccessOrder)) return CUDA_ERROR_INVALID_VALUE;
    if (attrs[a].flags & ~static_cast<unsigned>(CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE))
      return CUDA_ERROR_INVALID_VALUE;
    during_call |= attrs[a].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
  }
  Stream* s = nullptr;
  if (CUresult r = batch_stream(h, pt, &s)) return r;
  std::vector<Op> ops;
  ops.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    if (CUresult r = batch_copy_op(dsts[i], srcs[i], sizes[i], &ops)) {
      if (fail) *fail = i;
      return r;
    }
  }
  return submit_batch(s, ops, during_call);
}

// A 3D batch operand as one side of a CUDA_MEMCPY3D. Only pointer operands are simulated: no
// call creates a CUDA array, so an array operand is CUDA_ERROR_NOT_SUPPORTED (as the 2D/3D
// copies answer for array memory types).
CUresult batch_operand(const CUmemcpy3DOperand& o, const CUextent3D& e, CUdeviceptr* ptr,
                       size_t* pitch, size_t* height) {
  if (o.type == CU_MEMCPY_OPERAND_TYPE_ARRAY) return CUDA_ERROR_NOT_SUPPORTED;
  if (o.type != CU_MEMCPY_OPERAND_TYPE_POINTER) return CUDA_ERROR_INVALID_VALUE;
  if (!o.op.ptr.ptr) return CUDA_ERROR_INVALID_VALUE;
  // Element size is 1 for pointer-to-pointer copies; zero means tightly packed.
  if (o.op.ptr.rowLength && o.op.ptr.rowLength < e.width) return CUDA_ERROR_INVALID_VALUE;
  if (o.op.ptr.layerHeight && o.op.ptr.layerHeight < e.height) return CUDA_ERROR_INVALID_VALUE;
  *ptr = o.op.ptr.ptr;
  *pitch = o.op.ptr.rowLength ? o.op.ptr.rowLength : e.width;
  *height = o.op.ptr.layerHeight ? o.op.ptr.layerHeight : e.height;
  return CUDA_SUCCESS;
}

// One copy of a 3D batch, validated and built.
CUresult batch_3d_op(const CUDA_MEMCPY3D_BATCH_OP& b, Op* out) {
  if (!b.extent.width || !b.extent.height || !b.extent.depth) return CUDA_ERROR_INVALID_VALUE;
  if (!src_order_ok(b.srcAccessOrder)) return CUDA_ERROR_INVALID_VALUE;
  if (b.flags & ~static_cast<unsigned>(CU_MEMCPY_FLAG_PREFER_OVERLAP_WITH_COMPUTE))
    return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY3D c{};
  c.srcMemoryType = c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  if (CUresult r = batch_operand(b.src, b.extent, &c.srcDevice, &c.srcPitch, &c.srcHeight))
    return r;
  if (CUresult r = batch_operand(b.dst, b.extent, &c.dstDevice, &c.dstPitch, &c.dstHeight))
    return r;
  c.WidthInBytes = b.extent.width;
  c.Height = b.extent.height;
  c.Depth = b.extent.depth;
  return build_3d(&c, out);
}

CUresult copy_3d_batch(size_t n, CUDA_MEMCPY3D_BATCH_OP* list, unsigned long long flags,
                       size_t* fail, CUstream h, bool pt) {
  if (fail) *fail = SIZE_MAX;
  if (CUresult r = check_init()) return r;
  if (n == 0 || !list || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  Stream* s = nullptr;
  if (CUresult r = batch_stream(h, pt, &s)) return r;
  bool during_call = false;
  std::vector<Op> ops(n);
  for (size_t i = 0; i < n; ++i) {
    if (CUresult r = batch_3d_op(list[i], &ops[i])) {
      if (fail) *fail = i;
      return r;
    }
    during_call |= list[i].srcAccessOrder == CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
  }
  return submit_batch(s, ops, during_call);
}

CUresult copy_2d(const CUDA_MEMCPY2D* c, CUstream h, bool pt, bool sync) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  CUDA_MEMCPY3D d{};
  d.srcXInBytes = c->srcXInBytes;
  d.srcY = c->srcY;
  d.srcMemoryType = c->srcMemoryType;
  d.srcHost = c->srcHost;
  d.srcDevice = c->srcDevice;
  d.srcArray = c->srcArray;
  d.srcPitch = c->srcPitch;
  d.dstXInBytes = c->dstXInBytes;
  d.dstY = c->dstY;
  d.dstMemoryType = c->dstMemoryType;
  d.dstHost = c->dstHost;
  d.dstDevice = c->dstDevice;
  d.dstArray = c->dstArray;
  d.dstPitch = c->dstPitch;
  d.WidthInBytes = c->WidthInBytes;
  d.Height = c->Height;
  d.Depth = 1;
  return copy_3d(&d, h, pt, sync);
}

CUresult memset_2d(CUdeviceptr dst, size_t pitch, uint32_t v, uint8_t elem, size_t w, size_t hgt,
                   CUstream h, bool pt, bool sync) {
  if (CUresult r = check_init()) return r;
  if (w == 0 || hgt == 0) return CUDA_SUCCESS;
  if (dst % elem) return CUDA_ERROR_INVALID_VALUE;
  // Sizes past the address space are refused, not wrapped to the few bytes they come to.
  size_t row = 0, extent = 0;
  if (!mad(w, elem, 0, &row)) return CUDA_ERROR_INVALID_VALUE;
  if (hgt > 1 && pitch < row) return CUDA_ERROR_INVALID_VALUE;
  if (!mad(hgt - 1, pitch, row, &extent)) return CUDA_ERROR_INVALID_VALUE;
  if (!device_range_ok(dst, extent)) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.kind = OpKind::Memset;
  op.dst = reinterpret_cast<uint8_t*>(dst);
  op.value = v;
  op.elem = elem;
  op.width = w;
  op.height = hgt;
  op.dpitch = hgt > 1 ? pitch : row;
  return issue(std::move(op), h, pt, sync);
}

}  // namespace
}  // namespace simcuda

using namespace simcuda;

// Each base entry point is followed by its per-thread-default-stream twin (_ptds/_ptsz).

SC_EXPORT CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) {
  SC_ENTRY(cuMemcpy);
  return copy_unified(d, s, n, nullptr, false, true);
}
SC_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) {
  SC_ENTRY(cuMemcpy_ptds);
  return copy_unified(d, s, n, nullptr, true, true);
}
SC_EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) {
  SC_ENTRY(cuMemcpyAsync);
  return copy_unified(d, s, n, h, false, false);
}
SC_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) {
  SC_ENTRY(cuMemcpyAsync_ptsz);
  return copy_unified(d, s, n, h, true, false);
}
SC_EXPORT CUresult cuMemcpyPeer(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                size_t n) {
  SC_ENTRY(cuMemcpyPeer);
  return copy_unified(d, s, n, nullptr, false, true);
}
SC_EXPORT CUresult cuMemcpyPeer_ptds(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                     size_t n) {
  SC_ENTRY(cuMemcpyPeer_ptds);
  return copy_unified(d, s, n, nullptr, true, true);
}
SC_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                     size_t n, CUstream h) {
  SC_ENTRY(cuMemcpyPeerAsync);
  return copy_unified(d, s, n, h, false, false);
}
SC_EXPORT CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr d, CUcontext dc, CUdeviceptr s, CUcontext sc,
                                          size_t n, CUstream h) {
  SC_ENTRY(cuMemcpyPeerAsync_ptsz);
  return copy_unified(d, s, n, h, true, false);
}

#define SC_COPY_HTOD(name, pt, sync)                                \
  SC_EXPORT CUresult name(CUdeviceptr d, const void* s, size_t n) { \
    SC_ENTRY(name);                                                 \
    return copy_typed(d, s, n, Dir::H2D, nullptr, pt, sync);        \
  }
SC_COPY_HTOD(cuMemcpyHtoD_v2, false, true)
SC_COPY_HTOD(cuMemcpyHtoD_v2_ptds, true, true)
SC_EXPORT CUresult cuMemcpyDtoH_v2(void* d, CUdeviceptr s, size_t n) {
  SC_ENTRY(cuMemcpyDtoH_v2);
  return copy_typed(reinterpret_cast<uintptr_t>(d), reinterpret_cast<const void*>(s), n, Dir::D2H,
                    nullptr, false, true);
}
SC_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void* d, CUdeviceptr s, size_t n) {
  SC_ENTRY(cuMemcpyDtoH_v2_ptds);
  return copy_typed(reinterpret_cast<uintptr_t>(d), reinterpret_cast<const void*>(s), n, Dir::D2H,
                    nullptr, true, true);
}
SC_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) {
  SC_ENTRY(cuMemcpyDtoD_v2);
  return copy_typed(d, reinterpret_cast<const void*>(s), n, Dir::D2D, nullptr, false, true);
}
SC_EXPORT CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr d, CUdeviceptr s, size_t n) {
  SC_ENTRY(cuMemcpyDtoD_v2_ptds);
  return copy_typed(d, reinterpret_cast<const void*>(s), n, Dir::D2D, nullptr, true, true);
}
SC_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void* s, size_t n, CUstream h) {
  SC_ENTRY(cuMemcpyHtoDAsync_v2);
  return copy_typed(d, s, n, Dir::H2D, h, false, false);
}
SC_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr d, const void* s, size_t n, CUstream h) {
  SC_ENTRY(cuMemcpyHtoDAsync_v2_ptsz);
  return copy_typed(d, s, n, Dir::H2D, h, true, false);
}
SC_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* d, CUdeviceptr s, size_t n, CUstream h) {
  SC_ENTRY(cuMemcpyDtoHAsync_v2);
  return copy_typed(reinterpret_cast<uintptr_t>(d), reinterpret_cast<const void*>(s), n, Dir::D2H,
                    h, false, false);
}
SC_EXPORT CUresult cuMemcpyDtoHAsync_v2_ptsz(void* d, CUdeviceptr s, size_t n, CUstream h) {
  SC_ENTRY(cuMemcpyDtoHAsync_v2_ptsz);
  return copy_typed(reinterpret_cast<uintptr_t>(d), reinterpret_cast<const void*>(s), n, Dir::D2H,
                    h, true, false);
}
SC_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) {
  SC_ENTRY(cuMemcpyDtoDAsync_v2);
  return copy_typed(d, reinterpret_cast<const void*>(s), n, Dir::D2D, h, false, false);
}
SC_EXPORT CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr d, CUdeviceptr s, size_t n, CUstream h) {
  SC_ENTRY(cuMemcpyDtoDAsync_v2_ptsz);
  return copy_typed(d, reinterpret_cast<const void*>(s), n, Dir::D2D, h, true, false);
}

SC_EXPORT CUresult cuMemcpyBatchAsync_v2(CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count,
                                         CUmemcpyAttributes* a, size_t* ai, size_t na, CUstream h) {
  SC_ENTRY(cuMemcpyBatchAsync_v2);
  return copy_batch(d, s, n, count, a, ai, na, nullptr, h, false);
}
SC_EXPORT CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr* d, CUdeviceptr* s, size_t* n,
                                              size_t count, CUmemcpyAttributes* a, size_t* ai,
                                              size_t na, CUstream h) {
  SC_ENTRY(cuMemcpyBatchAsync_v2_ptsz);
  return copy_batch(d, s, n, count, a, ai, na, nullptr, h, true);
}
SC_EXPORT CUresult cuMemcpy3DBatchAsync_v2(size_t n, CUDA_MEMCPY3D_BATCH_OP* l,
                                           unsigned long long f, CUstream h) {
  SC_ENTRY(cuMemcpy3DBatchAsync_v2);
  return copy_3d_batch(n, l, f, nullptr, h, false);
}
SC_EXPORT CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP* l,
                                                unsigned long long f, CUstream h) {
  SC_ENTRY(cuMemcpy3DBatchAsync_v2_ptsz);
  return copy_3d_batch(n, l, f, nullptr, h, true);
}
// The CUDA 12.8 ABI: the same, reporting the refused copy's index in failIdx.
SC_EXPORT CUresult cuMemcpyBatchAsync(CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count,
                                      CUmemcpyAttributes* a, size_t* ai, size_t na, size_t* fail,
                                      CUstream h) {
  SC_ENTRY(cuMemcpyBatchAsync);
  return copy_batch(d, s, n, count, a, ai, na, fail, h, false);
}
SC_EXPORT CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count,
                                           CUmemcpyAttributes* a, size_t* ai, size_t na,
                                           size_t* fail, CUstream h) {
  SC_ENTRY(cuMemcpyBatchAsync_ptsz);
  return copy_batch(d, s, n, count, a, ai, na, fail, h, true);
}
SC_EXPORT CUresult cuMemcpy3DBatchAsync(size_t n, CUDA_MEMCPY3D_BATCH_OP* l, size_t* fail,
                                        unsigned long long f, CUstream h) {
  SC_ENTRY(cuMemcpy3DBatchAsync);
  return copy_3d_batch(n, l, f, fail, h, false);
}
SC_EXPORT CUresult cuMemcpy3DBatchAsync_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP* l, size_t* fail,
                                             unsigned long long f, CUstream h) {
  SC_ENTRY(cuMemcpy3DBatchAsync_ptsz);
  return copy_3d_batch(n, l, f, fail, h, true);
}

SC_EXPORT CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* c) {
  SC_ENTRY(cuMemcpy2D_v2);
  return copy_2d(c, nullptr, false, true);
}
SC_EXPORT CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* c) {
  SC_ENTRY(cuMemcpy2D_v2_ptds);
  return copy_2d(c, nullptr, true, true);
}
SC_EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* c) {
  SC_ENTRY(cuMemcpy2DUnaligned_v2);
  return copy_2d(c, nullptr, false, true);
}
SC_EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* c) {
  SC_ENTRY(cuMemcpy2DUnaligned_v2_ptds);
  return copy_2d(c, nullptr, true, true);
}
SC_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* c, CUstream h) {
  SC_ENTRY(cuMemcpy2DAsync_v2);
  return copy_2d(c, h, false, false);
}
SC_EXPORT CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* c, CUstream h) {
  SC_ENTRY(cuMemcpy2DAsync_v2_ptsz);
  return copy_2d(c, h, true, false);
}
SC_EXPORT CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* c) {
  SC_ENTRY(cuMemcpy3D_v2);
  return copy_3d(c, nullptr, false, true);
}
SC_EXPORT CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* c) {
  SC_ENTRY(cuMemcpy3D_v2_ptds);
  return copy_3d(c, nullptr, true, true);
}
SC_EXPORT CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* c, CUstream h) {
  SC_ENTRY(cuMemcpy3DAsync_v2);
  return copy_3d(c, h, false, false);
}
SC_EXPORT CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* c, CUstream h) {
  SC_ENTRY(cuMemcpy3DAsync_v2_ptsz);
  return copy_3d(c, h, true, false);
}

#define SC_MEMSET_SYNC(name, T, elem, pt)                     \
  SC_EXPORT CUresult name(CUdeviceptr d, T v, size_t n) {     \
    SC_ENTRY(name);                                           \
    return memset_2d(d, 0, v, elem, n, 1, nullptr, pt, true); \
  }
#define SC_MEMSET_ASYNC(name, T, elem, pt)                            \
  SC_EXPORT CUresult name(CUdeviceptr d, T v, size_t n, CUstream h) { \
    SC_ENTRY(name);                                                   \
    return memset_2d(d, 0, v, elem, n, 1, h, pt, false);              \
  }
#define SC_MEMSET2D_SYNC(name, T, elem, pt)                                    \
  SC_EXPORT CUresult name(CUdeviceptr d, size_t p, T v, size_t w, size_t hh) { \
    SC_ENTRY(name);                                                            \
    return memset_2d(d, p, v, elem, w, hh, nullptr, pt, true);                 \
  }
#define SC_MEMSET2D_ASYNC(name, T, elem, pt)                                               \
  SC_EXPORT CUresult name(CUdeviceptr d, size_t p, T v, size_t w, size_t hh, CUstream h) { \
    SC_ENTRY(name);                                                                        \
    return memset_2d(d, p, v, elem, w, hh, h, pt, false);                                  \
  }

SC_MEMSET_SYNC(cuMemsetD8_v2, unsigned char, 1, false)
SC_MEMSET_SYNC(cuMemsetD8_v2_ptds, unsigned char, 1, true)
SC_MEMSET_SYNC(cuMemsetD16_v2, unsigned short, 2, false)
SC_MEMSET_SYNC(cuMemsetD16_v2_ptds, unsigned short, 2, true)
SC_MEMSET_SYNC(cuMemsetD32_v2, unsigned int, 4, false)
SC_MEMSET_SYNC(cuMemsetD32_v2_ptds, unsigned int, 4, true)
SC_MEMSET_ASYNC(cuMemsetD8Async, unsigned char, 1, false)
SC_MEMSET_ASYNC(cuMemsetD8Async_ptsz, unsigned char, 1, true)
SC_MEMSET_ASYNC(cuMemsetD16Async, unsigned short, 2, false)
SC_MEMSET_ASYNC(cuMemsetD16Async_ptsz, unsigned short, 2, true)
SC_MEMSET_ASYNC(cuMemsetD32Async, unsigned int, 4, false)
SC_MEMSET_ASYNC(cuMemsetD32Async_ptsz, unsigned int, 4, true)
SC_MEMSET2D_SYNC(cuMemsetD2D8_v2, unsigned char, 1, false)
SC_MEMSET2D_SYNC(cuMemsetD2D8_v2_ptds, unsigned char, 1, true)
SC_MEMSET2D_SYNC(cuMemsetD2D16_v2, unsigned short, 2, false)
SC_MEMSET2D_SYNC(cuMemsetD2D16_v2_ptds, unsigned short, 2, true)
SC_MEMSET2D_SYNC(cuMemsetD2D32_v2, unsigned int, 4, false)
SC_MEMSET2D_SYNC(cuMemsetD2D32_v2_ptds, unsigned int, 4, true)
SC_MEMSET2D_ASYNC(cuMemsetD2D8Async, unsigned char, 1, false)
SC_MEMSET2D_ASYNC(cuMemsetD2D8Async_ptsz, unsigned char, 1, true)
SC_MEMSET2D_ASYNC(cuMemsetD2D16Async, unsigned short, 2, false)
SC_MEMSET2D_ASYNC(cuMemsetD2D16Async_ptsz, unsigned short, 2, true)
SC_MEMSET2D_ASYNC(cuMemsetD2D32Async, unsigned int, 4, false)
SC_MEMSET2D_ASYNC(cuMemsetD2D32Async_ptsz, unsigned int, 4, true)

static CUresult copy_3d_peer(const CUDA_MEMCPY3D_PEER* p, CUstream h, bool pt, bool sync) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  // All simulated devices share the host address space, so a peer copy is a plain 3D copy.
  CUDA_MEMCPY3D c{};
  c.srcXInBytes = p->srcXInBytes;
  c.srcY = p->srcY;
  c.srcZ = p->srcZ;
  c.srcMemoryType = p->srcMemoryType;
  c.srcHost = p->srcHost;
  c.srcDevice = p->srcDevice;
  c.srcArray = p->srcArray;
  c.srcPitch = p->srcPitch;
  c.srcHeight = p->srcHeight;
  c.dstXInBytes = p->dstXInBytes;
  c.dstY = p->dstY;
  c.dstZ = p->dstZ;
  c.dstMemoryType = p->dstMemoryType;
  c.dstHost = p->dstHost;
  c.dstDevice = p->dstDevice;
  c.dstArray = p->dstArray;
  c.dstPitch = p->dstPitch;
  c.dstHeight = p->dstHeight;
  c.WidthInBytes = p->WidthInBytes;
  c.Height = p->Height;
  c.Depth = p->Depth;
  return copy_3d(&c, h, pt, sync);
}
SC_EXPORT CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER* p) {
  SC_ENTRY(cuMemcpy3DPeer);
  return copy_3d_peer(p, nullptr, false, true);
}
SC_EXPORT CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER* p) {
  SC_ENTRY(cuMemcpy3DPeer_ptds);
  return copy_3d_peer(p, nullptr, true, true);
}
SC_EXPORT CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER* p, CUstream h) {
  SC_ENTRY(cuMemcpy3DPeerAsync);
  return copy_3d_peer(p, h, false, false);
}
SC_EXPORT CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER* p, CUstream h) {
  SC_ENTRY(cuMemcpy3DPeerAsync_ptsz);
  return copy_3d_peer(p, h, true, false);
}

// CUDA arrays are not simulated: no call creates one, so every array handle is invalid.
static CUresult array_copy(const void* array) {
  if (CUresult r = check_init()) return r;
  (void)array;
  return CUDA_ERROR_INVALID_HANDLE;
}
SC_EXPORT CUresult cuMemcpyAtoD_v2(CUdeviceptr d, CUarray a, size_t off, size_t n) {
  SC_ENTRY(cuMemcpyAtoD_v2);
  return array_copy(a);
}
SC_EXPORT CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr d, CUarray a, size_t off, size_t n) {
  SC_ENTRY(cuMemcpyAtoD_v2_ptds);
  return array_copy(a);
}
SC_EXPORT CUresult cuMemcpyDtoA_v2(CUarray a, size_t off, CUdeviceptr s, size_t n) {
  SC_ENTRY(cuMemcpyDtoA_v2);
  return array_copy(a);
}
SC_EXPORT CUresult cuMemcpyDtoA_v2_ptds(CUarray a, size_t off, CUdeviceptr s, size_t n) {
  SC_ENTRY(cuMemcpyDtoA_v2_ptds);
  return array_copy(a);
}
