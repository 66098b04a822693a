// hooks_memops.cpp: the remaining calls that touch device memory at addresses they are given:
// batch copies (cuMemcpyBatchAsync, cuMemcpy3DBatchAsync: the 12.8 and 13.0 ABIs) and stream memory
// operations (cuStreamWrite/WaitValue32/64_v2, cuStreamBatchMemOp_v2), with their _ptsz forms.
//
// One call enqueues every copy or operation of its batch, so all the regions a batch touches are
// one access: resident and pinned together, as the two sides of a copy are in hooks_copy.cpp.
// Small copies from host memory are scanned for device pointers first, as single copies are
// (upload_scan.h).
// All these calls are asynchronous; a restore is waited for on their stream. No state of its own.
#include "interpose/access.h"
#include "interpose/driver.h"
#include "interpose/hooks.h"
#include "interpose/upload_scan.h"

namespace gswap::interpose {
namespace {

// Makes the regions of t resident and enqueues. A batch naming more regions than memory could be
// found to list cannot be pinned as a whole, so, as for such a launch, every region stays
// resident.
template <class Enqueue>
CUresult access_set(TouchSet& t, CUstream s, bool pt, Enqueue&& enqueue) {
  if (t.overflow) {
    CUresult e = keep_all_resident("a batch naming more regions than gswap found memory to list");
    if (e != CUDA_SUCCESS) return e;
    return enqueue();
  }
  if (t.n && fast().capturing.load(std::memory_order_relaxed) > 0) {
    // Captured operations replay later without passing through gswap: keep what they touch.
    CUresult e = keep_resident_captured(t);
    if (e != CUDA_SUCCESS) return e;
  }
  return with_access(t, s, pt, false, enqueue, proto::kMemOpFunction);
}

// Telemetry sees each copy of a batch as the planner sees a single copy.
void note_copy(FastState& fs, CUdeviceptr dst, CUdeviceptr src, std::size_t n, CUstream s,
               bool pt) {
  Region* d = n ? fs.map.find(dst) : nullptr;
  Region* r = n ? fs.map.find(src) : nullptr;
  if (!d && !r) return;
  unsigned stream_number = 0;
  fs.streams.bit(reinterpret_cast<std::uintptr_t>(s), pt, &stream_number);
  // The link is not known here (unified addresses, several copies in one position).
  telemetry::copy(fs.seq.load(std::memory_order_relaxed), stream_number, r ? r->id : 0,
                  d ? d->id : 0, n, proto::kCopyLinkNone);
}

// Adds the regions of one scanned upload (upload_scan.h) to those a batch names.
void merge_named(const TouchSet& upload, TouchSet* named) {
  named->overflow |= upload.overflow;
  for (std::size_t i = 0; i < upload.n; ++i) named->add(upload.regions[i]);
}

// A small copy of a batch whose source is host memory and whose destination kernels can read may
// upload a pointer array, as a single copy may (hooks_copy.cpp).
void scan_batch_copy(CUdeviceptr dst, CUdeviceptr src, std::size_t n, TouchSet* named) {
  if (!may_carry_pointers(n) || !host_source(src)) return;
  TouchSet t;
  scan_bytes(fast().map, reinterpret_cast<const void*>(src), n, &t);
  if ((t.n || t.overflow) && kernel_visible(dst)) merge_named(t, named);
}

template <class Enqueue>
CUresult copy_batch(CUdeviceptr* dsts, CUdeviceptr* srcs, size_t* sizes, size_t count, CUstream s,
                    bool pt, Enqueue&& enqueue) {
  FastState& fs = fast();
  // Malformed arrays are the driver's to refuse.
  if (!fs.active.load(std::memory_order_acquire) || !dsts || !srcs || !sizes) return enqueue();
  TouchSet t, named;
  for (size_t i = 0; i < count; ++i) {
    // Host pointers fall outside the region map and add nothing.
    t.add_range(fs.map, dsts[i], sizes[i]);
    t.add_range(fs.map, srcs[i], sizes[i]);
    note_copy(fs, dsts[i], srcs[i], sizes[i], s, pt);
    scan_batch_copy(dsts[i], srcs[i], sizes[i], &named);
  }
  if (CUresult e = keep_named(named, s, pt); e != CUDA_SUCCESS) return e;
  return access_set(t, s, pt, enqueue);
}

// The device bytes a pointer operand of a 3D batch copy covers. Rows and layers are counted in
// elements: one byte between pointers, the array's element size when the other side is a CUDA
// array. That size is not looked up; 16 bytes (four 32-bit channels) is the largest there is, so
// the span may reach past the copy's end but never stops short of it.
std::size_t operand_span(const CUmemcpy3DOperand& o, const CUmemcpy3DOperand& other,
                         const CUextent3D& e) {
  if (!e.width || !e.height || !e.depth) return 0;
  std::size_t elem = other.type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? 16 : 1;
  std::size_t row = o.op.ptr.rowLength ? o.op.ptr.rowLength : e.width;
  std::size_t layer = o.op.ptr.layerHeight ? o.op.ptr.layerHeight : e.height;
  return (((e.depth - 1) * layer + (e.height - 1)) * row + e.width) * elem;
}

// A 3D batch copy between pointers whose source is host memory: extent.depth layers of
// extent.height rows of extent.width bytes, the source rows rowLength bytes apart and its layers
// layerHeight rows apart (0: tightly packed). A copy into a CUDA array is not an upload kernels
// follow.
void scan_batch_box(const CUDA_MEMCPY3D_BATCH_OP& b, TouchSet* named) {
  if (b.src.type != CU_MEMCPY_OPERAND_TYPE_POINTER ||
      b.dst.type != CU_MEMCPY_OPERAND_TYPE_POINTER ||
      !small_box(b.extent.width, b.extent.height, b.extent.depth) || !host_source(b.src.op.ptr.ptr))
    return;
  const CUmemcpy3DOperand& o = b.src;
  std::size_t pitch = o.op.ptr.rowLength ? o.op.ptr.rowLength : b.extent.width;
  std::size_t layer = o.op.ptr.layerHeight ? o.op.ptr.layerHeight : b.extent.height;
  const auto* first = reinterpret_cast<const unsigned char*>(o.op.ptr.ptr);
  TouchSet t;
  for (std::size_t z = 0; z < b.extent.depth; ++z)
    scan_host_rows(first + z * layer * pitch, b.extent.width, pitch, b.extent.height, &t);
  if ((t.n || t.overflow) && kernel_visible(b.dst.op.ptr.ptr)) merge_named(t, named);
}

template <class Enqueue>
CUresult copy_3d_batch(size_t n, const CUDA_MEMCPY3D_BATCH_OP* ops, CUstream s, bool pt,
                       Enqueue&& enqueue) {
  FastState& fs = fast();
  if (!fs.active.load(std::memory_order_acquire) || !ops) return enqueue();
  TouchSet t, named;
  for (size_t i = 0; i < n; ++i) {
    scan_batch_box(ops[i], &named);
    const CUDA_MEMCPY3D_BATCH_OP& b = ops[i];
    // Array operands are not device pointers: only pointer operands can be regions.
    CUdeviceptr src = b.src.type == CU_MEMCPY_OPERAND_TYPE_POINTER ? b.src.op.ptr.ptr : 0;
    CUdeviceptr dst = b.dst.type == CU_MEMCPY_OPERAND_TYPE_POINTER ? b.dst.op.ptr.ptr : 0;
    std::size_t sn = src ? operand_span(b.src, b.dst, b.extent) : 0;
    std::size_t dn = dst ? operand_span(b.dst, b.src, b.extent) : 0;
    t.add_range(fs.map, src, sn);
    t.add_range(fs.map, dst, dn);
    note_copy(fs, dst, src, b.extent.width * b.extent.height * b.extent.depth, s, pt);
  }
  if (CUresult e = keep_named(named, s, pt); e != CUDA_SUCCESS) return e;
  return access_set(t, s, pt, enqueue);
}

// One stream memory operation: the word at addr.
template <class Enqueue>
CUresult word(CUdeviceptr addr, std::size_t bytes, CUstream s, bool pt, Enqueue&& enqueue) {
  FastState& fs = fast();
  if (!fs.active.load(std::memory_order_acquire)) return enqueue();
  TouchSet t;
  t.add_range(fs.map, addr, bytes);
  return access_set(t, s, pt, enqueue);
}

template <class Enqueue>
CUresult mem_op_batch(unsigned count, const CUstreamBatchMemOpParams* ops, CUstream s, bool pt,
                      Enqueue&& enqueue) {
  FastState& fs = fast();
  if (!fs.active.load(std::memory_order_acquire) || !ops) return enqueue();
  TouchSet t;
  for (unsigned i = 0; i < count; ++i) {
    switch (ops[i].operation) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        t.add_range(fs.map, ops[i].waitValue.address, 4);
        break;
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        t.add_range(fs.map, ops[i].waitValue.address, 8);
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        t.add_range(fs.map, ops[i].writeValue.address, 4);
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        t.add_range(fs.map, ops[i].writeValue.address, 8);
        break;
      default:  // barriers and flushes name no address
        break;
    }
  }
  return access_set(t, s, pt, enqueue);
}

}  // namespace

