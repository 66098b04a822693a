// memops.cpp: batch copies and stream memory operations on swapped-out regions.
//
//   memops REGION-MiB    (budget from GSWAP_BUDGET; six regions, about three fit)
//
// Six regions are filled with known words, so the first ones are swapped out. Then, each time on
// regions that the accesses just before have pushed out, the program runs cuMemcpyBatchAsync (both
// ABIs), cuMemcpy3DBatchAsync, cuStreamWaitValue32/WriteValue32/64 and cuStreamBatchMemOp, and
// checks every word afterwards; batches over more regions than the budget holds fail with
// CUDA_ERROR_OUT_OF_MEMORY and change nothing. Without libgswap's hooks for these calls the driver
// would find the ranges unmapped (simcuda: CUDA_ERROR_INVALID_VALUE; a GPU: a fatal fault).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "preload_common.h"

namespace {

constexpr int kRegions = 6;
CUdeviceptr g_b[kRegions];
unsigned long long g_words;

uint32_t word_at(CUdeviceptr p) {
  uint32_t v = 0;
  PCHECK(cuMemcpyDtoH(&v, p, sizeof v));
  return v;
}

// Reads one word of each of the regions named, so they become the most recently used and the
// others are the ones swapped out next.
void touch(std::initializer_list<int> ks) {
  for (int k : ks) (void)word_at(g_b[k]);
}

// Words [from, to) of region k all equal want.
bool words_equal(int k, unsigned long long from, unsigned long long to, uint32_t want) {
  std::vector<uint32_t> host(to - from);
  PCHECK(cuMemcpyDtoH(host.data(), g_b[k] + from * 4, host.size() * 4));
  for (unsigned long long i = 0; i < host.size(); ++i) {
    if (host[i] != want) {
      std::fprintf(stderr, "region %d word %llu: %u, expected %u\n", k, from + i, host[i], want);
      return false;
    }
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long long region_bytes = (argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 5ull) << 20;
  g_words = region_bytes / 4;
  preload_init();
  CUstream s, s2;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  PCHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  for (int k = 0; k < kRegions; ++k) {
    PCHECK(cuMemAlloc(&g_b[k], region_bytes));
    PCHECK(cuMemsetD32(g_b[k], 100u + k, g_words));
  }

  // 1. A batch of copies in three directions over regions 0-2, swapped out by the fills above.
  constexpr unsigned long long kChunk = 16 << 10;  // words
  std::vector<uint32_t> up(kChunk), down(kChunk, 0);
  for (unsigned long long i = 0; i < kChunk; ++i) up[i] = 0x5000u + static_cast<uint32_t>(i % 997);
  CUdeviceptr dsts[] = {g_b[0], reinterpret_cast<CUdeviceptr>(down.data()), g_b[0] + (1 << 20)};
  CUdeviceptr srcs[] = {reinterpret_cast<CUdeviceptr>(up.data()), g_b[1], g_b[2]};
  size_t sizes[] = {kChunk * 4, kChunk * 4, 1 << 20};
  CUmemcpyAttributes attr{};
  attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  size_t attr_idx = 0;
  PCHECK(cuMemcpyBatchAsync(dsts, srcs, sizes, 3, &attr, &attr_idx, 1, s));
  PCHECK(cuStreamSynchronize(s));
  for (unsigned long long i = 0; i < kChunk; ++i) PEXPECT(down[i] == 101u);
  std::vector<uint32_t> back(kChunk);
  PCHECK(cuMemcpyDtoH(back.data(), g_b[0], kChunk * 4));
  PEXPECT(back == up);

  // 2. A 3D batch copy: a 64-byte x 4-row x 2-layer box from region 3 into region 4.
  touch({0, 1, 2});
  CUDA_MEMCPY3D_BATCH_OP box{};
  box.src.type = box.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
  box.src.op.ptr.ptr = g_b[3];
  box.src.op.ptr.rowLength = 256;
  box.src.op.ptr.layerHeight = 8;
  box.dst.op.ptr.ptr = g_b[4] + (2 << 20);
  box.extent = {64, 4, 2};
  box.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
  PCHECK(cuMemcpy3DBatchAsync(1, &box, 0, s));
  PCHECK(cuStreamSynchronize(s));
  // Tightly packed at the destination: 512 bytes of 103, then region 4's own words again.
  PEXPECT(words_equal(4, (2 << 20) / 4, (2 << 20) / 4 + 128, 103u));
  PEXPECT(word_at(g_b[4] + (2 << 20) + 512) == 104u);

  // 3. Stream memory operations, one region each. Region 5 is out again: the wait on it holds
  // stream s until stream s2 writes the word; the write after the wait lands in region 0.
  touch({2, 3, 4});
  PCHECK(cuStreamWaitValue32(s, g_b[5] + 64, 0x77u, CU_STREAM_WAIT_VALUE_EQ));
  PCHECK(cuStreamWriteValue32(s2, g_b[5] + 64, 0x77u, 0));
  PCHECK(cuStreamWriteValue32(s, g_b[0] + 4 * (kChunk + 1), 0xabcdu, 0));
  PCHECK(cuStreamSynchronize(s));
  PCHECK(cuStreamSynchronize(s2));
  touch({2, 3, 4});
  PCHECK(cuStreamWriteValue64(s, g_b[1] + 8, 0x0123456789abcdefull, 0));
  PCHECK(cuStreamWaitValue32(s, g_b[5], 105u, CU_STREAM_WAIT_VALUE_GEQ));  // already true
  PCHECK(cuStreamSynchronize(s));

  // 4. One cuStreamBatchMemOp over regions 2-4, pushed out by reading the others.
  touch({0, 1, 5});
  CUstreamBatchMemOpParams ops[3]{};
  ops[0].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
  ops[0].waitValue.address = g_b[3] + 4096;
  ops[0].waitValue.value = 103u;
  ops[0].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
  ops[1].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
  ops[1].writeValue.address = g_b[2] + 4;
  ops[1].writeValue.value = 0x1234u;
  ops[2].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
  ops[2].writeValue.address = g_b[4] + 16;
  ops[2].writeValue.value64 = 0xfeedfacecafebeefull;
  PCHECK(cuStreamBatchMemOp(s, 3, ops, 0));
  PCHECK(cuStreamSynchronize(s));

  // 5. The per-thread-default-stream form, found through cuGetProcAddress as the runtime does.
  touch({0, 1, 2});
  void* fn = nullptr;
  PCHECK(cuGetProcAddress("cuStreamWriteValue32", &fn, 13000,
                          CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, nullptr));
  auto write32_ptsz =
      reinterpret_cast<CUresult (*)(CUstream, CUdeviceptr, cuuint32_t, unsigned)>(fn);
  PCHECK(write32_ptsz(nullptr, g_b[3] + 8, 0x3333u, 0));
  PCHECK(cuCtxSynchronize());

  // 6. The CUDA 12.8 ABI of the batch copy (with failIdx), as a runtime built for 12.8 gets it.
  touch({3, 4, 5});
  PCHECK(cuGetProcAddress("cuMemcpyBatchAsync", &fn, 12080, CU_GET_PROC_ADDRESS_DEFAULT, nullptr));
  using BatchV1 = CUresult (*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t, CUmemcpyAttributes*,
                               size_t*, size_t, size_t*, CUstream);
  CUdeviceptr v1_dst = g_b[2] + 8192, v1_src = g_b[1] + 8192;
  size_t v1_size = 4, fail_idx = 0;
  PCHECK(reinterpret_cast<BatchV1>(fn)(&v1_dst, &v1_src, &v1_size, 1, &attr, &attr_idx, 1,
                                       &fail_idx, s));
  PCHECK(cuStreamSynchronize(s));

  // 7. Batches whose working set exceeds the budget fail as such a launch does, touching nothing.
  CUdeviceptr big_dsts[] = {g_b[0] + 4096, g_b[2] + 4096};
  CUdeviceptr big_srcs[] = {g_b[1] + 4096, g_b[5] + 4096};
  size_t big_sizes[] = {4, 4};
  CUresult e = cuMemcpyBatchAsync(big_dsts, big_srcs, big_sizes, 2, &attr, &attr_idx, 1, s);
  if (e != CUDA_ERROR_OUT_OF_MEMORY) {
    std::fprintf(stderr, "batch copy over four regions: %d, expected out of memory\n", (int)e);
    return 1;
  }
  CUstreamBatchMemOpParams big[4]{};
  for (int k = 0; k < 4; ++k) {
    big[k].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    big[k].writeValue.address = g_b[k] + 4096;
    big[k].writeValue.value = 0xdeadu;
  }
  e = cuStreamBatchMemOp(s, 4, big, 0);
  if (e != CUDA_ERROR_OUT_OF_MEMORY) {
    std::fprintf(stderr, "memory operations over four regions: %d, expected out of memory\n",
                 (int)e);
    return 1;
  }
  PCHECK(cuStreamSynchronize(s));

  // Every word of every region, swapped in again region by region.
  const unsigned long long mid = (1 << 20) / 4, mid_end = (2 << 20) / 4;
  PEXPECT(word_at(g_b[0] + 4096) == up[1024]);  // the refused batch copy did not run
  PEXPECT(words_equal(0, kChunk, kChunk + 1, 100u));
  PEXPECT(word_at(g_b[0] + 4 * (kChunk + 1)) == 0xabcdu);
  PEXPECT(words_equal(0, kChunk + 2, mid, 100u));
  PEXPECT(words_equal(0, mid, mid_end, 102u));
  PEXPECT(words_equal(0, mid_end, g_words, 100u));
  uint64_t w64 = 0;
  PCHECK(cuMemcpyDtoH(&w64, g_b[1] + 8, 8));
  PEXPECT(w64 == 0x0123456789abcdefull);
  PEXPECT(words_equal(1, 0, 2, 101u));
  PEXPECT(words_equal(1, 4, g_words, 101u));
  PEXPECT(word_at(g_b[2]) == 102u && word_at(g_b[2] + 4) == 0x1234u);
  PEXPECT(words_equal(2, 2, 2048, 102u));
  PEXPECT(word_at(g_b[2] + 8192) == 101u);
  PEXPECT(words_equal(2, 2049, g_words, 102u));
  PEXPECT(words_equal(3, 0, 2, 103u));
  PEXPECT(word_at(g_b[3] + 8) == 0x3333u);
  PEXPECT(words_equal(3, 3, g_words, 103u));
  PCHECK(cuMemcpyDtoH(&w64, g_b[4] + 16, 8));
  PEXPECT(w64 == 0xfeedfacecafebeefull);
  PEXPECT(words_equal(4, 0, 4, 104u));
  PEXPECT(words_equal(4, 6, (2 << 20) / 4, 104u));
  PEXPECT(words_equal(4, (2 << 20) / 4 + 128, g_words, 104u));
  PEXPECT(words_equal(5, 0, 16, 105u));
  PEXPECT(words_equal(5, 16, 17, 0x77u));
  PEXPECT(words_equal(5, 17, g_words, 105u));
  std::printf(
      "memops: batch copies and stream memory operations on swapped-out regions, verified\n");
  return 0;
}
