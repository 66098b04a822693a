// runtime_check: the CUDA runtime, cuBLAS and cuDNN work under a budget below their footprint.
//
// A framework reaches the driver through libcudart and through the static runtimes inside cuBLAS
// and cuDNN, never through the exported symbols (design brief, fact 1). If any of their launches
// went unseen, gswap could evict memory a kernel is about to read, and the GPU would fault or read
// garbage. This program uses all three the ordinary way (cudaMalloc, <<<>>> launches, cublasSgemm,
// cudnnConvolutionForward), keeps more memory live than the budget it is given, runs its work
// twice so evicted inputs must come back, and checks the results:
//   - vector buffers against their generating formula (every word);
//   - GEMM outputs and convolution outputs at sampled points against a CPU reference. Inputs are
//     small integers, so every product and sum is exact in fp32 and the comparison is exact;
//   - a checksum of every output byte is printed, so validate.sh can compare a run under gswap
//     with one without it bitwise.
//
// Usage: runtime_check [--buffers 8] [--buffer-size 128MiB] [--gemms 4] [--gemm-n 4096]
//                      [--convs 4] [--iters 2] [--expect-swap]
//   --expect-swap  also check that the budget (the total the library reports) is below the
//                  footprint, i.e. that the run could not have passed without swapping.
#include <cublas_v2.h>
#include <cudnn.h>

#include <vector>

#include "gpu_check.h"
#include "gpu_kernels.cuh"

using namespace gswap::gpu_test;

