// memops_test.cpp: batch copies (cuMemcpyBatchAsync_v2, cuMemcpy3DBatchAsync_v2) and stream
// memory operations (write/wait value, cuStreamBatchMemOp_v2): values land, waits hold their
// stream until released, and invalid requests are refused without touching the stream.
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "sc_test.h"
#include "simcuda.h"

// The per-thread-default-stream ABI, which cuda.h only declares under
// CUDA_API_PER_THREAD_DEFAULT_STREAM.
extern "C" {
CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr*, CUdeviceptr*, size_t*, size_t,
                                    CUmemcpyAttributes*, size_t*, size_t, CUstream);
CUresult cuStreamWriteValue32_v2_ptsz(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
CUresult cuStreamWaitValue32_v2_ptsz(CUstream, CUdeviceptr, cuuint32_t, unsigned int);
CUresult cuStreamSynchronize_ptsz(CUstream);
}

namespace {

CUmemcpyAttributes attr(CUmemcpySrcAccessOrder o = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM) {
  CUmemcpyAttributes a{};
  a.srcAccessOrder = o;
  return a;
}

// Device memory is host memory in simcuda, so the tests may read words directly.
uint32_t peek32(CUdeviceptr p) {
  return __atomic_load_n(reinterpret_cast<uint32_t*>(p), __ATOMIC_ACQUIRE);
}
void poke32(CUdeviceptr p, uint32_t v) {
  __atomic_store_n(reinterpret_cast<uint32_t*>(p), v, __ATOMIC_RELEASE);
}

unsigned long long unmet_reads() {
  unsigned long long v = 0;
  EXPECT_EQ(simcudaGetCounter("wait_value_unmet", &v), 0);
  return v;
}

// A wait that should still hold. Once its stream's worker has read the word and found the
// condition unmet after this call (the counter moves; no other wait is pending in these tests),
// the stream must still be busy; a wait passed wrongly finishes its stream instead.
void expect_blocked(CUstream s) {
  unsigned long long base = unmet_reads();
  bool seen = false;
  for (int i = 0; i < 3'000'000 && !seen; ++i) {
    if (cuStreamQuery(s) == CUDA_SUCCESS) break;
    seen = unmet_reads() > base;
    if (!seen) std::this_thread::sleep_for(std::chrono::microseconds(10));
  }
  EXPECT_TRUE(seen) << "the wait never read an unmet value";
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
}

class Memops : public Sim {
 protected:
  void SetUp() override {
    Sim::SetUp();
    CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    for (CUdeviceptr* p : {&a, &b, &c}) {
      CK(cuMemAlloc(p, kBytes));
      CK(cuMemsetD8(*p, 0, kBytes));
    }
  }
  void TearDown() override {
    cuCtxSynchronize();
    for (CUdeviceptr p : {a, b, c}) cuMemFree(p);
    cuStreamDestroy(s);
    cuStreamDestroy(other);
    Sim::TearDown();
  }
  static constexpr size_t kBytes = 4096;
  CUstream s = nullptr, other = nullptr;
  CUdeviceptr a = 0, b = 0, c = 0;
};

}  // namespace

TEST_F(Memops, BatchCopiesEveryDirection) {
  std::vector<uint8_t> up(256), down(256, 0);
  for (size_t i = 0; i < up.size(); ++i) up[i] = static_cast<uint8_t>(i * 7 + 1);
  CK(cuMemsetD8(b, 0x5a, kBytes));
  CUdeviceptr dsts[] = {a, reinterpret_cast<CUdeviceptr>(down.data()), c + 100};
  CUdeviceptr srcs[] = {reinterpret_cast<CUdeviceptr>(up.data()), b, b};
  size_t sizes[] = {up.size(), down.size(), 64};
  CUmemcpyAttributes at[] = {attr(), attr(CU_MEMCPY_SRC_ACCESS_ORDER_ANY)};
  size_t idx[] = {0, 1};
  CK(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, at, idx, 2, s));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(std::memcmp(reinterpret_cast<void*>(a), up.data(), up.size()), 0);
  EXPECT_EQ(down, std::vector<uint8_t>(256, 0x5a));
  auto* cc = reinterpret_cast<uint8_t*>(c);
  EXPECT_EQ(cc[99], 0);
  EXPECT_EQ(cc[100], 0x5a);
  EXPECT_EQ(cc[163], 0x5a);
  EXPECT_EQ(cc[164], 0);
}

