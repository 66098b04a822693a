// pointer_attributes.cpp: cuPointerGetAttribute(s) on regions swapped out and resident.
//
//   pointer_attributes MODULE.so REGION-MiB   (MODULE: pointer_kernels.so; budget from
//   GSWAP_BUDGET)
//
// Three regions over a budget of two. Every attribute the driver defines for device memory is
// answered for each, swapped out or not, as for an ordinary device allocation, the same in both
// states; cuPointerGetAttributes writes every attribute it is asked for. Without libgswap's
// answers the driver fails for a swapped-out region (its memory is unmapped).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "preload_common.h"

namespace {

// Every attribute cuPointerGetAttribute defines, with the value a device allocation has.
struct Answers {
  CUcontext ctx;
  unsigned type;
  CUdeviceptr dev_ptr, start, map_base;
  size_t size, map_size;
  unsigned long long buffer_id, block_id, handle_types;
  int managed, ordinal, mapped, ipc, rdma, sync_memops, decompress;
  unsigned access;
  CUmemoryPool pool;
};

Answers ask_each(CUdeviceptr p) {
  Answers a;
  std::memset(&a, 0xab, sizeof a);  // every field must be written
  PCHECK(cuPointerGetAttribute(&a.ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p));
  PCHECK(cuPointerGetAttribute(&a.type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p));
  PCHECK(cuPointerGetAttribute(&a.dev_ptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p));
  PCHECK(cuPointerGetAttribute(&a.start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p));
  PCHECK(cuPointerGetAttribute(&a.size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p));
  PCHECK(cuPointerGetAttribute(&a.map_base, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR, p));
  PCHECK(cuPointerGetAttribute(&a.map_size, CU_POINTER_ATTRIBUTE_MAPPING_SIZE, p));
  PCHECK(cuPointerGetAttribute(&a.buffer_id, CU_POINTER_ATTRIBUTE_BUFFER_ID, p));
  PCHECK(cuPointerGetAttribute(&a.block_id, CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID, p));
  PCHECK(cuPointerGetAttribute(&a.handle_types, CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES, p));
  PCHECK(cuPointerGetAttribute(&a.managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
  PCHECK(cuPointerGetAttribute(&a.ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  PCHECK(cuPointerGetAttribute(&a.mapped, CU_POINTER_ATTRIBUTE_MAPPED, p));
  PCHECK(cuPointerGetAttribute(&a.ipc, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE, p));
  PCHECK(cuPointerGetAttribute(&a.rdma, CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE, p));
  PCHECK(cuPointerGetAttribute(&a.sync_memops, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, p));
  PCHECK(cuPointerGetAttribute(&a.decompress, CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE, p));
  PCHECK(cuPointerGetAttribute(&a.access, CU_POINTER_ATTRIBUTE_ACCESS_FLAGS, p));
  PCHECK(cuPointerGetAttribute(&a.pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
  // Device memory has no host address.
  void* host = nullptr;
  PEXPECT(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, p) ==
          CUDA_ERROR_INVALID_VALUE);
  return a;
}

// The same through cuPointerGetAttributes: every attribute of its list written, a NULL host
// pointer included.
Answers ask_all(CUdeviceptr p) {
  Answers a;
  std::memset(&a, 0xab, sizeof a);
  void* host = &a;  // must become NULL
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_CONTEXT,
                                 CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                 CU_POINTER_ATTRIBUTE_HOST_POINTER,
                                 CU_POINTER_ATTRIBUTE_SYNC_MEMOPS,
                                 CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                 CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE,
                                 CU_POINTER_ATTRIBUTE_MAPPED,
                                 CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                 CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES,
                                 CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE,
                                 CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE};
  void* data[] = {&a.ctx,       &a.type,    &a.dev_ptr,      &host,    &a.sync_memops,
                  &a.buffer_id, &a.managed, &a.ordinal,      &a.start, &a.size,
                  &a.mapped,    &a.ipc,     &a.handle_types, &a.pool,  &a.decompress};
  PCHECK(cuPointerGetAttributes(sizeof attrs / sizeof attrs[0], attrs, data, p));
  PEXPECT(host == nullptr);
  return a;
}

// What the attributes of p, inside the allocation [base, base + bytes), must be.
void check(const Answers& a, CUcontext ctx, CUdeviceptr p, CUdeviceptr base, size_t bytes,
           bool all_fields) {
  PEXPECT(a.ctx == ctx);
  PEXPECT(a.type == CU_MEMORYTYPE_DEVICE);
  PEXPECT(a.dev_ptr == p);
  PEXPECT(a.start == base && a.size == bytes);
  PEXPECT(a.managed == 0 && a.mapped == 1 && a.ordinal == 0);
  PEXPECT(a.buffer_id != 0);
  PEXPECT(a.ipc == 0 && a.handle_types == 0 && a.sync_memops == 0 && a.decompress == 0);
  PEXPECT(a.pool == nullptr);
  if (!all_fields) return;  // the rest is not in cuPointerGetAttributes' list
  PEXPECT(a.map_base == base && a.map_size >= bytes);
  PEXPECT(a.block_id != 0);
  PEXPECT(a.rdma == 0);
  PEXPECT(a.access == CU_POINTER_ATTRIBUTE_ACCESS_FLAG_READWRITE);
}

int run_attrs(unsigned long long region_bytes) {
  CUcontext ctx;
  PCHECK(cuCtxGetCurrent(&ctx));
  unsigned long long n = region_bytes / 4;
  CUdeviceptr b[3];
  for (auto& p : b) {
    PCHECK(cuMemAlloc(&p, region_bytes));
    PCHECK(cuMemsetD32(p, 3u, n));
  }
  // b[0] was swapped out to make room for b[2]; let its unmapping finish.
  PCHECK(cuCtxSynchronize());
  usleep(100 * 1000);
  std::vector<unsigned long long> ids;
  for (int k = 0; k < 3; ++k) {
    Answers out = ask_each(b[k] + 100);
    check(out, ctx, b[k] + 100, b[k], region_bytes, true);
    check(ask_all(b[k] + 100), ctx, b[k] + 100, b[k], region_bytes, false);
    ids.push_back(out.buffer_id);
  }
  // Swap each one in (and the others out) in turn: the answers do not change.
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 3; ++k) {
      unsigned first = 0;
      PCHECK(cuMemcpyDtoH(&first, b[k], 4));
      PEXPECT(first == 3u);
      for (int j = 0; j < 3; ++j) {
        Answers a = ask_each(b[j]);
        check(a, ctx, b[j], b[j], region_bytes, true);
        PEXPECT(a.buffer_id == ids[j] && ask_all(b[j]).buffer_id == ids[j]);
      }
    }
  }
  // Buffer ids are unique, also against the driver's own allocations, and never reused.
  CUdeviceptr small;
  PCHECK(cuMemAlloc(&small, 256));
  unsigned long long small_id = 0;
  PCHECK(cuPointerGetAttribute(&small_id, CU_POINTER_ATTRIBUTE_BUFFER_ID, small));
  ids.push_back(small_id);
  PCHECK(cuMemFree(b[1]));
  PCHECK(cuMemAlloc(&b[1], region_bytes));
  unsigned long long again = 0;
  PCHECK(cuPointerGetAttribute(&again, CU_POINTER_ATTRIBUTE_BUFFER_ID, b[1]));
  ids.push_back(again);
  PEXPECT(std::set<unsigned long long>(ids.begin(), ids.end()).size() == ids.size());
  std::printf("attrs: every pointer attribute answered for swapped-out and resident regions\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  unsigned long long region_bytes = (argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 6ull) << 20;
  preload_init();
  return run_attrs(region_bytes);
}