#define GSWAP_R real()

// Batch copies. Their ABIs are missing from older drivers; a program built for a newer one would
// not have loaded without libgswap's export, so it gets the driver's answer for an absent entry
// point.
#define GSWAP_CALL_IF_PRESENT(sym, ...) \
  (GSWAP_R.sym ? GSWAP_R.sym(__VA_ARGS__) : CUDA_ERROR_NOT_FOUND)
CUresult hook_cuMemcpyBatchAsync(CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count,
                                 CUmemcpyAttributes* a, size_t* ai, size_t na, size_t* fail,
                                 CUstream st) {
  return copy_batch(d, s, n, count, st, false, [&] {
    return GSWAP_CALL_IF_PRESENT(cuMemcpyBatchAsync, d, s, n, count, a, ai, na, fail, st);
  });
}
CUresult hook_cuMemcpyBatchAsync_ptsz(CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count,
                                      CUmemcpyAttributes* a, size_t* ai, size_t na, size_t* fail,
                                      CUstream st) {
  return copy_batch(d, s, n, count, st, true, [&] {
    return GSWAP_CALL_IF_PRESENT(cuMemcpyBatchAsync_ptsz, d, s, n, count, a, ai, na, fail, st);
  });
}
CUresult hook_cuMemcpy3DBatchAsync(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail,
                                   unsigned long long flags, CUstream st) {
  return copy_3d_batch(n, ops, st, false, [&] {
    return GSWAP_CALL_IF_PRESENT(cuMemcpy3DBatchAsync, n, ops, fail, flags, st);
  });
}
CUresult hook_cuMemcpy3DBatchAsync_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops, size_t* fail,
                                        unsigned long long flags, CUstream st) {
  return copy_3d_batch(n, ops, st, true, [&] {
    return GSWAP_CALL_IF_PRESENT(cuMemcpy3DBatchAsync_ptsz, n, ops, fail, flags, st);
  });
}
CUresult hook_cuMemcpyBatchAsync_v2(CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count,
                                    CUmemcpyAttributes* a, size_t* ai, size_t na, CUstream st) {
  return copy_batch(d, s, n, count, st, false, [&] {
    return GSWAP_CALL_IF_PRESENT(cuMemcpyBatchAsync_v2, d, s, n, count, a, ai, na, st);
  });
}
CUresult hook_cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr* d, CUdeviceptr* s, size_t* n, size_t count,
                                         CUmemcpyAttributes* a, size_t* ai, size_t na,
                                         CUstream st) {
  return copy_batch(d, s, n, count, st, true, [&] {
    return GSWAP_CALL_IF_PRESENT(cuMemcpyBatchAsync_v2_ptsz, d, s, n, count, a, ai, na, st);
  });
}
CUresult hook_cuMemcpy3DBatchAsync_v2(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops,
                                      unsigned long long flags, CUstream st) {
  return copy_3d_batch(n, ops, st, false, [&] {
    return GSWAP_CALL_IF_PRESENT(cuMemcpy3DBatchAsync_v2, n, ops, flags, st);
  });
}
CUresult hook_cuMemcpy3DBatchAsync_v2_ptsz(size_t n, CUDA_MEMCPY3D_BATCH_OP* ops,
                                           unsigned long long flags, CUstream st) {
  return copy_3d_batch(n, ops, st, true, [&] {
    return GSWAP_CALL_IF_PRESENT(cuMemcpy3DBatchAsync_v2_ptsz, n, ops, flags, st);
  });
}