#define GT_BLAS(expr)                                                                              \
  do {                                                                                             \
    cublasStatus_t st_ = (expr);                                                                   \
    if (st_ != CUBLAS_STATUS_SUCCESS) {                                                            \
      std::fprintf(stderr, "FATAL %s:%d: %s -> cublas %d\n", __FILE__, __LINE__, #expr, (int)st_); \
      std::exit(2);                                                                                \
    }                                                                                              \
  } while (0)
#define GT_DNN(expr)                                                             \
  do {                                                                           \
    cudnnStatus_t st_ = (expr);                                                  \
    if (st_ != CUDNN_STATUS_SUCCESS) {                                           \
      std::fprintf(stderr, "FATAL %s:%d: %s -> %s\n", __FILE__, __LINE__, #expr, \
                   cudnnGetErrorString(st_));                                    \
      std::exit(2);                                                              \
    }                                                                            \
  } while (0)

namespace {

// Small integers from the shared pattern: exact in fp32 through every product and sum here.
__host__ __device__ inline float small_int(std::uint64_t i, std::uint32_t seed, int range) {
  return static_cast<float>(static_cast<int>(pattern(i, seed) % (2 * range + 1)) - range);
}

__global__ void fill_small(float* p, std::uint64_t n, std::uint32_t seed, int range) {
  for (std::uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::uint64_t>(gridDim.x) * blockDim.x)
    p[i] = small_int(i, seed, range);
}

std::uint64_t g_footprint = 0;

template <class T>
T* device_alloc(std::uint64_t bytes) {
  void* p = nullptr;
  GT_RT(cudaMalloc(&p, bytes));
  g_footprint += bytes;
  return static_cast<T*>(p);
}

// FNV-1a over the bytes, folded into a running checksum across all outputs.
std::uint64_t fnv(const void* data, size_t n, std::uint64_t h) {
  const auto* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001B3ull;
  return h;
}

struct Conv {
  int n = 8, c = 64, h = 128, w = 128, k = 64;  // 3x3, pad 1, stride 1: output shape = input shape
  std::uint64_t elems() const { return std::uint64_t(n) * c * h * w; }
};

// CPU reference of one output element of a 3x3, pad-1 cross-correlation with pattern inputs.
float conv_ref(const Conv& cv, std::uint32_t xseed, std::uint32_t wseed, int ni, int ki, int y,
               int x) {
  double acc = 0;
  for (int ci = 0; ci < cv.c; ++ci)
    for (int r = 0; r < 3; ++r)
      for (int s = 0; s < 3; ++s) {
        int yy = y + r - 1, xx = x + s - 1;
        if (yy < 0 || yy >= cv.h || xx < 0 || xx >= cv.w) continue;
        std::uint64_t xi = ((std::uint64_t(ni) * cv.c + ci) * cv.h + yy) * cv.w + xx;
        std::uint64_t wi = ((std::uint64_t(ki) * cv.c + ci) * 3 + r) * 3 + s;
        acc += double(small_int(xi, xseed, 2)) * small_int(wi, wseed, 1);
      }
  return static_cast<float>(acc);
}

}  // namespace

int main(int argc, char** argv) {
  Args args(argc, argv);
  maybe_print_physical_total(args);
  const int nbuf = static_cast<int>(args.u64("--buffers", 8));
  const std::uint64_t buf_bytes = args.u64("--buffer-size", 128ull << 20);
  const int ngemm = static_cast<int>(args.u64("--gemms", 4));
  const int gn = static_cast<int>(args.u64("--gemm-n", 4096));
  const int nconv = static_cast<int>(args.u64("--convs", 4));
  const int iters = static_cast<int>(args.u64("--iters", 2));

  cudaStream_t s;
  GT_RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cublasHandle_t blas;
  GT_BLAS(cublasCreate(&blas));
  GT_BLAS(cublasSetStream(blas, s));
  cudnnHandle_t dnn;
  GT_DNN(cudnnCreate(&dnn));
  GT_DNN(cudnnSetStream(dnn, s));
  unsigned long long* bad = device_alloc<unsigned long long>(sizeof(unsigned long long));

  // Everything is allocated up front and stays live: the footprint is the sum.
  std::vector<std::uint32_t*> bufs(nbuf);
  for (auto& b : bufs) b = device_alloc<std::uint32_t>(buf_bytes);
  const std::uint64_t gemm_bytes = std::uint64_t(gn) * gn * sizeof(float);
  std::vector<float*> ga(ngemm), gb(ngemm), gc(ngemm);
  for (int i = 0; i < ngemm; ++i) {
    ga[i] = device_alloc<float>(gemm_bytes);
    gb[i] = device_alloc<float>(gemm_bytes);
    gc[i] = device_alloc<float>(gemm_bytes);
  }
  Conv cv;
  const std::uint64_t conv_bytes = cv.elems() * sizeof(float);
  std::vector<float*> cx(nconv), cy(nconv);
  for (int i = 0; i < nconv; ++i) {
    cx[i] = device_alloc<float>(conv_bytes);
    cy[i] = device_alloc<float>(conv_bytes);
  }
  const std::uint64_t wcount = std::uint64_t(cv.k) * cv.c * 9;
  float* cw = device_alloc<float>(wcount * sizeof(float));

  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wd;
  cudnnConvolutionDescriptor_t cd;
  GT_DNN(cudnnCreateTensorDescriptor(&xd));
  GT_DNN(cudnnCreateTensorDescriptor(&yd));
  GT_DNN(cudnnCreateFilterDescriptor(&wd));
  GT_DNN(cudnnCreateConvolutionDescriptor(&cd));
  GT_DNN(
      cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, cv.n, cv.c, cv.h, cv.w));
  GT_DNN(
      cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, cv.n, cv.k, cv.h, cv.w));
  GT_DNN(cudnnSetFilter4dDescriptor(wd, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, cv.k, cv.c, 3, 3));
  GT_DNN(cudnnSetConvolution2dDescriptor(cd, 1, 1, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION,
                                         CUDNN_DATA_FLOAT));
  GT_DNN(cudnnSetConvolutionMathType(cd, CUDNN_FMA_MATH));
  // A fixed, deterministic algorithm, so a run under gswap and one without it do the same work.
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM;
  size_t ws_bytes = 0;
  if (cudnnGetConvolutionForwardWorkspaceSize(dnn, xd, wd, cd, yd, algo, &ws_bytes) !=
      CUDNN_STATUS_SUCCESS) {
    algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
    GT_DNN(cudnnGetConvolutionForwardWorkspaceSize(dnn, xd, wd, cd, yd, algo, &ws_bytes));
  }
  void* ws = ws_bytes ? device_alloc<char>(ws_bytes) : nullptr;

  size_t free_b = 0, total_b = 0;
  GT_RT(cudaMemGetInfo(&free_b, &total_b));
  std::printf("runtime_check: under gswap: %s, footprint %s, reported total %s\n",
              under_gswap() ? "yes" : "no", mib(g_footprint).c_str(), mib(total_b).c_str());
  std::printf("footprint_bytes: %llu\n", static_cast<unsigned long long>(g_footprint));
  if (args.flag("--expect-swap"))
    GT_CHECK(total_b < g_footprint, "the footprint exceeds the budget, so swapping was needed",
             fmt("footprint %llu, budget %llu", g_footprint, total_b));

  // Inputs are written once; the iterations read them again after everything else ran.
  for (int i = 0; i < nbuf; ++i)
    fill_pattern<<<kGrid, kBlock, 0, s>>>(bufs[i], buf_bytes / 4, 100 + i);
  for (int i = 0; i < ngemm; ++i) {
    fill_small<<<kGrid, kBlock, 0, s>>>(ga[i], std::uint64_t(gn) * gn, 200 + i, 2);
    fill_small<<<kGrid, kBlock, 0, s>>>(gb[i], std::uint64_t(gn) * gn, 300 + i, 2);
  }
  for (int i = 0; i < nconv; ++i)
    fill_small<<<kGrid, kBlock, 0, s>>>(cx[i], cv.elems(), 400 + i, 2);
  fill_small<<<kGrid, kBlock, 0, s>>>(cw, wcount, 500, 1);
  GT_RT(cudaGetLastError());

  std::vector<float> host(std::max<std::uint64_t>(gemm_bytes, conv_bytes) / sizeof(float));
  std::uint64_t checksum = 0xcbf29ce484222325ull;
  for (int it = 0; it < iters; ++it) {
    // Vector phase: runtime launches read every buffer.
    unsigned long long bad_words = 0;
    for (int i = 0; i < nbuf; ++i) {
      GT_RT(cudaMemsetAsync(bad, 0, sizeof *bad, s));
      count_mismatches<<<kGrid, kBlock, 0, s>>>(bufs[i], buf_bytes / 4, 100 + i, bad);
      unsigned long long b = 0;
      GT_RT(cudaMemcpyAsync(&b, bad, sizeof b, cudaMemcpyDeviceToHost, s));
      GT_RT(cudaStreamSynchronize(s));
      bad_words += b;
    }
    GT_CHECK(bad_words == 0,
             ("iteration " + std::to_string(it) + ": <<<>>> buffers intact").c_str(),
             fmt("%llu words differ of %llu", bad_words, nbuf * buf_bytes / 4));

    // cuBLAS: C_i = A_i * B_i (column-major), each GEMM needs its three matrices resident.
    const float one = 1, zero = 0;
    for (int i = 0; i < ngemm; ++i)
      GT_BLAS(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, gn, gn, gn, &one, ga[i], gn, gb[i], gn,
                          &zero, gc[i], gn));
    // cuDNN: y_i = conv(x_i, w).
    for (int i = 0; i < nconv; ++i)
      GT_DNN(cudnnConvolutionForward(dnn, &one, xd, cx[i], wd, cw, cd, algo, ws, ws_bytes, &zero,
                                     yd, cy[i]));
    GT_RT(cudaGetLastError());

    unsigned long long gemm_bad = 0, conv_bad = 0;
    for (int i = 0; i < ngemm; ++i) {
      GT_RT(cudaMemcpyAsync(host.data(), gc[i], gemm_bytes, cudaMemcpyDeviceToHost, s));
      GT_RT(cudaStreamSynchronize(s));
      if (it == iters - 1) checksum = fnv(host.data(), gemm_bytes, checksum);
      for (int t = 0; t < 64; ++t) {
        int r = static_cast<int>(pattern(t, 900 + i) % gn),
            c = static_cast<int>(pattern(t, 950 + i) % gn);
        double acc = 0;
        for (int k = 0; k < gn; ++k)
          acc += double(small_int(std::uint64_t(k) * gn + r, 200 + i, 2)) *
                 small_int(std::uint64_t(c) * gn + k, 300 + i, 2);
        gemm_bad += host[std::uint64_t(c) * gn + r] != static_cast<float>(acc);
      }
    }
    for (int i = 0; i < nconv; ++i) {
      GT_RT(cudaMemcpyAsync(host.data(), cy[i], conv_bytes, cudaMemcpyDeviceToHost, s));
      GT_RT(cudaStreamSynchronize(s));
      if (it == iters - 1) checksum = fnv(host.data(), conv_bytes, checksum);
      for (int t = 0; t < 64; ++t) {
        int ni = pattern(t, 1000 + i) % cv.n, ki = pattern(t, 1100 + i) % cv.k;
        int y = pattern(t, 1200 + i) % cv.h, x = pattern(t, 1300 + i) % cv.w;
        if (t < 4) y = (t & 1) ? cv.h - 1 : 0;  // include the padded border
        std::uint64_t oi = ((std::uint64_t(ni) * cv.k + ki) * cv.h + y) * cv.w + x;
        conv_bad += host[oi] != conv_ref(cv, 400 + i, 500, ni, ki, y, x);
      }
    }
    GT_CHECK(gemm_bad == 0, ("iteration " + std::to_string(it) + ": cuBLAS GEMMs exact").c_str(),
             fmt("%llu of %llu sampled entries differ", gemm_bad, 64ull * ngemm));
    GT_CHECK(conv_bad == 0,
             ("iteration " + std::to_string(it) + ": cuDNN convolutions exact").c_str(),
             fmt("%llu of %llu sampled entries differ", conv_bad, 64ull * nconv));
  }
  std::printf("checksum: %016llx\n", static_cast<unsigned long long>(checksum));

  GT_DNN(cudnnDestroyTensorDescriptor(xd));
  GT_DNN(cudnnDestroyTensorDescriptor(yd));
  GT_DNN(cudnnDestroyFilterDescriptor(wd));
  GT_DNN(cudnnDestroyConvolutionDescriptor(cd));
  GT_DNN(cudnnDestroy(dnn));
  GT_BLAS(cublasDestroy(blas));
  GT_RT(cudaStreamDestroy(s));
  return finish("runtime_check");
}
