/* minitrain_kernels.h: the kernels of the minitrain reference workload, declared once.
 *
 * minitrain ships its kernels twice: host functions in a simcuda module (kernels_host.cpp) and CUDA
 * kernels in a fatbin (kernels_cuda.cu). Both must export the same names with the same parameter
 * lists, because the program launches either one through the same kernelParams arrays. Each
 * kernel's parameters are written here as a struct, in declaration order: the struct's offsets and
 * sizes are what cuFuncGetParamInfo reports for the CUDA kernel (C alignment rules, as nvcc lays
 * them out), so the host module builds its simcuda parameter table from them, and minitrain checks
 * the loaded module against them at start-up.
 *
 * Matrices are row-major float32. A layer maps [batch x in] to [batch x out] with a weight matrix
 * W[in x out] and a bias b[out]. Every reduction runs in a fixed order (no atomics), so results are
 * bitwise reproducible for a given module.
 *
 * Plain C (no C++ features), so nvcc, the host module and the program include it alike.
 */
#ifndef MINITRAIN_KERNELS_H_
#define MINITRAIN_KERNELS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* X-macro over every kernel: X(name, args struct). */
#define MT_KERNEL_LIST(X)                \
  X(mt_linear_fwd, mt_linear_fwd_args)   \
  X(mt_loss, mt_loss_args)               \
  X(mt_loss_grad, mt_loss_grad_args)     \
  X(mt_relu_bwd, mt_relu_bwd_args)       \
  X(mt_grad_weight, mt_grad_weight_args) \
  X(mt_grad_bias, mt_grad_bias_args)     \
  X(mt_grad_input, mt_grad_input_args)   \
  X(mt_sgd, mt_sgd_args)

/* y[m x n] = act(x[m x k] . w[k x n] + b[n]); act is ReLU when relu != 0, else the identity. */
typedef struct mt_linear_fwd_args {
  const float* x;
  const float* w;
  const float* b;
  float* y;
  uint32_t m, k, n;
  uint32_t relu;
} mt_linear_fwd_args;

/* loss[0] = sum((out - target)^2) / count, summed in a fixed order. Run with one block. */
typedef struct mt_loss_args {
  const float* out;
  const float* target;
  float* loss;
  uint64_t count;
} mt_loss_args;

/* dout = scale * (out - target), elementwise; scale is 2/count for the mean squared error. */
typedef struct mt_loss_grad_args {
  const float* out;
  const float* target;
  float* dout;
  uint64_t count;
  float scale;
} mt_loss_grad_args;

/* dy = (y > 0) ? dy : 0, in place: the ReLU backward, using the saved activation y = relu(z). */
typedef struct mt_relu_bwd_args {
  float* dy;
  const float* y;
  uint64_t count;
} mt_relu_bwd_args;

/* dw[k x n] = x^T . dy, x[m x k], dy[m x n]; each element sums over m in ascending order. */
typedef struct mt_grad_weight_args {
  const float* x;
  const float* dy;
  float* dw;
  uint32_t m, k, n;
} mt_grad_weight_args;

/* db[n] = sum over rows of dy[m x n], in ascending row order. */
typedef struct mt_grad_bias_args {
  const float* dy;
  float* db;
  uint32_t m, n;
} mt_grad_bias_args;

/* dx[m x k] = dy[m x n] . w^T, w[k x n]. */
typedef struct mt_grad_input_args {
  const float* dy;
  const float* w;
  float* dx;
  uint32_t m, k, n;
} mt_grad_input_args;

/* p -= lr * g, elementwise. */
typedef struct mt_sgd_args {
  float* p;
  const float* g;
  uint64_t count;
  float lr;
} mt_sgd_args;

/* The parameters of each kernel, in declaration order: MT_PARAMS_<kernel>(F) calls F(struct, field)
 * once per parameter. The host module turns these into its simcuda parameter table and minitrain
 * compares them with what cuFuncGetParamInfo reports for whichever module it loaded. */
/* One parameter per line; clang-format would reflow these lists differently on every pass. */
/* clang-format off */
#define MT_PARAMS_mt_linear_fwd(F) \
  F(mt_linear_fwd_args, x) \
  F(mt_linear_fwd_args, w) \
  F(mt_linear_fwd_args, b) \
  F(mt_linear_fwd_args, y) \
  F(mt_linear_fwd_args, m) \
  F(mt_linear_fwd_args, k) \
  F(mt_linear_fwd_args, n) \
  F(mt_linear_fwd_args, relu)
#define MT_PARAMS_mt_loss(F) \
  F(mt_loss_args, out) \
  F(mt_loss_args, target) \
  F(mt_loss_args, loss) \
  F(mt_loss_args, count)
#define MT_PARAMS_mt_loss_grad(F) \
  F(mt_loss_grad_args, out) \
  F(mt_loss_grad_args, target) \
  F(mt_loss_grad_args, dout) \
  F(mt_loss_grad_args, count) \
  F(mt_loss_grad_args, scale)
#define MT_PARAMS_mt_relu_bwd(F) \
  F(mt_relu_bwd_args, dy) \
  F(mt_relu_bwd_args, y) \
  F(mt_relu_bwd_args, count)
#define MT_PARAMS_mt_grad_weight(F) \
  F(mt_grad_weight_args, x) \
  F(mt_grad_weight_args, dy) \
  F(mt_grad_weight_args, dw) \
  F(mt_grad_weight_args, m) \
  F(mt_grad_weight_args, k) \
  F(mt_grad_weight_args, n)
#define MT_PARAMS_mt_grad_bias(F) \
  F(mt_grad_bias_args, dy) \
  F(mt_grad_bias_args, db) \
  F(mt_grad_bias_args, m) \
  F(mt_grad_bias_args, n)
#define MT_PARAMS_mt_grad_input(F) \
  F(mt_grad_input_args, dy) \
  F(mt_grad_input_args, w) \
  F(mt_grad_input_args, dx) \
  F(mt_grad_input_args, m) \
  F(mt_grad_input_args, k) \
  F(mt_grad_input_args, n)
#define MT_PARAMS_mt_sgd(F) \
  F(mt_sgd_args, p) \
  F(mt_sgd_args, g) \
  F(mt_sgd_args, count) \
  F(mt_sgd_args, lr)
/* clang-format on */

/* Size of a struct member, for parameter tables. */
#define MT_FIELD_SIZE(type, field) sizeof(((type*)0)->field)

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* MINITRAIN_KERNELS_H_ */