// Stream memory operations.
#define GSWAP_MEMOP(sym, T, bytes, pt)                                                 \
  CUresult hook_##sym(CUstream st, CUdeviceptr addr, T v, unsigned int flags) {        \
    return word(addr, bytes, st, pt, [&] { return GSWAP_R.sym(st, addr, v, flags); }); \
  }
GSWAP_MEMOP(cuStreamWriteValue32_v2, cuuint32_t, 4, false)
GSWAP_MEMOP(cuStreamWriteValue32_v2_ptsz, cuuint32_t, 4, true)
GSWAP_MEMOP(cuStreamWriteValue64_v2, cuuint64_t, 8, false)
GSWAP_MEMOP(cuStreamWriteValue64_v2_ptsz, cuuint64_t, 8, true)
GSWAP_MEMOP(cuStreamWaitValue32_v2, cuuint32_t, 4, false)
GSWAP_MEMOP(cuStreamWaitValue32_v2_ptsz, cuuint32_t, 4, true)
GSWAP_MEMOP(cuStreamWaitValue64_v2, cuuint64_t, 8, false)
GSWAP_MEMOP(cuStreamWaitValue64_v2_ptsz, cuuint64_t, 8, true)

CUresult hook_cuStreamBatchMemOp_v2(CUstream st, unsigned int count, CUstreamBatchMemOpParams* ops,
                                    unsigned int flags) {
  return mem_op_batch(count, ops, st, false,
                      [&] { return GSWAP_R.cuStreamBatchMemOp_v2(st, count, ops, flags); });
}
CUresult hook_cuStreamBatchMemOp_v2_ptsz(CUstream st, unsigned int count,
                                         CUstreamBatchMemOpParams* ops, unsigned int flags) {
  return mem_op_batch(count, ops, st, true,
                      [&] { return GSWAP_R.cuStreamBatchMemOp_v2_ptsz(st, count, ops, flags); });
}

}  // namespace gswap::interpose
