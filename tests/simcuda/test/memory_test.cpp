// memory_test.cpp: capacity accounting, linear/pinned/managed memory, VMM semantics and faults,
// pointer attributes, and the error codes of bad memory use.
#include <sys/mman.h>

#include <cstring>
#include <vector>

#include "sc_test.h"

namespace {

CUmemAllocationProp dev_prop(int dev) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = dev;
  return p;
}

size_t free_bytes() {
  size_t f = 0, t = 0;
  EXPECT_EQ(cuMemGetInfo(&f, &t), CUDA_SUCCESS);
  return f;
}

}  // namespace

TEST_F(Sim, MemInfoTracksLinearAndVmmTogether) {
  size_t f0 = 0, total = 0;
  CK(cuMemGetInfo(&f0, &total));
  EXPECT_EQ(total, 1ull << 30);
  CUdeviceptr a;
  CK(cuMemAlloc(&a, 64 << 20));
  EXPECT_EQ(free_bytes(), f0 - (64 << 20));
  CUmemAllocationProp prop = dev_prop(dev);
  size_t gran = 0;
  CK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  EXPECT_EQ(gran, 2u << 20);
  CUmemGenericAllocationHandle h;
  CK(cuMemCreate(&h, 16 * gran, &prop, 0));
  EXPECT_EQ(free_bytes(), f0 - (64 << 20) - 16 * gran);
  CK(cuMemFree(a));
  EXPECT_EQ(free_bytes(), f0 - 16 * gran);
  CK(cuMemRelease(h));
  EXPECT_EQ(free_bytes(), f0);
}

TEST_F(Sim, OutOfCapacity) {
  size_t f0 = free_bytes();
  CUdeviceptr big;
  EXPECT_EQ(cuMemAlloc(&big, f0 + 4096), CUDA_ERROR_OUT_OF_MEMORY);
  CUdeviceptr half;
  CK(cuMemAlloc(&half, f0 / 2 + (1 << 20)));
  CUmemAllocationProp prop = dev_prop(dev);
  CUmemGenericAllocationHandle h;
  // VMM and linear share one capacity: the rest no longer fits as a physical allocation.
  EXPECT_EQ(cuMemCreate(&h, (f0 / 2 / (2 << 20) + 1) * (2 << 20), &prop, 0),
            CUDA_ERROR_OUT_OF_MEMORY);
  CK(cuMemFree(half));
  EXPECT_EQ(free_bytes(), f0);
  // Pinned host memory does not count against the device.
  void* host;
  CK(cuMemAllocHost(&host, 8 << 20));
  EXPECT_EQ(free_bytes(), f0);
  CK(cuMemFreeHost(host));
}

TEST_F(Sim, DoubleFreeAndBadFrees) {
  CUdeviceptr a;
  CK(cuMemAlloc(&a, 4096));
  CK(cuMemFree(a));
  EXPECT_EQ(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
  CK(cuMemAlloc(&a, 4096));
  EXPECT_EQ(cuMemFree(a + 8), CUDA_ERROR_INVALID_VALUE);  // interior pointer
  CUstream s;
  CK(cuStreamCreate(&s, 0));
  CK(cuMemFreeAsync(a, s));
  EXPECT_EQ(cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemFree(a), CUDA_ERROR_INVALID_VALUE);
  CK(cuStreamSynchronize(s));
  CK(cuStreamDestroy(s));
}

TEST_F(Sim, CopiesAndMemsetsAllDirections) {
  const size_t n = 1 << 16;
  std::vector<uint8_t> src(n), dst(n, 0);
  for (size_t i = 0; i < n; ++i) src[i] = static_cast<uint8_t>(i * 7);
  CUdeviceptr a, b;
  CK(cuMemAlloc(&a, n));
  CK(cuMemAlloc(&b, n));
  CK(cuMemcpyHtoD(a, src.data(), n));
  CK(cuMemcpyDtoD(b, a, n));
  CK(cuMemcpyDtoH(dst.data(), b, n));
  EXPECT_EQ(src, dst);
  CUstream s;
  CK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  void* pinned;
  CK(cuMemAllocHost(&pinned, n));
  CK(cuMemsetD32Async(a, 0xdeadbeef, n / 4, s));
  CK(cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(pinned), a, n, s));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(static_cast<uint32_t*>(pinned)[n / 4 - 1], 0xdeadbeefu);
  CK(cuMemsetD8(b, 0x5a, n));
  CK(cuMemcpyDtoH(dst.data(), b, n));
  EXPECT_EQ(dst[n - 1], 0x5a);
  // 2D: copy a 16x4 sub-block with pitches.
  CK(cuMemsetD8(b, 0, n));
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = src.data();
  c.srcPitch = 64;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = b;
  c.dstPitch = 128;
  c.WidthInBytes = 16;
  c.Height = 4;
  CK(cuMemcpy2D(&c));
  CK(cuMemcpyDtoH(dst.data(), b, n));
  EXPECT_EQ(std::memcmp(dst.data() + 3 * 128, src.data() + 3 * 64, 16), 0);
  EXPECT_EQ(dst[3 * 128 + 16], 0);
  CK(cuMemsetD2D32(b, 128, 7u, 4, 3));
  CK(cuMemcpyDtoH(dst.data(), b, n));
  uint32_t w;
  std::memcpy(&w, dst.data() + 2 * 128 + 12, 4);
  EXPECT_EQ(w, 7u);
  EXPECT_EQ(dst[2 * 128 + 16], 0);
  CK(cuStreamDestroy(s));
  CK(cuMemFreeHost(pinned));
  CK(cuMemFree(a));
  CK(cuMemFree(b));
}