TEST_F(Memops, BatchCopySourceReadDuringCallIsDoneOnReturn) {
  uint32_t src[64];
  for (uint32_t i = 0; i < 64; ++i) src[i] = 0xabc00000u + i;
  CUdeviceptr dsts[] = {a};
  CUdeviceptr srcs[] = {reinterpret_cast<CUdeviceptr>(src)};
  size_t sizes[] = {sizeof src};
  CUmemcpyAttributes at[] = {attr(CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL)};
  size_t idx[] = {0};
  CK(cuMemcpyBatchAsync(dsts, srcs, sizes, 1, at, idx, 1, s));
  std::memset(src, 0, sizeof src);  // the caller may reuse its buffer at once
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(peek32(a), 0xabc00000u);
  EXPECT_EQ(peek32(a + 63 * 4), 0xabc00000u + 63);
}

TEST_F(Memops, BatchCopyValidation) {
  uint8_t host[64] = {1, 2, 3};
  CUdeviceptr dsts[] = {a, b + kBytes - 8};
  CUdeviceptr srcs[] = {reinterpret_cast<CUdeviceptr>(host), c};
  size_t sizes[] = {64, 64};  // the second runs past the end of b
  CUmemcpyAttributes at[] = {attr(), attr()};
  size_t idx[] = {0, 1};
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, at, idx, 1, s), CUDA_ERROR_INVALID_VALUE);
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(peek32(a), 0u) << "a rejected batch enqueued part of itself";
  sizes[1] = 8;
  // The legacy NULL stream is refused; a per-thread default stream is not.
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, at, idx, 1, nullptr),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, at, idx, 1, CU_STREAM_LEGACY),
            CUDA_ERROR_INVALID_VALUE);
  size_t bad_first[] = {1, 0};
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, at, bad_first, 2, s),
            CUDA_ERROR_INVALID_VALUE);
  size_t not_increasing[] = {0, 0};
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, at, not_increasing, 2, s),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, at, idx, 3, s), CUDA_ERROR_INVALID_VALUE);
  CUmemcpyAttributes invalid[] = {attr(CU_MEMCPY_SRC_ACCESS_ORDER_INVALID)};
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, invalid, idx, 1, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyBatchAsync(dsts, srcs, sizes, 0, at, idx, 1, s), CUDA_ERROR_INVALID_VALUE);
  CK(cuMemcpyBatchAsync_v2_ptsz(dsts, srcs, sizes, 2, at, idx, 1, nullptr));
  CK(cuStreamSynchronize_ptsz(nullptr));
  EXPECT_EQ(reinterpret_cast<uint8_t*>(a)[2], 3);
}

