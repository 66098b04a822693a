// kernels_host.cpp: minitrain's kernels as a simcuda module (host functions on host memory).
//
// Built as libminitrain_kernels.so and loaded by minitrain through cuModuleLoad when the device is
// simulated. The names and parameter lists are those of kernels_cuda.cu, taken from
// minitrain_kernels.h. Tests run these kernels on 2 shared CPU cores, so the matrix products are
// blocked so that the compiler vectorises the inner loops; every output element still sums its
// terms in one fixed order (ascending), so results are bitwise reproducible on any run and any
// stream split. Build with -ffp-contract=off: a fused multiply-add would round differently in the
// clone that has FMA, and the checksum must not depend on which CPU clone runs.
//
// Threading: simcuda calls each kernel on the worker thread of the stream it was launched on, and
// several streams run at once. The kernels share no mutable state except the per-thread transpose
// scratch buffer; the simulated rates are written once by the module entry, before any launch.
#include <simcuda.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "minitrain_kernels.h"

namespace {

// Simulated device speed, for the kernels' declared durations. Small by default (a few TFLOP/s of
// compute, a few TB/s of memory bandwidth, like a current GPU) and read once from the environment
// so a benchmark can slow the "GPU" down to make compute/copy overlap visible.
double g_flops_per_s = 4e12;
double g_bytes_per_s = 2e12;

double EnvDouble(const char* name, double fallback) {
  const char* s = std::getenv(name);
  if (s == nullptr || *s == '\0') return fallback;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  return (end != s && *end == '\0' && v > 0 && std::isfinite(v)) ? v : fallback;
}

// Copies the packed parameter buffer into the argument struct. The packed size can be smaller
// than sizeof(T) (trailing padding), and the buffer carries no alignment promise.
template <typename T>
T Args(const simcuda_launch* l) {
  T a;
  std::memset(&a, 0, sizeof a);
  std::memcpy(&a, l->params, std::min(l->params_size, sizeof a));
  return a;
}

uint64_t Ns(double flops, double bytes) {
  double s = std::max(flops / g_flops_per_s, bytes / g_bytes_per_s);
  return static_cast<uint64_t>(s * 1e9);
}

// The product is register-tiled with GCC vector types: a tile of kRows rows by 16 columns lives in
// registers while p runs over a block of the inner dimension, each loaded row of B serving every
// row of the tile. Partial sums pass between inner blocks through C in float, which is exact, so
// every element is the same chain ((0 + a0*b0) + a1*b1) + ... in ascending p whatever the blocking
// or the path (vector tile, scalar edge); vector lanes round like scalar floats.
typedef float V8 __attribute__((vector_size(32)));

__attribute__((always_inline)) inline V8 Load8(const float* p) {
  V8 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
__attribute__((always_inline)) inline void Store8(float* p, V8 v) {
  std::memcpy(p, &v, sizeof v);
}

constexpr int kRows = 4;        // rows per register tile
constexpr size_t kInner = 128;  // inner block: a 128 x 64 block of B is 32 KiB and stays in L1
constexpr size_t kCols = 64;    // columns swept per inner block (four 16-wide tiles)

// C[R x 16] (+)= A(R x kb) . B(kb x 16), with A(r, p) = a[r*a_rs + p*a_ps].
template <int R>
__attribute__((always_inline)) inline void Tile16(size_t kb, const float* a, size_t a_rs,
                                                  size_t a_ps, const float* b, size_t ldb, float* c,
                                                  size_t ldc, bool first) {
  V8 acc[R][2];
  for (int r = 0; r < R; ++r) {
    if (first) {
      acc[r][0] = V8{};
      acc[r][1] = V8{};
    } else {
      acc[r][0] = Load8(c + r * ldc);
      acc[r][1] = Load8(c + r * ldc + 8);
    }
  }
  for (size_t p = 0; p < kb; ++p) {
    const V8 b0 = Load8(b + p * ldb);
    const V8 b1 = Load8(b + p * ldb + 8);
    for (int r = 0; r < R; ++r) {
      const float av = a[r * a_rs + p * a_ps];
      acc[r][0] += b0 * av;
      acc[r][1] += b1 * av;
    }
  }
  for (int r = 0; r < R; ++r) {
    Store8(c + r * ldc, acc[r][0]);
    Store8(c + r * ldc + 8, acc[r][1]);
  }
}

// The same sums for the last nc < 16 columns, one element at a time.
template <int R>
__attribute__((always_inline)) inline void TileEdge(size_t kb, size_t nc, const float* a,
                                                    size_t a_rs, size_t a_ps, const float* b,
                                                    size_t ldb, float* c, size_t ldc, bool first) {
  for (int r = 0; r < R; ++r) {
    for (size_t j = 0; j < nc; ++j) {
      float s = first ? 0.0f : c[r * ldc + j];
      for (size_t p = 0; p < kb; ++p) s += a[r * a_rs + p * a_ps] * b[p * ldb + j];
      c[r * ldc + j] = s;
    }
  }
}

template <int R>
__attribute__((always_inline)) inline void RowTile(size_t n0, size_t nb, size_t kb, const float* a,
                                                   size_t a_rs, size_t a_ps, const float* b,
                                                   size_t ldb, float* c, size_t ldc, bool first) {
  size_t j = 0;
  for (; j + 16 <= nb; j += 16)
    Tile16<R>(kb, a, a_rs, a_ps, b + n0 + j, ldb, c + n0 + j, ldc, first);
  if (j < nb) TileEdge<R>(kb, nb - j, a, a_rs, a_ps, b + n0 + j, ldb, c + n0 + j, ldc, first);
}

// C[rows x cols] (row stride ldc) = A . B, A(r, p) = a[r*a_rs + p*a_ps], B row-major with stride
// ldb; then + bias[col] and ReLU when asked.
__attribute__((target_clones("arch=x86-64-v3", "default"))) void Gemm(
    size_t rows, size_t cols, size_t inner, const float* a, size_t a_rs, size_t a_ps,
    const float* b, size_t ldb, float* c, size_t ldc, const float* bias, bool relu) {
  for (size_t n0 = 0; n0 < cols; n0 += kCols) {
    const size_t nb = std::min(kCols, cols - n0);
    for (size_t p0 = 0; p0 < inner || p0 == 0; p0 += kInner) {
      const size_t kb = std::min(kInner, inner - p0);
      const bool first = p0 == 0;
      const float* ap = a + p0 * a_ps;
      const float* bp = b + p0 * ldb;
      size_t r0 = 0;
      for (; r0 + kRows <= rows; r0 += kRows)
        RowTile<kRows>(n0, nb, kb, ap + r0 * a_rs, a_rs, a_ps, bp, ldb, c + r0 * ldc, ldc, first);
      for (; r0 < rows; ++r0)
        RowTile<1>(n0, nb, kb, ap + r0 * a_rs, a_rs, a_ps, bp, ldb, c + r0 * ldc, ldc, first);
      if (inner == 0) break;
    }
  }
  if (bias == nullptr && !relu) return;
  for (size_t r = 0; r < rows; ++r) {
    float* row = c + r * ldc;
    for (size_t j = 0; j < cols; ++j) {
      float v = row[j];
      if (bias != nullptr) v += bias[j];
      if (relu) v = v > 0.0f ? v : 0.0f;
      row[j] = v;
    }
  }
}

void LinearFwd(const simcuda_launch* l) {
  auto a = Args<mt_linear_fwd_args>(l);
  Gemm(a.m, a.n, a.k, a.x, a.k, 1, a.w, a.n, a.y, a.n, a.b, a.relu != 0);
}
uint64_t LinearFwdNs(const simcuda_launch* l) {
  auto a = Args<mt_linear_fwd_args>(l);
  double mkn = double(a.m) * a.k * a.n;
  return Ns(2 * mkn, 4.0 * (double(a.m) * a.k + double(a.k) * a.n + double(a.m) * a.n));
}

void GradWeight(const simcuda_launch* l) {
  // dw[k x n] = x^T . dy: row r of dw pairs with column r of x, summed over the batch.
  auto a = Args<mt_grad_weight_args>(l);
  Gemm(a.k, a.n, a.m, a.x, 1, a.k, a.dy, a.n, a.dw, a.n, nullptr, false);
}
uint64_t GradWeightNs(const simcuda_launch* l) {
  auto a = Args<mt_grad_weight_args>(l);
  double mkn = double(a.m) * a.k * a.n;
  return Ns(2 * mkn, 4.0 * (double(a.m) * a.k + double(a.k) * a.n + double(a.m) * a.n));
}

void GradInput(const simcuda_launch* l) {
  // dx[m x k] = dy . w^T. Transposing w first turns it into the same streaming product.
  auto a = Args<mt_grad_input_args>(l);
  thread_local std::vector<float> wt;
  wt.resize(size_t(a.k) * a.n);
  for (size_t p = 0; p < a.k; ++p)
    for (size_t j = 0; j < a.n; ++j) wt[j * a.k + p] = a.w[p * a.n + j];
  Gemm(a.m, a.k, a.n, a.dy, a.n, 1, wt.data(), a.k, a.dx, a.k, nullptr, false);
}
uint64_t GradInputNs(const simcuda_launch* l) {
  auto a = Args<mt_grad_input_args>(l);
  double mkn = double(a.m) * a.k * a.n;
  return Ns(2 * mkn, 4.0 * (double(a.m) * a.k + double(a.k) * a.n + double(a.m) * a.n));
}

void Loss(const simcuda_launch* l) {
  auto a = Args<mt_loss_args>(l);
  double sum = 0;
  for (uint64_t i = 0; i < a.count; ++i) {
    double d = double(a.out[i]) - double(a.target[i]);
    sum += d * d;
  }
  a.loss[0] = static_cast<float>(sum / double(a.count));
}
uint64_t LossNs(const simcuda_launch* l) {
  auto a = Args<mt_loss_args>(l);
  return Ns(3.0 * a.count, 8.0 * a.count);
}

void LossGrad(const simcuda_launch* l) {
  auto a = Args<mt_loss_grad_args>(l);
  for (uint64_t i = 0; i < a.count; ++i) a.dout[i] = a.scale * (a.out[i] - a.target[i]);
}
uint64_t LossGradNs(const simcuda_launch* l) {
  auto a = Args<mt_loss_grad_args>(l);
  return Ns(2.0 * a.count, 12.0 * a.count);
}

void ReluBwd(const simcuda_launch* l) {
  auto a = Args<mt_relu_bwd_args>(l);
  for (uint64_t i = 0; i < a.count; ++i) a.dy[i] = a.y[i] > 0.0f ? a.dy[i] : 0.0f;
}
uint64_t ReluBwdNs(const simcuda_launch* l) {
  auto a = Args<mt_relu_bwd_args>(l);
  return Ns(double(a.count), 12.0 * a.count);
}

void GradBias(const simcuda_launch* l) {
  auto a = Args<mt_grad_bias_args>(l);
  std::memset(a.db, 0, sizeof(float) * a.n);
  for (size_t i = 0; i < a.m; ++i) {
    const float* row = a.dy + i * a.n;
    for (size_t j = 0; j < a.n; ++j) a.db[j] += row[j];
  }
}
uint64_t GradBiasNs(const simcuda_launch* l) {
  auto a = Args<mt_grad_bias_args>(l);
  return Ns(double(a.m) * a.n, 4.0 * double(a.m) * a.n);
}

void Sgd(const simcuda_launch* l) {
  auto a = Args<mt_sgd_args>(l);
  for (uint64_t i = 0; i < a.count; ++i) a.p[i] -= a.lr * a.g[i];
}
uint64_t SgdNs(const simcuda_launch* l) {
  auto a = Args<mt_sgd_args>(l);
  return Ns(2.0 * a.count, 12.0 * a.count);
}

// Parameter tables, generated from the one list in minitrain_kernels.h.
#define MT_PARAM_ENTRY(type, field) {offsetof(type, field), MT_FIELD_SIZE(type, field)},
#define MT_PARAM_TABLE(name, args) \
  const simcuda_param name##_params[] = {MT_PARAMS_##name(MT_PARAM_ENTRY)};
MT_KERNEL_LIST(MT_PARAM_TABLE)
#undef MT_PARAM_TABLE
#undef MT_PARAM_ENTRY

#define MT_NPARAMS(name) uint32_t(sizeof(name##_params) / sizeof(simcuda_param)), name##_params
const simcuda_kernel_desc kKernels[] = {
    {"mt_linear_fwd", LinearFwd, MT_NPARAMS(mt_linear_fwd), 0, LinearFwdNs},
    {"mt_loss", Loss, MT_NPARAMS(mt_loss), 0, LossNs},
    {"mt_loss_grad", LossGrad, MT_NPARAMS(mt_loss_grad), 0, LossGradNs},
    {"mt_relu_bwd", ReluBwd, MT_NPARAMS(mt_relu_bwd), 0, ReluBwdNs},
    {"mt_grad_weight", GradWeight, MT_NPARAMS(mt_grad_weight), 0, GradWeightNs},
    {"mt_grad_bias", GradBias, MT_NPARAMS(mt_grad_bias), 0, GradBiasNs},
    {"mt_grad_input", GradInput, MT_NPARAMS(mt_grad_input), 0, GradInputNs},
    {"mt_sgd", Sgd, MT_NPARAMS(mt_sgd), 0, SgdNs},
};
#undef MT_NPARAMS

// Every kernel of the list must be in the table (the table names its host function by hand).
#define MT_COUNT(name, args) +1
static_assert(sizeof(kKernels) / sizeof(kKernels[0]) == 0 MT_KERNEL_LIST(MT_COUNT));
#undef MT_COUNT

}  // namespace

extern "C" SIMCUDA_EXPORT const simcuda_module_desc* SIMCUDA_MODULE_ENTRY(void) {
  g_flops_per_s = EnvDouble("MINITRAIN_SIM_FLOPS", g_flops_per_s);
  g_bytes_per_s = EnvDouble("MINITRAIN_SIM_BYTES_PER_S", g_bytes_per_s);
  static const simcuda_module_desc m = {SIMCUDA_ABI_VERSION,
                                        uint32_t(sizeof(kKernels) / sizeof(kKernels[0])), kKernels};
  return &m;
}
