// recompute_chain.cpp: a training loop whose activations form a chain of recomputations, for the
// e2e scenario recompute_chain.sh.
//
//   recompute_chain MODULE.so LAYERS KiB ITERATIONS     (MODULE: recompute_chain_kernels.so)
//
// Each iteration: act[0] is the input batch, act[i] = layer i of act[i - 1], then the backward
// pass reads act[L] .. act[1] into one gradient buffer g, reduced to an 8-byte loss (a small
// allocation) that is read back. Every act[i], i >= 1, is registered with gswap as recomputable
// from act[i - 1] (so a plan that drops several recomputes a chain at the backward's first
// launch). Prints the registrations, the callback's calls and a checksum of the losses, the same
// with or without gswap.
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "include/gswap.h"
#include "preload_common.h"

namespace {

CUfunction g_input, g_layer, g_accumulate, g_reduce;
std::vector<CUdeviceptr> g_act;
unsigned long long g_n = 0;  // uint32 elements per activation
long g_calls = 0;

CUresult launch_layer(CUdeviceptr x, CUdeviceptr y, unsigned k, CUstream s) {
  void* params[] = {&x, &y, &g_n, &k};
  return cuLaunchKernel(g_layer, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

// Layer i's output into dst from act[i - 1], on stream s.
CUresult layer(int i, CUdeviceptr dst, CUstream s) {
  return launch_layer(g_act[i - 1], dst, static_cast<unsigned>(i), s);
}

CUresult accumulate(CUdeviceptr g, CUdeviceptr a, CUstream s) {
  void* params[] = {&g, &a, &g_n};
  return cuLaunchKernel(g_accumulate, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

int recompute_layer(void* ctx, unsigned long long dst, unsigned long long, void* stream) {
  ++g_calls;
  const int i = static_cast<int>(reinterpret_cast<std::intptr_t>(ctx));
  return layer(i, dst, static_cast<CUstream>(stream)) == CUDA_SUCCESS ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: recompute_chain MODULE.so LAYERS KiB ITERATIONS\n");
    return 2;
  }
  const int layers = std::atoi(argv[2]);
  const unsigned long long bytes = std::strtoull(argv[3], nullptr, 10) << 10;
  const int iterations = std::atoi(argv[4]);
  g_n = bytes / 4;
  preload_init();
  CUmodule mod;
  PCHECK(cuModuleLoad(&mod, argv[1]));
  PCHECK(cuModuleGetFunction(&g_input, mod, "input"));
  PCHECK(cuModuleGetFunction(&g_layer, mod, "layer"));
  PCHECK(cuModuleGetFunction(&g_accumulate, mod, "accumulate"));
  PCHECK(cuModuleGetFunction(&g_reduce, mod, "reduce"));
  auto reg = reinterpret_cast<decltype(&gswap_register_recompute)>(
      dlsym(RTLD_DEFAULT, "gswap_register_recompute"));
  auto mark = reinterpret_cast<decltype(&gswap_mark_iteration)>(
      dlsym(RTLD_DEFAULT, "gswap_mark_iteration"));
  CUstream s;
  PCHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  g_act.resize(layers + 1);
  for (CUdeviceptr& a : g_act) PCHECK(cuMemAlloc(&a, bytes));
  CUdeviceptr g, loss;
  PCHECK(cuMemAlloc(&g, bytes));
  PCHECK(cuMemAlloc(&loss, 8));
  PCHECK(cuMemsetD8(loss, 0, 8));
  int registered = 0;
  for (int i = 1; reg && i <= layers; ++i) {
    const unsigned long long src = g_act[i - 1];
    if (reg(g_act[i], bytes, &src, 1, 10, recompute_layer,
            reinterpret_cast<void*>(static_cast<std::intptr_t>(i))) == GSWAP_OK)
      ++registered;
  }
  std::uint64_t checksum = 1469598103934665603ull;
  for (int it = 0; it < iterations; ++it) {
    if (mark) mark();
    {
      unsigned seed = static_cast<unsigned>(it);
      void* params[] = {&g_act[0], &g_n, &seed};
      PCHECK(cuLaunchKernel(g_input, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
    }
    for (int i = 1; i <= layers; ++i) PCHECK(layer(i, g_act[i], s));
    PCHECK(cuMemsetD32Async(g, 0, g_n, s));
    for (int i = layers; i >= 1; --i) PCHECK(accumulate(g, g_act[i], s));
    void* params[] = {&g, &loss, &g_n};
    PCHECK(cuLaunchKernel(g_reduce, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
    std::uint64_t h = 0;
    PCHECK(cuMemcpyDtoHAsync(&h, loss, 8, s));
    PCHECK(cuStreamSynchronize(s));
    checksum = (checksum ^ h) * 1099511628211ull;
  }
  std::printf("registered: %d\ncalls: %ld\nchecksum: %016llx\n", registered, g_calls,
              static_cast<unsigned long long>(checksum));
  return 0;
}