TEST_F(Memops, Batch3DCopiesPointerOperands) {
  // A 5x3x2 box from a 16-byte-pitch, 4-row-layer source into a tightly packed destination.
  for (size_t i = 0; i < 128; ++i) reinterpret_cast<uint8_t*>(a)[i] = static_cast<uint8_t>(i);
  CUDA_MEMCPY3D_BATCH_OP op{};
  op.src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  op.src.op.ptr.ptr = a + 1;
  op.src.op.ptr.rowLength = 16;
  op.src.op.ptr.layerHeight = 4;
  op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  op.dst.op.ptr.ptr = b;
  op.extent = {5, 3, 2};
  op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  CK(cuMemcpy3DBatchAsync(1, &op, 0, s));
  CK(cuStreamSynchronize(s));
  auto* d = reinterpret_cast<uint8_t*>(b);
  for (size_t z = 0; z < 2; ++z)
    for (size_t y = 0; y < 3; ++y)
      for (size_t x = 0; x < 5; ++x)
        EXPECT_EQ(d[(z * 3 + y) * 5 + x], 1 + (z * 4 + y) * 16 + x) << x << "," << y << "," << z;
  EXPECT_EQ(d[30], 0);

  CUDA_MEMCPY3D_BATCH_OP bad = op;
  bad.extent.depth = 0;
  EXPECT_EQ(cuMemcpy3DBatchAsync(1, &bad, 0, s), CUDA_ERROR_INVALID_VALUE);
  bad = op;
  bad.src.op.ptr.rowLength = 4;  // shorter than the row
  EXPECT_EQ(cuMemcpy3DBatchAsync(1, &bad, 0, s), CUDA_ERROR_INVALID_VALUE);
  bad = op;
  bad.dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  EXPECT_EQ(cuMemcpy3DBatchAsync(1, &bad, 0, s), CUDA_ERROR_NOT_SUPPORTED);
  bad = op;
  bad.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
  EXPECT_EQ(cuMemcpy3DBatchAsync(1, &bad, 0, s), CUDA_ERROR_INVALID_VALUE);
  bad = op;
  bad.dst.op.ptr.ptr = b + kBytes - 16;  // the box runs past the end of b
  EXPECT_EQ(cuMemcpy3DBatchAsync(1, &bad, 0, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpy3DBatchAsync(1, &op, 1, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpy3DBatchAsync(1, &op, 0, nullptr), CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Memops, WriteValuesLand) {
  CK(cuStreamWriteValue32(s, a + 4, 0xdeadbeefu, 0));
  CK(cuStreamWriteValue64(s, b + 8, 0x0123456789abcdefull, 0));
  CK(cuStreamWriteValue32_v2_ptsz(nullptr, c, 42, 0));
  CK(cuStreamSynchronize(s));
  CK(cuStreamSynchronize_ptsz(nullptr));
  EXPECT_EQ(peek32(a + 4), 0xdeadbeefu);
  EXPECT_EQ(peek32(a), 0u);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(b + 8), 0x0123456789abcdefull);
  EXPECT_EQ(peek32(c), 42u);
}

TEST_F(Memops, WaitHoldsItsStreamUntilAnotherStreamWrites) {
  CK(cuStreamWaitValue32(s, a, 5, CU_STREAM_WAIT_VALUE_GEQ));
  CK(cuStreamWriteValue32(s, b, 1, 0));
  expect_blocked(s);
  EXPECT_EQ(peek32(b), 0u);
  CK(cuStreamWriteValue32(other, a, 4, 0));
  CK(cuStreamSynchronize(other));
  expect_blocked(s);  // 4 < 5
  CK(cuStreamWriteValue32(other, a, 6, 0));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(peek32(b), 1u);
}

TEST_F(Memops, WaitConditions) {
  struct Case {
    unsigned flags;
    uint32_t want, blocked, release;
  } cases[] = {
      {CU_STREAM_WAIT_VALUE_GEQ, 5, 0xfffffff0u, 5},  // cyclic: -16 is "before" 5
      {CU_STREAM_WAIT_VALUE_EQ, 7, 8, 7},
      {CU_STREAM_WAIT_VALUE_AND, 0x30, 0x0f, 0x10},
      {CU_STREAM_WAIT_VALUE_NOR, 0xffff0000u, 0x0000ffffu, 0x0000fffeu},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.flags);
    poke32(a, k.blocked);
    CK(cuStreamWaitValue32(s, a, k.want, k.flags));
    expect_blocked(s);
    poke32(a, k.release);
    CK(cuStreamSynchronize(s));
  }
  // 64-bit: the GEQ comparison uses all 64 bits.
  *reinterpret_cast<uint64_t*>(b) = 0x100000000ull;
  CK(cuStreamWaitValue64(s, b, 0x100000001ull, CU_STREAM_WAIT_VALUE_GEQ));
  expect_blocked(s);
  CK(cuStreamWriteValue64(other, b, 0x100000001ull, 0));
  CK(cuStreamSynchronize(s));
  // The per-thread form waits on the calling thread's default stream.
  poke32(c, 1);
  CK(cuStreamWaitValue32_v2_ptsz(nullptr, c, 1, CU_STREAM_WAIT_VALUE_EQ));
  CK(cuStreamSynchronize_ptsz(nullptr));
}

TEST_F(Memops, WriteAndWaitValidation) {
  EXPECT_EQ(cuStreamWriteValue32(s, a + 2, 1, 0), CUDA_ERROR_INVALID_VALUE);  // misaligned
  EXPECT_EQ(cuStreamWriteValue64(s, a + 4, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamWriteValue32(s, a + kBytes, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamWriteValue32(s, 0, 1, 0), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamWriteValue32(s, a, 1, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamWaitValue32(s, a, 1, 0x4), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuStreamWaitValue32(s, a, 1, CU_STREAM_WAIT_VALUE_FLUSH), CUDA_ERROR_NOT_SUPPORTED);
  uint32_t host = 0;
  EXPECT_EQ(cuStreamWriteValue32(s, reinterpret_cast<CUdeviceptr>(&host), 1, 0),
            CUDA_ERROR_INVALID_VALUE);
  int nor = 0, mem64 = 0, flush = 1;
  CK(cuDeviceGetAttribute(&nor, CU_DEVICE_ATTRIBUTE_CAN_USE_STREAM_WAIT_VALUE_NOR, dev));
  CK(cuDeviceGetAttribute(&mem64, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, dev));
  CK(cuDeviceGetAttribute(&flush, CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, dev));
  EXPECT_EQ(nor, 1);
  EXPECT_EQ(mem64, 1);
  EXPECT_EQ(flush, 0);
}

TEST_F(Memops, BatchMemOpRunsInOrder) {
  CUstreamBatchMemOpParams ops[4]{};
  ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[0].waitValue.address = a;
  ops[0].waitValue.value = 1;
  ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
  ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[1].writeValue.address = b;
  ops[1].writeValue.value = 77;
  ops[2].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
  ops[2].memoryBarrier.flags = CU_STREAM_MEMORY_BARRIER_TYPE_GPU;
  ops[3].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  ops[3].writeValue.address = c + 8;
  ops[3].writeValue.value64 = 0xfeedfacecafebeefull;
  CK(cuStreamBatchMemOp(s, 4, ops, 0));
  expect_blocked(s);
  EXPECT_EQ(peek32(b), 0u);
  CK(cuStreamWriteValue32(other, a, 1, 0));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(peek32(b), 77u);
  EXPECT_EQ(*reinterpret_cast<uint64_t*>(c + 8), 0xfeedfacecafebeefull);
}

TEST_F(Memops, BatchMemOpValidation) {
  CUstreamBatchMemOpParams ops[2]{};
  ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[0].writeValue.address = a;
  ops[0].writeValue.value = 9;
  ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  ops[1].writeValue.address = b + 4;  // misaligned for 64 bits
  EXPECT_EQ(cuStreamBatchMemOp(s, 2, ops, 0), CUDA_ERROR_INVALID_VALUE);
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(peek32(a), 0u) << "a rejected batch enqueued part of itself";
  ops[1].writeValue.address = b;
  EXPECT_EQ(cuStreamBatchMemOp(s, 2, ops, 1), CUDA_ERROR_INVALID_VALUE);
  std::vector<CUstreamBatchMemOpParams> many(257, ops[0]);
  EXPECT_EQ(cuStreamBatchMemOp(s, 257, many.data(), 0), CUDA_ERROR_INVALID_VALUE);
  ops[1].operation = static_cast<CUstreamBatchMemOpType>(99);
  EXPECT_EQ(cuStreamBatchMemOp(s, 2, ops, 0), CUDA_ERROR_INVALID_VALUE);
  ops[1].flushRemoteWrites.operation = CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES;
  ops[1].flushRemoteWrites.flags = 0;
  EXPECT_EQ(cuStreamBatchMemOp(s, 2, ops, 0), CUDA_ERROR_NOT_SUPPORTED);
  ops[1].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
  ops[1].memoryBarrier.flags = 7;
  EXPECT_EQ(cuStreamBatchMemOp(s, 2, ops, 0), CUDA_ERROR_INVALID_VALUE);
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(peek32(a), 0u);
  CK(cuStreamBatchMemOp(s, 256, many.data(), 0));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(peek32(a), 9u);
}

TEST_F(Memops, ProcAddressServesBothBatchAbis) {
  void* fn = nullptr;
  CUdriverProcAddressQueryResult st{};
  CK(cuGetProcAddress("cuMemcpyBatchAsync", &fn, 13000, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuMemcpyBatchAsync_v2));
  CK(cuGetProcAddress("cuStreamWaitValue32", &fn, 12000,
                      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st));
  EXPECT_EQ(fn, reinterpret_cast<void*>(&cuStreamWaitValue32_v2_ptsz));
  EXPECT_EQ(cuGetProcAddress("cuMemcpyBatchAsync", &fn, 12060, CU_GET_PROC_ADDRESS_DEFAULT, &st),
            CUDA_ERROR_NOT_FOUND);
  EXPECT_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);

  // The 12.8 ABI reports which copy was refused in failIdx (SIZE_MAX: none in particular).
  using BatchV1 = CUresult (*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*,
                               size_t*, size_t, size_t*, CUstream);
  CK(cuGetProcAddress("cuMemcpyBatchAsync", &fn, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  ASSERT_NE(fn, reinterpret_cast<void*>(&cuMemcpyBatchAsync_v2));
  auto v1 = reinterpret_cast<BatchV1>(fn);
  CUdeviceptr dsts[] = {a, b, c};
  CUdeviceptr srcs[] = {b, c, a + kBytes - 4};
  size_t sizes[] = {16, 16, 16};  // the third runs past the end of a
  CUmemcpyAttributes at[] = {attr()};
  size_t idx[] = {0};
  size_t fail = 0;
  EXPECT_EQ(v1(dsts, srcs, sizes, 3, at, idx, 1, &fail, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(fail, 2u);
  EXPECT_EQ(v1(dsts, srcs, sizes, 3, at, idx, 1, &fail, nullptr), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(fail, SIZE_MAX);
  CK(cuMemsetD8(b, 9, 16));
  fail = 0;
  CK(v1(dsts, srcs, sizes, 2, at, idx, 1, &fail, s));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(reinterpret_cast<uint8_t*>(a)[15], 9);

  using Batch3DV1 =
      CUresult (*)(size_t, CUDA_MEMCPY3D_BATCH_OP*, size_t*, unsigned long long, CUstream);
  CK(cuGetProcAddress("cuMemcpy3DBatchAsync", &fn, 12080, CU_GET_PROC_ADDRESS_DEFAULT, &st));
  CUDA_MEMCPY3D_BATCH_OP ops[2]{};
  for (auto& op : ops) {
    op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op.src.op.ptr.ptr = b;
    op.dst.op.ptr.ptr = c;
    op.extent = {8, 1, 1};
    op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  }
  ops[1].dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
  fail = 0;
  EXPECT_EQ(reinterpret_cast<Batch3DV1>(fn)(2, ops, &fail, 0, s), CUDA_ERROR_NOT_SUPPORTED);
  EXPECT_EQ(fail, 1u);
}
