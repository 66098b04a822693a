// memops.cpp: stream memory operations (cuStreamWriteValue32/64_v2, cuStreamWaitValue32/64_v2,
// cuStreamBatchMemOp_v2) and their per-thread-default-stream forms.
//
// Each operation is validated at enqueue time (the address must be a live, device-visible,
// naturally aligned word) and then runs on the stream's worker thread: a write is an atomic
// store, a wait polls the word (streams.cpp, run_wait_value). No state of its own.
#include "internal.h"

namespace simcuda {
namespace {

// The simulated devices report CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES = 0, so the flush
// flag and operation are refused as on such a GPU.
constexpr unsigned kWaitConditions = 0x3;  // GEQ, EQ, AND, NOR

CUresult check_addr(CUdeviceptr addr, uint8_t bytes) {
  if (!addr || addr % bytes) return CUDA_ERROR_INVALID_VALUE;
  if (!device_range_ok(addr, bytes)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult build_write(CUdeviceptr addr, uint64_t v, uint8_t bytes, unsigned flags, Op* out) {
  // CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER is not supported by the v2 API.
  if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_addr(addr, bytes)) return r;
  out->kind = OpKind::WriteValue;
  out->dst = reinterpret_cast<uint8_t*>(addr);
  out->value64 = v;
  out->elem = bytes;
  return CUDA_SUCCESS;
}

CUresult build_wait(CUdeviceptr addr, uint64_t v, uint8_t bytes, unsigned flags, Op* out) {
  if (flags & CU_STREAM_WAIT_VALUE_FLUSH) return CUDA_ERROR_NOT_SUPPORTED;
  if (flags & ~kWaitConditions) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = check_addr(addr, bytes)) return r;
  out->kind = OpKind::WaitValue;
  out->dst = reinterpret_cast<uint8_t*>(addr);
  out->value64 = v;
  out->elem = bytes;
  out->memop_flags = flags;
  return CUDA_SUCCESS;
}

template <class Build>
CUresult single(CUstream h, bool pt, Build&& build) {
  if (CUresult r = check_init()) return r;
  Op op;
  if (CUresult r = build(&op)) return r;
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  return submit(s, std::move(op));
}

// CUDA limits a batch to 256 operations (CU_STREAM_MEM_OP count limit of the driver).
constexpr unsigned kMaxBatch = 256;

CUresult batch(CUstream h, unsigned count, CUstreamBatchMemOpParams* ops, unsigned flags, bool pt) {
  if (CUresult r = check_init()) return r;
  if (count == 0) return CUDA_SUCCESS;
  if (!ops || count > kMaxBatch || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::vector<Op> built(count);
  for (unsigned i = 0; i < count; ++i) {
    const CUstreamBatchMemOpParams& p = ops[i];
    CUresult r = CUDA_SUCCESS;
    switch (p.operation) {
      case CU_STREAM_MEM_OP_WAIT_VALUE_32:
        r = build_wait(p.waitValue.address, p.waitValue.value, 4, p.waitValue.flags, &built[i]);
        break;
      case CU_STREAM_MEM_OP_WAIT_VALUE_64:
        r = build_wait(p.waitValue.address, p.waitValue.value64, 8, p.waitValue.flags, &built[i]);
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_32:
        r = build_write(p.writeValue.address, p.writeValue.value, 4, p.writeValue.flags, &built[i]);
        break;
      case CU_STREAM_MEM_OP_WRITE_VALUE_64:
        r = build_write(p.writeValue.address, p.writeValue.value64, 8, p.writeValue.flags,
                        &built[i]);
        break;
      case CU_STREAM_MEM_OP_BARRIER:
        if (p.memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_SYS &&
            p.memoryBarrier.flags != CU_STREAM_MEMORY_BARRIER_TYPE_GPU)
          return CUDA_ERROR_INVALID_VALUE;
        built[i].kind = OpKind::Barrier;
        break;
      case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        return CUDA_ERROR_NOT_SUPPORTED;
      default:
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (r != CUDA_SUCCESS) return r;
  }
  Stream* s = nullptr;
  if (CUresult r = resolve_stream(h, pt, &s)) return r;
  for (Op& op : built)
    if (CUresult r = submit(s, std::move(op))) return r;
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace simcuda

using namespace simcuda;

#define SC_MEMOP(name, T, bytes, build, pt)                                         \
  SC_EXPORT CUresult name(CUstream h, CUdeviceptr addr, T v, unsigned int flags) {  \
    SC_ENTRY(name);                                                                 \
    return single(h, pt, [&](Op* op) { return build(addr, v, bytes, flags, op); }); \
  }
SC_MEMOP(cuStreamWriteValue32_v2, cuuint32_t, 4, build_write, false)
SC_MEMOP(cuStreamWriteValue32_v2_ptsz, cuuint32_t, 4, build_write, true)
SC_MEMOP(cuStreamWriteValue64_v2, cuuint64_t, 8, build_write, false)
SC_MEMOP(cuStreamWriteValue64_v2_ptsz, cuuint64_t, 8, build_write, true)
SC_MEMOP(cuStreamWaitValue32_v2, cuuint32_t, 4, build_wait, false)
SC_MEMOP(cuStreamWaitValue32_v2_ptsz, cuuint32_t, 4, build_wait, true)
SC_MEMOP(cuStreamWaitValue64_v2, cuuint64_t, 8, build_wait, false)
SC_MEMOP(cuStreamWaitValue64_v2_ptsz, cuuint64_t, 8, build_wait, true)

SC_EXPORT CUresult cuStreamBatchMemOp_v2(CUstream h, unsigned int count,
                                         CUstreamBatchMemOpParams* ops, unsigned int flags) {
  SC_ENTRY(cuStreamBatchMemOp_v2);
  return batch(h, count, ops, flags, false);
}
SC_EXPORT CUresult cuStreamBatchMemOp_v2_ptsz(CUstream h, unsigned int count,
                                              CUstreamBatchMemOpParams* ops, unsigned int flags) {
  SC_ENTRY(cuStreamBatchMemOp_v2_ptsz);
  return batch(h, count, ops, flags, true);
}
