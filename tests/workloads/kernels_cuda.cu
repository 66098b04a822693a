// kernels_cuda.cu: minitrain's kernels for a real GPU, built by nvcc into minitrain_kernels.fatbin.
//
// Same names and parameter lists as the simcuda module (kernels_host.cpp); both follow
// minitrain_kernels.h, and minitrain checks what cuFuncGetParamInfo reports against that header.
// extern "C" keeps the names unmangled for cuModuleGetFunction. Every reduction has one fixed
// order (no atomics), so a run is bitwise reproducible on a given GPU.
//
// Launch shapes (chosen by minitrain): the products use 16x16 blocks over the output, mt_loss one
// block of 256 threads, the rest one thread per element with a grid-stride loop.
#include <stdint.h>

#include "minitrain_kernels.h"

namespace {

constexpr int kTile = 16;
constexpr int kLossThreads = 256;

// out(r, c) = sum over p of a(r, p) * b(p, c), for the output element of this thread. Tiles are
// summed in ascending p, and within a tile in ascending p, so the order is fixed.
template <class A, class B>
__device__ float TiledProduct(uint32_t rows, uint32_t cols, uint32_t inner, A a, B b) {
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  const uint32_t r = blockIdx.y * kTile + threadIdx.y;
  const uint32_t c = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.0f;
  for (uint32_t p0 = 0; p0 < inner; p0 += kTile) {
    const uint32_t pa = p0 + threadIdx.x;
    const uint32_t pb = p0 + threadIdx.y;
    as[threadIdx.y][threadIdx.x] = (r < rows && pa < inner) ? a(r, pa) : 0.0f;
    bs[threadIdx.y][threadIdx.x] = (pb < inner && c < cols) ? b(pb, c) : 0.0f;
    __syncthreads();
    for (int q = 0; q < kTile; ++q) acc += as[threadIdx.y][q] * bs[q][threadIdx.x];
    __syncthreads();
  }
  return acc;
}

// Row-major matrix access, plain and transposed.
struct RowMajor {
  const float* p;
  uint32_t ld;
  __device__ float operator()(uint32_t i, uint32_t j) const { return p[size_t(i) * ld + j]; }
};
struct Transposed {
  const float* p;
  uint32_t ld;
  __device__ float operator()(uint32_t i, uint32_t j) const { return p[size_t(j) * ld + i]; }
};

__device__ uint64_t GlobalThread() {
  return uint64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ uint64_t GridThreads() {
  return uint64_t(gridDim.x) * blockDim.x;
}

}  // namespace

extern "C" __global__ void mt_linear_fwd(const float* x, const float* w, const float* b, float* y,
                                         uint32_t m, uint32_t k, uint32_t n, uint32_t relu) {
  float v = TiledProduct(m, n, k, RowMajor{x, k}, RowMajor{w, n});
  const uint32_t r = blockIdx.y * kTile + threadIdx.y;
  const uint32_t c = blockIdx.x * kTile + threadIdx.x;
  if (r < m && c < n) {
    v += b[c];
    if (relu != 0) v = v > 0.0f ? v : 0.0f;
    y[size_t(r) * n + c] = v;
  }
}

extern "C" __global__ void mt_grad_weight(const float* x, const float* dy, float* dw, uint32_t m,
                                          uint32_t k, uint32_t n) {
  // dw[k x n] = x^T . dy, summed over the m rows of the batch.
  float v = TiledProduct(k, n, m, Transposed{x, k}, RowMajor{dy, n});
  const uint32_t r = blockIdx.y * kTile + threadIdx.y;
  const uint32_t c = blockIdx.x * kTile + threadIdx.x;
  if (r < k && c < n) dw[size_t(r) * n + c] = v;
}

extern "C" __global__ void mt_grad_input(const float* dy, const float* w, float* dx, uint32_t m,
                                         uint32_t k, uint32_t n) {
  // dx[m x k] = dy . w^T.
  float v = TiledProduct(m, k, n, RowMajor{dy, n}, Transposed{w, n});
  const uint32_t r = blockIdx.y * kTile + threadIdx.y;
  const uint32_t c = blockIdx.x * kTile + threadIdx.x;
  if (r < m && c < k) dx[size_t(r) * k + c] = v;
}

extern "C" __global__ void mt_loss(const float* out, const float* target, float* loss,
                                   uint64_t count) {
  // One block: strided partial sums, then a tree in shared memory. Both orders are fixed.
  __shared__ double part[kLossThreads];
  double s = 0.0;
  for (uint64_t i = threadIdx.x; i < count; i += kLossThreads) {
    double d = double(out[i]) - double(target[i]);
    s += d * d;
  }
  part[threadIdx.x] = s;
  __syncthreads();
  for (int half = kLossThreads / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) part[threadIdx.x] += part[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0) loss[0] = float(part[0] / double(count));
}

extern "C" __global__ void mt_loss_grad(const float* out, const float* target, float* dout,
                                        uint64_t count, float scale) {
  for (uint64_t i = GlobalThread(); i < count; i += GridThreads())
    dout[i] = scale * (out[i] - target[i]);
}

extern "C" __global__ void mt_relu_bwd(float* dy, const float* y, uint64_t count) {
  for (uint64_t i = GlobalThread(); i < count; i += GridThreads())
    dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

extern "C" __global__ void mt_grad_bias(const float* dy, float* db, uint32_t m, uint32_t n) {
  // One thread per column, rows in ascending order.
  for (uint64_t j = GlobalThread(); j < n; j += GridThreads()) {
    float s = 0.0f;
    for (uint32_t i = 0; i < m; ++i) s += dy[size_t(i) * n + j];
    db[j] = s;
  }
}

extern "C" __global__ void mt_sgd(float* p, const float* g, uint64_t count, float lr) {
  for (uint64_t i = GlobalThread(); i < count; i += GridThreads()) p[i] -= lr * g[i];
}