TEST_F(Sim, CopyValidationErrors) {
  CUdeviceptr a;
  CK(cuMemAlloc(&a, 4096));
  std::vector<uint8_t> host(8192);
  EXPECT_EQ(cuMemcpyHtoD(a, host.data(), 4097), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyHtoD(a + 4000, host.data(), 200), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD32(a + 4092, 0, 2), CUDA_ERROR_INVALID_VALUE);
  // Sizes whose bytes wrap past the address space: refused, not taken for the few bytes they
  // wrap to (which fit, and ran over the whole address space).
  EXPECT_EQ(cuMemsetD32(a, 1, (size_t{1} << 62) + 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD16(a, 1, (size_t{1} << 63) + 2), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD2D32(a, 4096, 1, (size_t{1} << 62) + 1, 1), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemsetD2D8(a, size_t{1} << 63, 1, 1, 3), CUDA_ERROR_INVALID_VALUE);
  CUDA_MEMCPY2D wrap{};
  wrap.srcMemoryType = CU_MEMORYTYPE_HOST;
  wrap.srcHost = host.data();
  wrap.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  wrap.dstDevice = a;
  wrap.WidthInBytes = 16;
  wrap.dstPitch = size_t{1} << 63;
  wrap.srcPitch = 16;
  wrap.Height = 3;  // (3 - 1) rows of 2^63 bytes wrap to 0
  EXPECT_EQ(cuMemcpy2D(&wrap), CUDA_ERROR_INVALID_VALUE);
  CK(cuCtxSynchronize());
  EXPECT_EQ(cuMemcpyDtoH(host.data(), 0x1000, 16), CUDA_ERROR_INVALID_VALUE);
  CK(cuMemFree(a));
  EXPECT_EQ(cuMemcpyDtoH(host.data(), a, 16), CUDA_ERROR_INVALID_VALUE);  // freed

  // An unmapped VMM address must be refused, not crash.
  CUmemAllocationProp prop = dev_prop(dev);
  size_t gran = 2 << 20;
  CUdeviceptr va;
  CK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
  EXPECT_EQ(cuMemcpyHtoD(va, host.data(), 16), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpy(reinterpret_cast<CUdeviceptr>(host.data()), va, 16), CUDA_ERROR_INVALID_VALUE);
  CUmemGenericAllocationHandle h;
  CK(cuMemCreate(&h, gran, &prop, 0));
  CK(cuMemMap(va, gran, 0, h, 0));
  // Mapped but no access yet: still not usable by a copy.
  EXPECT_EQ(cuMemcpyHtoD(va, host.data(), 16), CUDA_ERROR_INVALID_VALUE);
  CUmemAccessDesc acc{};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(va, gran, &acc, 1));
  CK(cuMemcpyHtoD(va, host.data(), 16));
  // Running past the mapping into the unmapped second granule fails.
  EXPECT_EQ(cuMemcpyHtoD(va + gran - 8, host.data(), 16), CUDA_ERROR_INVALID_VALUE);
  CK(cuMemUnmap(va, gran));
  EXPECT_EQ(cuMemcpyHtoD(va, host.data(), 16), CUDA_ERROR_INVALID_VALUE);
  CK(cuMemRelease(h));
  CK(cuMemAddressFree(va, 2 * gran));
}

