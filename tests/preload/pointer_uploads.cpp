// pointer_uploads.cpp: pointer arrays uploaded to device memory, every way a host buffer can
// reach it.
//
//   pointer_uploads MODULE.so REGION-MiB [WAY]   (MODULE: pointer_kernels.so; budget from
//                                                 GSWAP_BUDGET; WAY: only the way of that index)
//
// For each way (cuMemcpyHtoD, cuMemcpy and cuMemcpyAsync with their per-thread forms, from
// pageable and pinned memory, 2D and 3D copies from host memory or a unified host address, batch
// copies of both ABIs and 3D batch copies), an array naming two fresh regions is uploaded into a
// small device buffer; launches over other regions then push the named ones out, and a kernel
// follows the array. Unless libgswap scans the upload and keeps the named regions, the kernel
// touches unmapped memory (on simcuda a SIGSEGV, on a GPU a fatal fault).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "preload_common.h"

namespace {

CUfunction g_add, g_add_indirect;

constexpr int kOthers = 4;
CUdeviceptr g_others[kOthers];
unsigned g_other_value = 0;
unsigned long long g_words = 0;
CUstream g_stream;

// Launches over every other region, so that the named ones are the least recently used.
void push_out() {
  for (auto& p : g_others) PCHECK(launch_add(g_add, nullptr, p, g_words, 1));
  ++g_other_value;
}

using Upload = void (*)(CUdeviceptr dst, const void* host, size_t bytes);

template <class Fn>
Fn proc(const char* name, int version, cuuint64_t flags) {
  void* fn = nullptr;
  PCHECK(cuGetProcAddress(name, &fn, version, flags, nullptr));
  return reinterpret_cast<Fn>(fn);
}

CUDA_MEMCPY2D rows_2d(CUdeviceptr dst, const void* host, size_t bytes, bool unified) {
  // Two rows of half the array each, the source rows 64 bytes apart.
  CUDA_MEMCPY2D c{};
  if (unified) {
    c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.srcDevice = reinterpret_cast<CUdeviceptr>(host);
  } else {
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host;
  }
  c.srcPitch = 64;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dst;
  c.dstPitch = bytes / 2;
  c.WidthInBytes = bytes / 2;
  c.Height = 2;
  return c;
}

template <class C>
C box_3d(CUdeviceptr dst, const void* host, size_t bytes) {
  // Two layers of one row each, the source layers 64 bytes apart.
  C c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = host;
  c.srcPitch = 64;
  c.srcHeight = 1;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dst;
  c.dstPitch = bytes / 2;
  c.dstHeight = 1;
  c.WidthInBytes = bytes / 2;
  c.Height = 1;
  c.Depth = 2;
  return c;
}

struct Way {
  const char* name;
  // Uploads `count` pointers to dst, from host memory laid out as the way needs.
  void (*upload)(CUdeviceptr dst, const CUdeviceptr* ptrs, size_t count);
};

// Host staging for the uploads: pageable unless said.
alignas(64) unsigned char g_host[256];

const void* linear(const CUdeviceptr* ptrs, size_t count) {
  std::memcpy(g_host, ptrs, count * 8);
  return g_host;
}
// One pointer at the start of each 64-byte row.
const void* spread(const CUdeviceptr* ptrs, size_t count) {
  std::memset(g_host, 0, sizeof g_host);
  for (size_t i = 0; i < count; ++i) std::memcpy(g_host + 64 * i, &ptrs[i], 8);
  return g_host;
}

const Way kWays[] = {
    {"cuMemcpyHtoD", [](CUdeviceptr d, const CUdeviceptr* p,
                        size_t n) { PCHECK(cuMemcpyHtoD(d, linear(p, n), n * 8)); }},
    {"cuMemcpy",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       PCHECK(cuMemcpy(d, reinterpret_cast<CUdeviceptr>(linear(p, n)), n * 8));
     }},
    {"cuMemcpy from pinned memory",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       void* pinned = nullptr;
       PCHECK(cuMemAllocHost(&pinned, 256));
       std::memcpy(pinned, p, n * 8);
       PCHECK(cuMemcpy(d, reinterpret_cast<CUdeviceptr>(pinned), n * 8));
       PCHECK(cuMemFreeHost(pinned));
     }},
    {"cuMemcpyAsync",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       PCHECK(cuMemcpyAsync(d, reinterpret_cast<CUdeviceptr>(linear(p, n)), n * 8, g_stream));
       PCHECK(cuStreamSynchronize(g_stream));
     }},
    {"cuMemcpy_ptds",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       auto fn = proc<CUresult (*)(CUdeviceptr, CUdeviceptr, size_t)>(
           "cuMemcpy", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
       PCHECK(fn(d, reinterpret_cast<CUdeviceptr>(linear(p, n)), n * 8));
     }},
    {"cuMemcpyAsync_ptsz",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       auto fn = proc<CUresult (*)(CUdeviceptr, CUdeviceptr, size_t, CUstream)>(
           "cuMemcpyAsync", 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM);
       PCHECK(fn(d, reinterpret_cast<CUdeviceptr>(linear(p, n)), n * 8, nullptr));
       PCHECK(cuCtxSynchronize());
     }},
    {"cuMemcpy2D from host memory",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       CUDA_MEMCPY2D c = rows_2d(d, spread(p, n), n * 8, false);
       PCHECK(cuMemcpy2D(&c));
     }},
    {"cuMemcpy2DUnaligned from host memory",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       CUDA_MEMCPY2D c = rows_2d(d, spread(p, n), n * 8, false);
       PCHECK(cuMemcpy2DUnaligned(&c));
     }},
    {"cuMemcpy2DAsync from a unified host address",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       CUDA_MEMCPY2D c = rows_2d(d, spread(p, n), n * 8, true);
       PCHECK(cuMemcpy2DAsync(&c, g_stream));
       PCHECK(cuStreamSynchronize(g_stream));
     }},
    {"cuMemcpy3D from host memory",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       CUDA_MEMCPY3D c = box_3d<CUDA_MEMCPY3D>(d, spread(p, n), n * 8);
       PCHECK(cuMemcpy3D(&c));
     }},
    {"cuMemcpy3DAsync from host memory",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       CUDA_MEMCPY3D c = box_3d<CUDA_MEMCPY3D>(d, spread(p, n), n * 8);
       PCHECK(cuMemcpy3DAsync(&c, g_stream));
       PCHECK(cuStreamSynchronize(g_stream));
     }},
    {"cuMemcpy3DPeer from host memory",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       CUDA_MEMCPY3D_PEER c = box_3d<CUDA_MEMCPY3D_PEER>(d, spread(p, n), n * 8);
       PCHECK(cuMemcpy3DPeer(&c));
     }},
    {"cuMemcpyBatchAsync from host memory",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       // One copy per pointer.
       CUdeviceptr dsts[2] = {d, d + 8};
       CUdeviceptr srcs[2] = {reinterpret_cast<CUdeviceptr>(linear(p, n)),
                              reinterpret_cast<CUdeviceptr>(g_host + 8)};
       size_t sizes[2] = {8, 8};
       CUmemcpyAttributes attr{};
       attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
       size_t attr_idx = 0;
       PCHECK(cuMemcpyBatchAsync(dsts, srcs, sizes, n, &attr, &attr_idx, 1, g_stream));
       PCHECK(cuStreamSynchronize(g_stream));
     }},
    {"cuMemcpyBatchAsync (12.8 ABI) from host memory",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       using BatchV1 = CUresult (*)(CUdeviceptr*, CUdeviceptr*, size_t*, size_t,
                                    CUmemcpyAttributes*, size_t*, size_t, size_t*, CUstream);
       auto fn = proc<BatchV1>("cuMemcpyBatchAsync", 12080, CU_GET_PROC_ADDRESS_DEFAULT);
       CUdeviceptr dst = d, src = reinterpret_cast<CUdeviceptr>(linear(p, n));
       size_t size = n * 8, attr_idx = 0, fail_idx = 0;
       CUmemcpyAttributes attr{};
       attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
       PCHECK(fn(&dst, &src, &size, 1, &attr, &attr_idx, 1, &fail_idx, g_stream));
       PCHECK(cuStreamSynchronize(g_stream));
     }},
    {"cuMemcpy3DBatchAsync from host memory",
     [](CUdeviceptr d, const CUdeviceptr* p, size_t n) {
       CUDA_MEMCPY3D_BATCH_OP op{};
       op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
       op.src.op.ptr.ptr = reinterpret_cast<CUdeviceptr>(spread(p, n));
       op.src.op.ptr.rowLength = 64;  // 8 bytes of each 64-byte row
       op.dst.op.ptr.ptr = d;
       op.extent = {8, n, 1};
       op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
       PCHECK(cuMemcpy3DBatchAsync(1, &op, 0, g_stream));
       PCHECK(cuStreamSynchronize(g_stream));
     }},
};

