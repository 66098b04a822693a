// minitrain.cpp: the reference workload. Trains a deterministic multi-layer perceptron through the
// CUDA driver API, the way a framework drives a GPU, and prints a checksum of the final weights.
//
// Each iteration: upload a fresh synthetic batch (async H2D), forward through N linear+ReLU layers
// keeping every activation in its own device allocation, mean-squared-error loss (copied back D2H),
// backward freeing each activation right after its last use, and an SGD update of which part runs
// on other streams, ordered by events. The allocations made and freed every iteration are what
// gswap swaps; the checksum (FNV-1a 64 of the final weights) must not change under swapping, nor
// with the number of streams, nor from run to run.
//
// Stream and event protocol (why the math cannot depend on --streams):
//  - all forward and backward work runs on stream 0, in program order;
//  - the update of layer i runs on stream i % S. It waits for grad_ready[i], recorded on stream 0
//    after the last backward kernel that reads W_i (mt_grad_input), and records update_done[i];
//  - the next iteration's forward of layer i waits for update_done[i] before reading W_i, which
//    also orders the next write of dW_i after the update has read it.
// Activations are touched by stream 0 only, so their stream-ordered frees need no other event.
//
// Recomputation (--recompute): each layer's output is registered with gswap (include/gswap.h,
// found with dlsym, so the program runs the same without gswap) as recomputable from the layer's
// input, weights and bias by the forward kernel itself; gswapd's planner may then drop an
// activation after the forward pass and gswap recomputes it before the backward pass needs it.
// The kernels are deterministic, so the checksum does not change.
//
// Threads: one (the host thread). The driver table is loaded before anything else runs.
#include <dlfcn.h>
#include <simcuda.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_driver.h"
#include "include/gswap.h"
#include "minitrain_kernels.h"