TEST_F(Sim, VmmArgumentValidationAndLifetime) {
  CUmemAllocationProp prop = dev_prop(dev);
  size_t gran = 2 << 20;
  CUmemGenericAllocationHandle h;
  EXPECT_EQ(cuMemCreate(&h, gran + 4096, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  CUdeviceptr va;
  EXPECT_EQ(cuMemAddressReserve(&va, gran + 1, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
  CK(cuMemAddressReserve(&va, 4 * gran, 8 * gran, 0, 0));
  EXPECT_EQ(va % (8 * gran), 0u);  // alignment honoured
  size_t f0 = free_bytes();
  CK(cuMemCreate(&h, 2 * gran, &prop, 0));
  EXPECT_EQ(free_bytes(), f0 - 2 * gran);
  CK(cuMemMap(va, 2 * gran, 0, h, 0));
  EXPECT_EQ(cuMemMap(va + gran, gran, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // over a mapping
  EXPECT_EQ(cuMemMap(va + 2 * gran, 2 * gran, gran, h, 0), CUDA_ERROR_INVALID_VALUE);  // past end
  EXPECT_EQ(cuMemUnmap(va + 2 * gran, gran), CUDA_ERROR_INVALID_VALUE);  // nothing mapped there
  CUmemAccessDesc acc{};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CK(cuMemSetAccess(va, 2 * gran, &acc, 1));
  reinterpret_cast<uint8_t*>(va)[gran + 5] = 42;
  CUdeviceptr base;
  size_t size;
  CK(cuMemGetAddressRange(&base, &size, va + gran + 5));
  EXPECT_EQ(base, va);
  EXPECT_EQ(size, 2 * gran);
  CUmemGenericAllocationHandle h2;
  CK(cuMemRetainAllocationHandle(&h2, reinterpret_cast<void*>(va + 100)));
  EXPECT_EQ(h2, h);
  CK(cuMemRelease(h2));
  CUmemAllocationProp got{};
  CK(cuMemGetAllocationPropertiesFromHandle(&got, h));
  EXPECT_EQ(got.location.id, dev);
  // Released while mapped: the memory stays until the unmap, and keeps its contents.
  CK(cuMemRelease(h));
  EXPECT_EQ(free_bytes(), f0 - 2 * gran);
  EXPECT_EQ(reinterpret_cast<uint8_t*>(va)[gran + 5], 42);
  CK(cuMemUnmap(va, 2 * gran));
  EXPECT_EQ(free_bytes(), f0);
  EXPECT_EQ(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
  CK(cuMemAddressFree(va, 4 * gran));
}

TEST_F(Sim, VmmRemapKeepsAddressAndData) {
  CUmemAllocationProp prop = dev_prop(dev);
  size_t gran = 2 << 20;
  CUdeviceptr va;
  CK(cuMemAddressReserve(&va, gran, 0, 0, 0));
  CUmemAccessDesc acc{};
  acc.location = prop.location;
  acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  CUmemGenericAllocationHandle h;
  CK(cuMemCreate(&h, gran, &prop, 0));
  CK(cuMemMap(va, gran, 0, h, 0));
  CK(cuMemSetAccess(va, gran, &acc, 1));
  CK(cuMemsetD32(va, 0x01020304, gran / 4));
  std::vector<uint8_t> saved(gran);
  CK(cuMemcpyDtoH(saved.data(), va, gran));  // evict
  CK(cuMemUnmap(va, gran));
  CK(cuMemRelease(h));
  CK(cuMemCreate(&h, gran, &prop, 0));  // restore at the same address
  CK(cuMemMap(va, gran, 0, h, 0));
  CK(cuMemSetAccess(va, gran, &acc, 1));
  CK(cuMemcpyHtoD(va, saved.data(), gran));
  EXPECT_EQ(reinterpret_cast<uint32_t*>(va)[1000], 0x01020304u);
  CK(cuMemUnmap(va, gran));
  CK(cuMemRelease(h));
  CK(cuMemAddressFree(va, gran));
}

TEST_F(Sim, TouchingUnmappedVmmRangeDies) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        CUmemAllocationProp prop = dev_prop(0);
        size_t gran = 2 << 20;
        CUdeviceptr va;
        CUmemGenericAllocationHandle h;
        CUmemAccessDesc acc{};
        acc.location = prop.location;
        acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        if (cuMemAddressReserve(&va, gran, 0, 0, 0) || cuMemCreate(&h, gran, &prop, 0) ||
            cuMemMap(va, gran, 0, h, 0) || cuMemSetAccess(va, gran, &acc, 1))
          std::exit(0);  // setup failure exits cleanly, which the death assertion reports
        reinterpret_cast<volatile uint8_t*>(va)[123] = 9;  // mapped: fine
        if (cuMemUnmap(va, gran)) std::exit(0);
        reinterpret_cast<volatile uint8_t*>(va)[123] = 9;  // unmapped: faults like a GPU would
        std::exit(0);
      },
      "");
}

TEST_F(Sim, PointerAttributesAndManaged) {
  CUdeviceptr a, m;
  CK(cuMemAlloc(&a, 1000));
  CK(cuMemAllocManaged(&m, 1000, CU_MEM_ATTACH_GLOBAL));
  unsigned type = 0;
  CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a + 10));
  EXPECT_EQ(type, CU_MEMORYTYPE_DEVICE);
  CUdeviceptr start = 0;
  CK(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, a + 10));
  EXPECT_EQ(start, a);
  size_t size = 0;
  CK(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, a + 10));
  EXPECT_EQ(size, 1000u);
  int managed = -1, ordinal = -1;
  CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, a));
  EXPECT_EQ(managed, 0);
  CK(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m));
  EXPECT_EQ(managed, 1);
  CK(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, m));
  EXPECT_EQ(ordinal, dev);
  reinterpret_cast<uint8_t*>(m)[999] = 1;  // managed memory is host-accessible
  void* host;
  CK(cuMemHostAlloc(&host, 100, CU_MEMHOSTALLOC_DEVICEMAP));
  CK(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                           reinterpret_cast<CUdeviceptr>(host)));
  EXPECT_EQ(type, CU_MEMORYTYPE_HOST);
  CUdeviceptr dp;
  CK(cuMemHostGetDevicePointer(&dp, host, 0));
  EXPECT_EQ(dp, reinterpret_cast<CUdeviceptr>(host));
  std::vector<uint8_t> reg(8192);
  CK(cuMemHostRegister(reg.data(), reg.size(), 0));
  EXPECT_EQ(cuMemHostRegister(reg.data(), reg.size(), 0),
            CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
  CK(cuMemHostUnregister(reg.data()));
  EXPECT_EQ(cuMemHostUnregister(reg.data()), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED);
  CUipcMemHandle ipc;
  CK(cuIpcGetMemHandle(&ipc, a));
  CK(cuMemFreeHost(host));
  CK(cuMemFree(a));
  CK(cuMemFree(m));
  EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, a),
            CUDA_ERROR_INVALID_VALUE);
}