// only: run just the way with this index (-1: all).
int run_uploads(unsigned long long region_bytes, int only) {
  g_words = region_bytes / 4;
  PCHECK(cuStreamCreate(&g_stream, CU_STREAM_NON_BLOCKING));
  for (auto& p : g_others) {
    PCHECK(cuMemAlloc(&p, region_bytes));
    PCHECK(cuMemsetD32(p, 0u, g_words));
  }
  CUdeviceptr array;
  PCHECK(cuMemAlloc(&array, 64));  // small: the never-evicted arena
  for (const Way& way : kWays) {
    if (only >= 0 && &way != &kWays[only]) continue;
    CUdeviceptr named[2];
    for (auto& p : named) {
      PCHECK(cuMemAlloc(&p, region_bytes));
      PCHECK(cuMemsetD32(p, 40u, g_words));
    }
    PCHECK(cuMemsetD8(array, 0, 64));
    way.upload(array, named, 2);
    CUdeviceptr check[2] = {};
    PCHECK(cuMemcpyDtoH(check, array, sizeof check));
    if (check[0] != named[0] || check[1] != named[1]) {
      std::fprintf(stderr, "uploads: %s did not upload the array\n", way.name);
      return 1;
    }
    push_out();
    push_out();
    unsigned long long count = 2, n = g_words;
    void* params[] = {&array, &count, &n};
    PCHECK(cuLaunchKernel(g_add_indirect, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
    PCHECK(cuCtxSynchronize());
    for (auto& p : named) {
      unsigned got = 0;
      if (!all_equal(p, g_words, 41u, &got)) {
        std::fprintf(stderr, "uploads: %s: a named region holds %u, expected 41\n", way.name, got);
        return 1;
      }
      PCHECK(cuMemFree(p));
    }
    std::printf("uploads: %s\n", way.name);
  }
  for (auto& p : g_others) PEXPECT(all_equal(p, g_words, g_other_value, nullptr));
  std::printf("uploads: every way of uploading a pointer array kept the regions it names\n");
  return 0;
}

// A table naming four regions keeps all four on the device for good: with a 5 MiB budget, an
// allocation of two more is refused, and its line says how much is made to stay. Once the four
// are freed, it succeeds.
int run_table_oom(unsigned long long region_bytes) {
  CUdeviceptr array, named[4];
  PCHECK(cuMemAlloc(&array, 64));
  for (auto& p : named) {
    PCHECK(cuMemAlloc(&p, region_bytes));
    PCHECK(cuMemsetD32(p, 40u, g_words));
  }
  PCHECK(cuMemcpyHtoD(array, named, sizeof named));
  CUdeviceptr big = 0;
  PEXPECT(cuMemAlloc(&big, 2 * region_bytes) == CUDA_ERROR_OUT_OF_MEMORY);
  for (auto& p : named) PCHECK(cuMemFree(p));
  PCHECK(cuMemAlloc(&big, 2 * region_bytes));
  PCHECK(cuMemFree(big));
  std::printf("uploads: a table's regions stay, and the refusal says so\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: pointer_uploads MODULE.so [region-MiB [way-index|table_oom]]\n");
    return 2;
  }
  unsigned long long region_bytes = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1ull) << 20;
  preload_init();
  CUmodule mod;
  PCHECK(cuModuleLoad(&mod, argv[1]));
  PCHECK(cuModuleGetFunction(&g_add, mod, "add"));
  PCHECK(cuModuleGetFunction(&g_add_indirect, mod, "add_indirect"));
  if (argc > 3 && std::strcmp(argv[3], "table_oom") == 0)
    return run_uploads(region_bytes, -1) != 0 ? 1 : run_table_oom(region_bytes);
  return run_uploads(region_bytes, argc > 3 ? std::atoi(argv[3]) : -1);
}