namespace minitrain {
namespace {

constexpr float kLearningRate = 0.5f;
constexpr unsigned kElementwiseThreads = 256;
constexpr unsigned kTile = 16;          // block edge of the product kernels (kernels_cuda.cu)
constexpr unsigned kLossThreads = 256;  // mt_loss runs as one block of this many threads

struct Options {
  uint32_t layers = 0;
  uint32_t width = 0;
  uint32_t batch = 0;
  uint32_t iters = 0;
  uint32_t streams = 2;
  uint64_t seed = 1;
  bool async_alloc = false;
  bool recompute = false;
  std::string module;
};

// A CLI11 check that accepts only a plain decimal integer in [lo, hi], so zero, negative, garbage
// and fractional values all get the same clear message.
CLI::Validator WholeNumber(uint64_t lo, uint64_t hi) {
  auto check = [lo, hi](std::string& s) -> std::string {
    std::string why = "must be a whole number from " + std::to_string(lo) + " to " +
                      std::to_string(hi) + ", not '" + s + "'";
    if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos)
      return why;
    errno = 0;
    unsigned long long v = std::strtoull(s.c_str(), nullptr, 10);
    if (errno != 0 || v < lo || v > hi) return why;
    return "";
  };
  return CLI::Validator(check, "[" + std::to_string(lo) + "-" + std::to_string(hi) + "]");
}

// Parses the command line. Returns -1 to go on, or the exit status: 0 for --help, 2 for a bad
// command line (with the reason on standard error).
int ParseOptions(int argc, char** argv, Options* o) {
  CLI::App app{"minitrain: deterministic MLP training through the CUDA driver API"};
  // Upper bounds keep every size within the 32-bit dimensions the kernels take and every grid
  // within CUDA's limits; they are far above anything a test or demo needs.
  app.add_option("--layers", o->layers, "number of linear layers")
      ->required()
      ->check(WholeNumber(1, 1024));
  app.add_option("--width", o->width, "features per layer (weights are width x width)")
      ->required()
      ->check(WholeNumber(1, 32768));
  app.add_option("--batch", o->batch, "rows per batch")->required()->check(WholeNumber(1, 262144));
  app.add_option("--iters", o->iters, "training iterations")
      ->required()
      ->check(WholeNumber(1, 1000000));
  app.add_option("--streams", o->streams, "streams in total; the update is spread over them")
      ->capture_default_str()
      ->check(WholeNumber(1, 64));
  app.add_option("--seed", o->seed, "seed of the weights and the synthetic data")
      ->capture_default_str()
      ->check(WholeNumber(0, UINT64_MAX));
  app.add_flag("--async-alloc", o->async_alloc,
               "allocate activations with cuMemAllocAsync/cuMemFreeAsync on the compute stream");
  app.add_flag("--recompute", o->recompute,
               "register each layer's output as recomputable by its forward kernel (gswap.h); "
               "without gswap it changes nothing");
  app.add_option("--module", o->module,
                 "kernel module to load instead of the default (host module on simcuda, fatbin "
                 "otherwise)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);  // prints the reason and the usage hint
    return 2;
  }
  if (uint64_t(o->batch) * o->width > (uint64_t(1) << 31)) {
    std::fprintf(stderr, "minitrain: --batch x --width must be at most 2^31 elements\n");
    return 2;
  }
  return -1;
}

// Deterministic pseudo-random numbers: splitmix64 of (stream key, index), so every value is a
// pure function of the seed and its position and can be generated in any order.
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
float Uniform(uint64_t key, uint64_t index) {  // in [-1, 1)
  uint64_t r = Mix(key ^ Mix(index));
  return float(int64_t(r >> 40) - (int64_t(1) << 23)) / float(1 << 23);
}

uint64_t Fnv1a(const void* data, size_t n, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// Device allocations of the workload, with the byte count it holds at once (peak_bytes). Counted
// at the call, in program order, so the figure does not depend on timing.
class DeviceMemory {
 public:
  CUdeviceptr Alloc(size_t bytes) {
    CUdeviceptr p = 0;
    MT_CU(drv().cuMemAlloc(&p, bytes));
    Track(p, bytes);
    return p;
  }
  CUdeviceptr AllocAsync(size_t bytes, CUstream s) {
    CUdeviceptr p = 0;
    MT_CU(drv().cuMemAllocAsync(&p, bytes, s));
    Track(p, bytes);
    return p;
  }
  void Free(CUdeviceptr p) {
    Untrack(p);
    MT_CU(drv().cuMemFree(p));
  }
  void FreeAsync(CUdeviceptr p, CUstream s) {
    Untrack(p);
    MT_CU(drv().cuMemFreeAsync(p, s));
  }
  uint64_t peak() const { return peak_; }

 private:
  void Track(CUdeviceptr p, size_t bytes) {
    sizes_[p] = bytes;
    live_ += bytes;
    peak_ = std::max(peak_, live_);
  }
  void Untrack(CUdeviceptr p) {
    auto it = sizes_.find(p);
    if (it == sizes_.end()) {
      std::fprintf(stderr, "minitrain: internal error: freeing unknown pointer 0x%llx\n",
                   (unsigned long long)p);
      std::abort();
    }
    live_ -= it->second;
    sizes_.erase(it);
  }
  std::unordered_map<CUdeviceptr, size_t> sizes_;
  uint64_t live_ = 0;
  uint64_t peak_ = 0;
};

struct Kernels {
#define MT_KERNEL_MEMBER(name, args) CUfunction name = nullptr;
  MT_KERNEL_LIST(MT_KERNEL_MEMBER)
#undef MT_KERNEL_MEMBER
};

// Checks that a loaded kernel takes exactly the parameters minitrain_kernels.h declares, so a
// stale or mismatched module fails here with a clear message rather than computing garbage.
bool ParamsMatch(CUfunction f, const char* name, const size_t* offsets, const size_t* sizes,
                 size_t n) {
  for (size_t i = 0; i <= n; ++i) {
    size_t off = 0, size = 0;
    CUresult rc = drv().cuFuncGetParamInfo(f, i, &off, &size);
    if (i == n) {
      if (rc == CUDA_SUCCESS) {
        std::fprintf(stderr, "minitrain: kernel %s has more than %zu parameters\n", name, n);
        return false;
      }
      break;
    }
    MT_CU(rc);
    if (off != offsets[i] || size != sizes[i]) {
      std::fprintf(stderr,
                   "minitrain: kernel %s parameter %zu is at offset %zu size %zu, expected offset "
                   "%zu size %zu\n",
                   name, i, off, size, offsets[i], sizes[i]);
      return false;
    }
  }
  return true;
}

Kernels LoadKernels(CUmodule module) {
  Kernels k;
  bool ok = true;
#define MT_PARAM_OFFSET(type, field) offsetof(type, field),
#define MT_PARAM_SIZE(type, field) MT_FIELD_SIZE(type, field),
#define MT_KERNEL_LOAD(name, args)                                                           \
  {                                                                                          \
    MT_CU(drv().cuModuleGetFunction(&k.name, module, #name));                                \
    const size_t offsets[] = {MT_PARAMS_##name(MT_PARAM_OFFSET)};                            \
    const size_t sizes[] = {MT_PARAMS_##name(MT_PARAM_SIZE)};                                \
    ok = ParamsMatch(k.name, #name, offsets, sizes, sizeof(offsets) / sizeof(size_t)) && ok; \
  }
  MT_KERNEL_LIST(MT_KERNEL_LOAD)
#undef MT_KERNEL_LOAD
#undef MT_PARAM_SIZE
#undef MT_PARAM_OFFSET
  if (!ok) std::exit(1);
  return k;
}

struct Dims {
  unsigned x = 1, y = 1;
};

// One Launch overload per kernel: kernelParams points at the fields of the argument struct, so
// the types and their order come from minitrain_kernels.h and cannot drift from the modules.
#define MT_ARG_PTR(type, field) const_cast<void*>(static_cast<const void*>(&a.field)),
#define MT_DEFINE_LAUNCH(name, args)                                                         \
  void Launch(const Kernels& k, CUstream s, Dims grid, Dims block, const args& a) {          \
    void* params[] = {MT_PARAMS_##name(MT_ARG_PTR)};                                         \
    MT_CU(drv().cuLaunchKernel(k.name, grid.x, grid.y, 1, block.x, block.y, 1, 0, s, params, \
                               nullptr));                                                    \
  }
MT_KERNEL_LIST(MT_DEFINE_LAUNCH)
#undef MT_DEFINE_LAUNCH
#undef MT_ARG_PTR

unsigned Blocks(uint64_t count, unsigned per_block) {
  return unsigned(std::min<uint64_t>((count + per_block - 1) / per_block, 1u << 20));
}
Dims ProductGrid(uint32_t rows, uint32_t cols) {
  return Dims{(cols + kTile - 1) / kTile, (rows + kTile - 1) / kTile};
}
constexpr Dims kProductBlock{kTile, kTile};

float* F(CUdeviceptr p) {
  return reinterpret_cast<float*>(static_cast<uintptr_t>(p));
}

std::string ExecutableDir() {
  std::vector<char> buf(4096);
  ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) return ".";
  std::string path(buf.data(), size_t(n));
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

// gswap's registration functions, when the program runs under gswap with a compatible API.
struct GswapApi {
  decltype(&gswap_register_recompute) register_recompute = nullptr;
  decltype(&gswap_unregister_recompute) unregister_recompute = nullptr;

  static GswapApi Find() {
    GswapApi api;
    auto check = reinterpret_cast<decltype(&gswap_check_version)>(
        dlsym(RTLD_DEFAULT, "gswap_check_version"));
    if (!check || check(GSWAP_API_VERSION) != GSWAP_OK) return api;
    api.register_recompute = reinterpret_cast<decltype(&gswap_register_recompute)>(
        dlsym(RTLD_DEFAULT, "gswap_register_recompute"));
    api.unregister_recompute = reinterpret_cast<decltype(&gswap_unregister_recompute)>(
        dlsym(RTLD_DEFAULT, "gswap_unregister_recompute"));
    return api;
  }
};

// What recomputes one layer's output: its forward kernel, on the stream gswap names.
struct Recipe {
  CUfunction kernel = nullptr;
  mt_linear_fwd_args args{};  // args.y is the output being recomputed
  unsigned calls = 0;
};

int RecomputeLayer(void* ctx, unsigned long long dst, unsigned long long, void* stream) {
  auto* r = static_cast<Recipe*>(ctx);
  ++r->calls;
  mt_linear_fwd_args a = r->args;
  a.y = reinterpret_cast<float*>(static_cast<uintptr_t>(dst));
  void* params[] = {&a.x, &a.w, &a.b, &a.y, &a.m, &a.k, &a.n, &a.relu};
  const unsigned tile = 16;
  CUresult e =
      drv().cuLaunchKernel(r->kernel, (a.n + tile - 1) / tile, (a.m + tile - 1) / tile, 1, tile,
                           tile, 1, 0, static_cast<CUstream>(stream), params, nullptr);
  return e == CUDA_SUCCESS ? 0 : static_cast<int>(e);
}

struct Layer {
  CUdeviceptr w = 0, b = 0, dw = 0, db = 0;
  CUevent grad_ready = nullptr, update_done = nullptr;
  bool update_pending = false;  // an update on another stream that the next forward must wait for
};

int Run(const Options& o) {
  std::string error;
  if (!LoadDriver(&error)) {
    std::fprintf(stderr, "minitrain: %s\n", error.c_str());
    return 1;
  }
  const Driver& d = drv();
  MT_CU(d.cuInit(0));
  int count = 0;
  MT_CU(d.cuDeviceGetCount(&count));
  if (count < 1) {
    std::fprintf(stderr, "minitrain: no CUDA device\n");
    return 1;
  }
  CUdevice dev = 0;
  MT_CU(d.cuDeviceGet(&dev, 0));
  char name[256] = {};
  MT_CU(d.cuDeviceGetName(name, sizeof name - 1, dev));
  CUcontext ctx = nullptr;
  MT_CU(d.cuDevicePrimaryCtxRetain(&ctx, dev));
  MT_CU(d.cuCtxSetCurrent(ctx));

  const bool simulated =
      std::strncmp(name, SIMCUDA_DEVICE_NAME_PREFIX, std::strlen(SIMCUDA_DEVICE_NAME_PREFIX)) == 0;
  std::string module_path = o.module;
  if (module_path.empty())
    module_path =
        ExecutableDir() + (simulated ? "/libminitrain_kernels.so" : "/minitrain_kernels.fatbin");
  std::printf("device: %s\nmodule: %s\n", name, module_path.c_str());
  CUmodule module = nullptr;
  MT_CU(d.cuModuleLoad(&module, module_path.c_str()));
  const Kernels k = LoadKernels(module);

  std::vector<CUstream> streams(o.streams);
  for (auto& s : streams) MT_CU(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUstream s0 = streams[0];

  const uint32_t L = o.layers, W = o.width, B = o.batch;
  const uint64_t act_count = uint64_t(B) * W;
  const size_t act_bytes = act_count * sizeof(float);
  const size_t w_bytes = size_t(W) * W * sizeof(float);
  const size_t b_bytes = size_t(W) * sizeof(float);
  DeviceMemory mem;

  // Parameters and gradients: one allocation each, for the whole run. He-style uniform weights
  // keep activations of a deep ReLU stack in range; biases start at zero.
  std::vector<Layer> layers(L);
  {
    std::vector<float> host(size_t(W) * W);
    const float scale = std::sqrt(6.0f / float(W));
    std::vector<float> zeros(W, 0.0f);
    for (uint32_t i = 0; i < L; ++i) {
      Layer& l = layers[i];
      l.w = mem.Alloc(w_bytes);
      l.b = mem.Alloc(b_bytes);
      l.dw = mem.Alloc(w_bytes);
      l.db = mem.Alloc(b_bytes);
      const uint64_t key = Mix(o.seed ^ Mix(0x5745494748545300ull + i));  // per-layer stream
      for (size_t j = 0; j < host.size(); ++j) host[j] = scale * Uniform(key, j);
      MT_CU(d.cuMemcpyHtoD(l.w, host.data(), w_bytes));
      MT_CU(d.cuMemcpyHtoD(l.b, zeros.data(), b_bytes));
      MT_CU(d.cuEventCreate(&l.grad_ready, CU_EVENT_DISABLE_TIMING));
      MT_CU(d.cuEventCreate(&l.update_done, CU_EVENT_DISABLE_TIMING));
    }
  }
  CUdeviceptr loss_d = mem.Alloc(sizeof(float));

  // Pinned staging: two input/target buffers so the host fills the next batch while the device
  // still works on this one, and one word for the loss.
  void* host_xy[2] = {nullptr, nullptr};
  for (auto& h : host_xy) MT_CU(d.cuMemAllocHost(&h, 2 * act_bytes));
  void* host_loss = nullptr;
  MT_CU(d.cuMemAllocHost(&host_loss, sizeof(float)));

  // The synthetic task: targets are a fixed linear mix of the inputs, so the loss can fall.
  auto fill_batch = [&](uint32_t iter, float* xy) {
    float* x = xy;
    float* y = xy + act_count;
    const uint64_t key = Mix(o.seed ^ Mix(0x42415443480000ull + iter));
    for (uint64_t j = 0; j < act_count; ++j) x[j] = Uniform(key, j);
    for (uint32_t r = 0; r < B; ++r) {
      const float* xr = x + size_t(r) * W;
      float* yr = y + size_t(r) * W;
      for (uint32_t c = 0; c < W; ++c) yr[c] = 0.5f * xr[(uint64_t(c) * 7 + 3) % W] - 0.25f * xr[c];
    }
  };
  auto alloc_act = [&]() {
    return o.async_alloc ? mem.AllocAsync(act_bytes, s0) : mem.Alloc(act_bytes);
  };
  auto free_act = [&](CUdeviceptr p) {
    if (o.async_alloc)
      mem.FreeAsync(p, s0);
    else
      mem.Free(p);
  };

  const auto start = std::chrono::steady_clock::now();
  auto step_start = start;
  std::vector<double> steps;
  fill_batch(0, static_cast<float*>(host_xy[0]));
  std::vector<CUdeviceptr> act(L + 1);  // act[0] is the input, act[i] the output of layer i
  GswapApi gswap = o.recompute ? GswapApi::Find() : GswapApi{};
  if (o.recompute)
    std::printf("recompute: %s\n", gswap.register_recompute
                                       ? "layer outputs registered with gswap"
                                       : "gswap not loaded (or another API version): nothing "
                                         "registered");
  std::vector<Recipe> recipes(L + 1);
  uint64_t registered = 0;
  for (uint32_t it = 0; it < o.iters; ++it) {
    float* xy = static_cast<float*>(host_xy[it % 2]);
    act[0] = alloc_act();
    CUdeviceptr target = alloc_act();
    MT_CU(d.cuMemcpyHtoDAsync(act[0], xy, act_bytes, s0));
    MT_CU(d.cuMemcpyHtoDAsync(target, xy + act_count, act_bytes, s0));

    for (uint32_t i = 1; i <= L; ++i) {
      Layer& l = layers[i - 1];
      if (l.update_pending) MT_CU(d.cuStreamWaitEvent(s0, l.update_done, 0));
      l.update_pending = false;
      act[i] = alloc_act();
      const mt_linear_fwd_args fwd{F(act[i - 1]),  F(l.w), F(l.b), F(act[i]), B, W, W,
                                   i < L ? 1u : 0u};
      Launch(k, s0, ProductGrid(B, W), kProductBlock, fwd);
      if (gswap.register_recompute) {
        recipes[i].kernel = k.mt_linear_fwd;
        recipes[i].args = fwd;
        const unsigned long long sources[] = {act[i - 1], l.w, l.b};
        // A refusal (an allocation gswap does not manage, such as a small one) leaves the
        // activation to be swapped: nothing else changes.
        if (gswap.register_recompute(act[i], act_bytes, sources, 3, 0, RecomputeLayer,
                                     &recipes[i]) == GSWAP_OK)
          ++registered;
      }
    }

    Launch(k, s0, Dims{1}, Dims{kLossThreads},
           mt_loss_args{F(act[L]), F(target), F(loss_d), act_count});
    MT_CU(d.cuMemcpyDtoHAsync(host_loss, loss_d, sizeof(float), s0));
    CUdeviceptr grad = alloc_act();  // gradient of the loss with respect to act[L]
    Launch(k, s0, Dims{Blocks(act_count, kElementwiseThreads)}, Dims{kElementwiseThreads},
           mt_loss_grad_args{F(act[L]), F(target), F(grad), act_count, 2.0f / float(act_count)});
    free_act(target);

    for (uint32_t i = L; i >= 1; --i) {
      Layer& l = layers[i - 1];
      if (i < L) {  // hidden layers end in ReLU; the saved output gives its mask
        Launch(k, s0, Dims{Blocks(act_count, kElementwiseThreads)}, Dims{kElementwiseThreads},
               mt_relu_bwd_args{F(grad), F(act[i]), act_count});
      }
      free_act(act[i]);  // last use: the mask above, or the loss for the output layer
      Launch(k, s0, ProductGrid(W, W), kProductBlock,
             mt_grad_weight_args{F(act[i - 1]), F(grad), F(l.dw), B, W, W});
      Launch(k, s0, Dims{Blocks(W, kElementwiseThreads)}, Dims{kElementwiseThreads},
             mt_grad_bias_args{F(grad), F(l.db), B, W});
      CUdeviceptr grad_in = 0;
      if (i > 1) {
        grad_in = alloc_act();
        Launch(k, s0, ProductGrid(B, W), kProductBlock,
               mt_grad_input_args{F(grad), F(l.w), F(grad_in), B, W, W});
      }
      free_act(grad);
      grad = grad_in;

      // SGD for this layer, on stream i % S once its gradients and every read of W_i are done.
      CUstream us = streams[i % o.streams];
      if (us != s0) {
        MT_CU(d.cuEventRecord(l.grad_ready, s0));
        MT_CU(d.cuStreamWaitEvent(us, l.grad_ready, 0));
      }
      const uint64_t wn = uint64_t(W) * W;
      Launch(k, us, Dims{Blocks(wn, kElementwiseThreads)}, Dims{kElementwiseThreads},
             mt_sgd_args{F(l.w), F(l.dw), wn, kLearningRate});
      Launch(k, us, Dims{Blocks(W, kElementwiseThreads)}, Dims{kElementwiseThreads},
             mt_sgd_args{F(l.b), F(l.db), W, kLearningRate});
      if (us != s0) {
        MT_CU(d.cuEventRecord(l.update_done, us));
        l.update_pending = true;
      }
    }
    free_act(act[0]);

    // Prepare the next batch while the device finishes this iteration; its buffer was last read
    // by the previous iteration's copies, which completed before that iteration's loss arrived.
    if (it + 1 < o.iters) fill_batch(it + 1, static_cast<float*>(host_xy[(it + 1) % 2]));
    MT_CU(d.cuStreamSynchronize(s0));
    float loss = 0;
    std::memcpy(&loss, host_loss, sizeof loss);
    std::printf("loss: iter %u %.9g\n", it, double(loss));
    const auto now = std::chrono::steady_clock::now();
    steps.push_back(std::chrono::duration<double>(now - step_start).count());
    step_start = now;
    std::printf("step_seconds: iter %u %.6f\n", it, steps.back());
    std::fflush(stdout);
  }
  MT_CU(d.cuCtxSynchronize());
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  // Checksum of the final parameters, layer by layer, weights then bias.
  uint64_t h = 0xcbf29ce484222325ull;
  {
    std::vector<float> host(size_t(W) * W);
    for (const Layer& l : layers) {
      MT_CU(d.cuMemcpyDtoH(host.data(), l.w, w_bytes));
      h = Fnv1a(host.data(), w_bytes, h);
      MT_CU(d.cuMemcpyDtoH(host.data(), l.b, b_bytes));
      h = Fnv1a(host.data(), b_bytes, h);
    }
  }

  for (Layer& l : layers) {
    mem.Free(l.w);
    mem.Free(l.b);
    mem.Free(l.dw);
    mem.Free(l.db);
    MT_CU(d.cuEventDestroy(l.grad_ready));
    MT_CU(d.cuEventDestroy(l.update_done));
  }
  mem.Free(loss_d);
  for (auto& hbuf : host_xy) MT_CU(d.cuMemFreeHost(hbuf));
  MT_CU(d.cuMemFreeHost(host_loss));
  for (auto& s : streams) MT_CU(d.cuStreamDestroy(s));
  MT_CU(d.cuModuleUnload(module));
  MT_CU(d.cuDevicePrimaryCtxRelease(dev));

  std::printf("train_seconds: %.3f\n", elapsed);
  // The median step of the second half of the run: steady state, after any warm-up (a gswapd
  // measuring the first iterations and planning).
  if (steps.size() >= 2) {
    std::vector<double> tail(steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2),
                             steps.end());
    std::sort(tail.begin(), tail.end());
    std::printf("steady_step_seconds: %.6f\n", tail[tail.size() / 2]);
  }
  if (o.recompute) {
    unsigned long long recomputed = 0;
    for (const Recipe& r : recipes) recomputed += r.calls;
    std::printf("recompute_registered: %llu\nrecompute_calls: %llu\n",
                (unsigned long long)registered, recomputed);
  }
  std::printf("peak_bytes: %llu\n", (unsigned long long)mem.peak());
  std::printf("checksum: %016llx\n", (unsigned long long)h);
  return 0;
}

}  // namespace
}  // namespace minitrain

int main(int argc, char** argv) {
  minitrain::Options o;
  int rc = minitrain::ParseOptions(argc, argv, &o);
  if (rc >= 0) return rc;
  return minitrain::Run(o);
}