TEST_F(Sim, AsyncAllocAndPools) {
  CUstream s;
  CK(cuStreamCreate(&s, 0));
  size_t f0 = free_bytes();
  CUdeviceptr a;
  CK(cuMemAllocAsync(&a, 1 << 20, s));
  EXPECT_EQ(free_bytes(), f0 - (1 << 20));
  CUmemoryPool pool, pool2;
  CK(cuDeviceGetDefaultMemPool(&pool, dev));
  CK(cuDeviceGetMemPool(&pool2, dev));
  EXPECT_EQ(pool, pool2);
  CUdeviceptr b;
  CK(cuMemAllocFromPoolAsync(&b, 4096, pool, s));
  CK(cuMemsetD8Async(b, 1, 4096, s));
  CK(cuMemFreeAsync(b, s));
  CK(cuMemFreeAsync(a, s));
  CK(cuStreamSynchronize(s));
  EXPECT_EQ(free_bytes(), f0);
  CK(cuStreamDestroy(s));
}

TEST_F(Sim, Copy3DPeerAndArraysAbsent) {
  CUdeviceptr a, b;
  CK(cuMemAlloc(&a, 4096));
  CK(cuMemAlloc(&b, 4096));
  CK(cuMemsetD8(a, 9, 4096));
  CK(cuMemsetD8(b, 0, 4096));
  CUDA_MEMCPY3D_PEER p{};
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = a;
  p.srcContext = ctx;
  p.srcPitch = 64;
  p.srcHeight = 4;
  p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p.dstDevice = b;
  p.dstContext = ctx;
  p.dstPitch = 128;
  p.dstHeight = 4;
  p.WidthInBytes = 16;
  p.Height = 2;
  p.Depth = 2;
  CK(cuMemcpy3DPeer(&p));
  uint8_t got[1024];
  CK(cuMemcpyDtoH(got, b, sizeof got));
  EXPECT_EQ(got[4 * 128 + 128 + 15], 9);  // z=1, y=1, last byte of the row
  EXPECT_EQ(got[16], 0);
  p.Depth = 40;  // runs past the source allocation
  EXPECT_EQ(cuMemcpy3DPeer(&p), CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(cuMemcpyAtoD(a, reinterpret_cast<CUarray>(0x10), 0, 16), CUDA_ERROR_INVALID_HANDLE);
  CK(cuMemFree(a));
  CK(cuMemFree(b));
}
