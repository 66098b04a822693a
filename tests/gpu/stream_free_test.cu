// stream_free_test: freed memory is not reused while a kernel that uses it still runs.
//
// Frees are stream-ordered (design brief, fact 7): cuMemFreeAsync only orders after the stream,
// so gswap must not hand the physical pages to the next allocation until every stream that used
// them has passed the free.
// This program starts a kernel that spins, then reads allocation A and checks its contents; while
// it spins, A is freed, allocations of the same size are made on another stream and overwritten.
// If any of them got A's pages too early, the spinning kernel reads garbage and the check fails.
// It runs three variants: cuMemFreeAsync on the kernel's stream, cuMemFree (which waits for the
// kernel, on the real driver as under gswap), and cuMemFreeAsync followed by a plain cuMemAlloc.
//
// Usage: stream_free_test [--size 256MiB] [--spin-ms 300] [--reallocs 4]
#include <vector>

#include "gpu_check.h"
#include "gpu_kernels.cuh"

using namespace gswap::gpu_test;

namespace {

enum class Variant { kFreeAsync, kFreeSync, kFreeAsyncThenAlloc };
const char* name(Variant v) {
  switch (v) {
    case Variant::kFreeAsync:
      return "cuMemFreeAsync + cuMemAllocAsync on another stream";
    case Variant::kFreeSync:
      return "cuMemFree + cuMemAlloc";
    case Variant::kFreeAsyncThenAlloc:
      return "cuMemFreeAsync + cuMemAlloc";
  }
  return "?";
}

void run(Variant v, std::uint64_t size, std::uint64_t spin_ns, int reallocs, CUstream s1,
         CUstream s2, unsigned long long* bad) {
  CUdeviceptr a = 0;
  if (v == Variant::kFreeSync)
    GT_CU(cuMemAlloc(&a, size));
  else
    GT_CU(cuMemAllocAsync(&a, size, s1));
  const std::uint32_t seed = 0xA11CE;
  fill_pattern<<<kGrid, kBlock, 0, s1>>>(reinterpret_cast<std::uint32_t*>(a), size / 4, seed);
  GT_CU(cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(bad), 0, sizeof *bad, s1));
  spin_then_verify<<<kGrid, kBlock, 0, s1>>>(reinterpret_cast<const std::uint32_t*>(a), size / 4,
                                             seed, spin_ns, bad);
  GT_RT(cudaGetLastError());

  // Free while the kernel spins, then allocate the same size elsewhere and overwrite it.
  double t0 = now_us();
  if (v == Variant::kFreeSync)
    GT_CU(cuMemFree(a));
  else
    GT_CU(cuMemFreeAsync(a, s1));
  double free_us = now_us() - t0;
  std::vector<CUdeviceptr> others(reallocs);
  bool reused_address = false;
  for (CUdeviceptr& o : others) {
    if (v == Variant::kFreeAsync)
      GT_CU(cuMemAllocAsync(&o, size, s2));
    else
      GT_CU(cuMemAlloc(&o, size));
    reused_address |= o == a;
    GT_CU(cuMemsetD32Async(o, 0xDEADBEEF, size / 4, s2));
  }
  // Still running? Then the frees above really happened while the memory was in use.
  bool kernel_running = cuStreamQuery(s1) == CUDA_ERROR_NOT_READY;
  GT_CU(cuStreamSynchronize(s2));
  GT_CU(cuStreamSynchronize(s1));
  unsigned long long mismatches = 0;
  GT_CU(cuMemcpyDtoH(&mismatches, reinterpret_cast<CUdeviceptr>(bad), sizeof mismatches));

  std::printf(
      "      %s: free took %.0f us, kernel still running after the reallocations: %s, "
      "an allocation reused A's address: %s\n",
      name(v), free_us, kernel_running ? "yes" : "no", reused_address ? "yes" : "no");
  GT_CHECK(mismatches == 0, name(v),
           fmt("%llu of %llu words the kernel read were overwritten", mismatches, size / 4));
  // cuMemFree waits for the kernel, on the bare driver as under gswap (which waits for the
  // program's streams, not for its own copies); after a stream-ordered free the kernel must still
  // be running, or that variant did not test what it claims to.
  if (v != Variant::kFreeSync)
    GT_CHECK(kernel_running, "the kernel was still running during the free and reallocations",
             "raise --spin-ms if this fails");
  else if (under_gswap())
    GT_CHECK(!kernel_running, "cuMemFree waited for the kernel, as the driver's does",
             "the kernel was still running after cuMemFree");
  for (CUdeviceptr o : others) GT_CU(cuMemFree(o));
}

}  // namespace

int main(int argc, char** argv) {
  Args args(argc, argv);
  maybe_print_physical_total(args);
  init_primary_context();
  CUstream s1, s2;
  GT_CU(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
  GT_CU(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
  unsigned long long* bad = nullptr;
  GT_RT(cudaMalloc(&bad, sizeof *bad));
  const std::uint64_t size = args.u64("--size", 256ull << 20);
  const std::uint64_t spin_ns = args.u64("--spin-ms", 300) * 1000000ull;
  const int reallocs = static_cast<int>(args.u64("--reallocs", 4));
  std::printf("stream_free_test: under gswap: %s, %s per allocation\n",
              under_gswap() ? "yes" : "no", mib(size).c_str());
  for (Variant v : {Variant::kFreeAsync, Variant::kFreeSync, Variant::kFreeAsyncThenAlloc})
    run(v, size, spin_ns, reallocs, s1, s2, bad);
  GT_RT(cudaFree(bad));
  return finish("stream_free_test");
}
