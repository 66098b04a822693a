// shuffled_train.cpp: a second training workload, unlike minitrain in the ways that matter to a
// plan: its iterations allocate their activations in a different order every time, its layers
// may differ in width (regions of several sizes), it reconstructs its own input (the input lives
// from the first kernel to the loss), and it can change its shape mid-run. Results stay
// deterministic: the order of allocations changes addresses and allocation ids, never the math.
//
// Model: an MLP autoencoder through the CUDA driver API with minitrain's kernels
// (minitrain_kernels.h). `--dims D0,D1,...,DL` gives L linear layers (layer i maps Di to Di+1,
// ReLU after all but the last), D0 == DL, and the loss is the mean squared error between the output
// and the input. Every iteration:
//  - uploads a fresh batch (a pure function of --seed and the iteration) into its own allocation;
//  - forward: before layers i and i+1 run, both their outputs are allocated, in an order drawn
//    from the iteration's random stream (--order shuffled; --order fixed allocates in layer order),
//    so allocation ids, addresses and the allocation sequence differ from one iteration to the
//    next while every kernel sees the same values;
//  - loss (copied back), backward freeing each activation after its last use, SGD on stream 0.
// `--reshape-at N`: from iteration N on, the middle layer (index L/2, which must map a width to
// itself) is skipped, forward and backward: the program's iteration changes shape, as when a
// framework switches phases. Its weights keep their values. `--reshape-file PATH` does the same
// from the first iteration that starts once PATH exists, and prints `reshape: iter N` (a test
// changes the shape when it has seen what it waits for, then computes the reference with
// `--reshape-at N`).
//
// Output (the same lines as minitrain, so scripts read both): `loss: iter I V`,
// `step_seconds: iter I S`, `train_seconds`, `steady_step_seconds` (median of the second half),
// `peak_bytes` (bytes allocated at once, counted at the calls) and `checksum` (FNV-1a 64 of the
// final weights and biases).
//
// Threads: one. The driver table is loaded before anything else runs.
#include <simcuda.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_driver.h"
#include "minitrain_kernels.h"

using minitrain::drv;

namespace {

constexpr float kLearningRate = 0.5f;
constexpr unsigned kThreads = 256;
constexpr unsigned kTile = 16;

struct Options {
  std::vector<uint32_t> dims = {256, 256, 256, 256, 256, 256, 256};
  uint32_t batch = 2048;
  uint32_t iters = 10;
  uint64_t seed = 1;
  std::string order = "shuffled";
  uint32_t reshape_at = 0;  // 0: never
  std::string reshape_file;
  std::string module;
};

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
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}

int Parse(int argc, char** argv, Options* o) {
  CLI::App app{"shuffled_train: an MLP autoencoder whose iterations allocate in a new order"};
  std::string dims;
  app.add_option("--dims", dims, "layer widths D0,D1,...,DL (D0 == DL), default 7 x 256");
  app.add_option("--batch", o->batch, "rows per batch")->check(CLI::Range(1u, 262144u));
  app.add_option("--iters", o->iters, "training iterations")->check(CLI::Range(1u, 1000000u));
  app.add_option("--seed", o->seed, "seed of the weights and the data");
  app.add_option("--order", o->order, "allocation order of activations")
      ->check(CLI::IsMember({"fixed", "shuffled"}));
  app.add_option("--reshape-at", o->reshape_at,
                 "from this iteration on, skip the middle layer (0: never)");
  app.add_option(
      "--reshape-file", o->reshape_file,
      "skip the middle layer from the first iteration that starts once this file exists");
  app.add_option("--module", o->module, "kernel module to load instead of the default");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  if (!dims.empty()) {
    o->dims.clear();
    std::stringstream ss(dims);
    std::string item;
    while (std::getline(ss, item, ',')) {
      char* end = nullptr;
      unsigned long v = std::strtoul(item.c_str(), &end, 10);
      if (item.empty() || *end || v < 1 || v > 16384) {
        std::fprintf(stderr, "shuffled_train: --dims: '%s' is not a width from 1 to 16384\n",
                     item.c_str());
        return 2;
      }
      o->dims.push_back(uint32_t(v));
    }
  }
  const size_t L = o->dims.size() - 1;
  if (o->dims.size() < 2 || o->dims.front() != o->dims.back()) {
    std::fprintf(stderr,
                 "shuffled_train: --dims needs two widths or more, the first equal to the "
                 "last (the output reconstructs the input)\n");
    return 2;
  }
  for (uint32_t d : o->dims)
    if (uint64_t(o->batch) * d > (uint64_t(1) << 31)) {
      std::fprintf(stderr, "shuffled_train: --batch x width must be at most 2^31 elements\n");
      return 2;
    }
  if ((o->reshape_at || !o->reshape_file.empty()) &&
      (L < 3 || o->dims[L / 2] != o->dims[L / 2 + 1])) {
    std::fprintf(stderr,
                 "shuffled_train: --reshape-at skips the middle layer, which needs 3 "
                 "layers or more and a middle layer that keeps its width\n");
    return 2;
  }
  return -1;
}

// Device allocations and the most bytes held at once, counted at the calls.
class DeviceMemory {
 public:
  CUdeviceptr Alloc(size_t bytes) {
    CUdeviceptr p = 0;
    MT_CU(drv().cuMemAlloc(&p, bytes));
    sizes_[p] = bytes;
    live_ += bytes;
    peak_ = std::max(peak_, live_);
    return p;
  }
  void Free(CUdeviceptr p) {
    live_ -= sizes_.at(p);
    sizes_.erase(p);
    MT_CU(drv().cuMemFree(p));
  }
  uint64_t peak() const { return peak_; }

 private:
  std::unordered_map<CUdeviceptr, size_t> sizes_;
  uint64_t live_ = 0, peak_ = 0;
};

struct Kernels {
#define SH_KERNEL_MEMBER(name, args) CUfunction name = nullptr;
  MT_KERNEL_LIST(SH_KERNEL_MEMBER)
#undef SH_KERNEL_MEMBER
};

struct Dims {
  unsigned x = 1, y = 1;
};

#define SH_ARG_PTR(type, field) const_cast<void*>(static_cast<const void*>(&a.field)),
#define SH_DEFINE_LAUNCH(name, args)                                                         \
  void Launch(const Kernels& k, CUstream s, Dims grid, Dims block, const args& a) {          \
    void* params[] = {MT_PARAMS_##name(SH_ARG_PTR)};                                         \
    MT_CU(drv().cuLaunchKernel(k.name, grid.x, grid.y, 1, block.x, block.y, 1, 0, s, params, \
                               nullptr));                                                    \
  }
MT_KERNEL_LIST(SH_DEFINE_LAUNCH)
#undef SH_DEFINE_LAUNCH
#undef SH_ARG_PTR

unsigned Blocks(uint64_t count) {
  return unsigned(std::min<uint64_t>((count + kThreads - 1) / kThreads, 1u << 20));
}
Dims Product(uint32_t rows, uint32_t cols) {
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

struct Layer {
  uint32_t in = 0, out = 0;
  CUdeviceptr w = 0, b = 0, dw = 0, db = 0;
};

int Run(const Options& o) {
  std::string error;
  if (!minitrain::LoadDriver(&error)) {
    std::fprintf(stderr, "shuffled_train: %s\n", error.c_str());
    return 1;
  }
  const auto& d = drv();
  MT_CU(d.cuInit(0));
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
  Kernels k;
#define SH_KERNEL_LOAD(kname, args) MT_CU(d.cuModuleGetFunction(&k.kname, module, #kname));
  MT_KERNEL_LIST(SH_KERNEL_LOAD)
#undef SH_KERNEL_LOAD
  CUstream s = nullptr;
  MT_CU(d.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

  const uint32_t B = o.batch;
  const size_t L = o.dims.size() - 1;
  DeviceMemory mem;
  std::vector<Layer> layers(L);
  for (size_t i = 0; i < L; ++i) {
    Layer& l = layers[i];
    l.in = o.dims[i];
    l.out = o.dims[i + 1];
    const size_t wb = size_t(l.in) * l.out * sizeof(float), bb = size_t(l.out) * sizeof(float);
    l.w = mem.Alloc(wb);
    l.b = mem.Alloc(bb);
    l.dw = mem.Alloc(wb);
    l.db = mem.Alloc(bb);
    std::vector<float> host(size_t(l.in) * l.out);
    const float scale = std::sqrt(6.0f / float(l.in + l.out));
    const uint64_t key = Mix(o.seed ^ Mix(0x5348554646000000ull + i));
    for (size_t j = 0; j < host.size(); ++j) host[j] = scale * Uniform(key, j);
    MT_CU(d.cuMemcpyHtoD(l.w, host.data(), wb));
    std::vector<float> zeros(l.out, 0.0f);
    MT_CU(d.cuMemcpyHtoD(l.b, zeros.data(), bb));
  }
  CUdeviceptr loss_d = mem.Alloc(sizeof(float));
  const uint64_t in_count = uint64_t(B) * o.dims[0];
  void* host_x = nullptr;
  MT_CU(d.cuMemAllocHost(&host_x, in_count * sizeof(float)));
  void* host_loss = nullptr;
  MT_CU(d.cuMemAllocHost(&host_loss, sizeof(float)));

  const auto start = std::chrono::steady_clock::now();
  auto step_start = start;
  std::vector<double> steps;
  std::vector<CUdeviceptr> act(L + 1);
  uint32_t reshape_at = o.reshape_at;
  for (uint32_t it = 0; it < o.iters; ++it) {
    if (!reshape_at && it > 0 && !o.reshape_file.empty() &&
        access(o.reshape_file.c_str(), F_OK) == 0) {
      reshape_at = it;
      std::printf("reshape: iter %u\n", it);
    }
    // The layers this iteration runs.
    std::vector<size_t> run;
    for (size_t i = 0; i < L; ++i)
      if (!(reshape_at && it >= reshape_at && i == L / 2)) run.push_back(i);
    // The batch: uploaded after the device has finished with the previous one (the loss copy of
    // the previous iteration was waited for).
    const uint64_t key = Mix(o.seed ^ Mix(0x4241544348000000ull + it));
    float* x = static_cast<float*>(host_x);
    for (uint64_t j = 0; j < in_count; ++j) x[j] = Uniform(key, j);
    act[0] = mem.Alloc(in_count * sizeof(float));
    MT_CU(d.cuMemcpyHtoDAsync(act[0], host_x, in_count * sizeof(float), s));

    // Forward. out_of[r] is the activation layer run[r] writes.
    uint64_t order = Mix(o.seed ^ Mix(0x4f52444552000000ull + it));
    std::vector<CUdeviceptr> out_of(run.size());
    for (size_t r = 0; r < run.size(); ++r) {
      if (r % 2 == 0) {
        // Allocate this layer's output and the next one's, in the iteration's order.
        size_t n = std::min<size_t>(2, run.size() - r);
        bool swap = o.order == "shuffled" && n == 2 && ((order >> (r / 2 % 64)) & 1);
        for (size_t j = 0; j < n; ++j) {
          size_t q = r + (swap ? n - 1 - j : j);
          out_of[q] = mem.Alloc(uint64_t(B) * layers[run[q]].out * sizeof(float));
        }
      }
      const Layer& l = layers[run[r]];
      CUdeviceptr in = r == 0 ? act[0] : out_of[r - 1];
      Launch(k, s, Product(B, l.out), kProductBlock,
             mt_linear_fwd_args{F(in), F(l.w), F(l.b), F(out_of[r]), B, l.in, l.out,
                                r + 1 < run.size() ? 1u : 0u});
    }
    CUdeviceptr out = out_of.back();
    Launch(k, s, Dims{1}, Dims{kThreads}, mt_loss_args{F(out), F(act[0]), F(loss_d), in_count});
    MT_CU(d.cuMemcpyDtoHAsync(host_loss, loss_d, sizeof(float), s));
    CUdeviceptr grad = mem.Alloc(in_count * sizeof(float));
    Launch(k, s, Dims{Blocks(in_count)}, Dims{kThreads},
           mt_loss_grad_args{F(out), F(act[0]), F(grad), in_count, 2.0f / float(in_count)});

    // Backward, freeing every activation after its last use.
    for (size_t r = run.size(); r-- > 0;) {
      const Layer& l = layers[run[r]];
      const uint64_t out_count = uint64_t(B) * l.out;
      if (r + 1 < run.size())
        Launch(k, s, Dims{Blocks(out_count)}, Dims{kThreads},
               mt_relu_bwd_args{F(grad), F(out_of[r]), out_count});
      mem.Free(out_of[r]);
      CUdeviceptr in = r == 0 ? act[0] : out_of[r - 1];
      Launch(k, s, Product(l.in, l.out), kProductBlock,
             mt_grad_weight_args{F(in), F(grad), F(l.dw), B, l.in, l.out});
      Launch(k, s, Dims{Blocks(l.out)}, Dims{kThreads},
             mt_grad_bias_args{F(grad), F(l.db), B, l.out});
      CUdeviceptr grad_in = 0;
      if (r > 0) {
        grad_in = mem.Alloc(uint64_t(B) * l.in * sizeof(float));
        Launch(k, s, Product(B, l.in), kProductBlock,
               mt_grad_input_args{F(grad), F(l.w), F(grad_in), B, l.in, l.out});
      }
      mem.Free(grad);
      grad = grad_in;
      const uint64_t wn = uint64_t(l.in) * l.out;
      Launch(k, s, Dims{Blocks(wn)}, Dims{kThreads},
             mt_sgd_args{F(l.w), F(l.dw), wn, kLearningRate});
      Launch(k, s, Dims{Blocks(l.out)}, Dims{kThreads},
             mt_sgd_args{F(l.b), F(l.db), l.out, kLearningRate});
    }
    mem.Free(act[0]);
    MT_CU(d.cuStreamSynchronize(s));
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

  uint64_t h = 0xcbf29ce484222325ull;
  for (const Layer& l : layers) {
    std::vector<float> w(size_t(l.in) * l.out), b(l.out);
    MT_CU(d.cuMemcpyDtoH(w.data(), l.w, w.size() * sizeof(float)));
    MT_CU(d.cuMemcpyDtoH(b.data(), l.b, b.size() * sizeof(float)));
    h = Fnv1a(w.data(), w.size() * sizeof(float), h);
    h = Fnv1a(b.data(), b.size() * sizeof(float), h);
  }
  for (Layer& l : layers) {
    mem.Free(l.w);
    mem.Free(l.b);
    mem.Free(l.dw);
    mem.Free(l.db);
  }
  mem.Free(loss_d);
  MT_CU(d.cuMemFreeHost(host_x));
  MT_CU(d.cuMemFreeHost(host_loss));
  MT_CU(d.cuStreamDestroy(s));
  MT_CU(d.cuModuleUnload(module));
  MT_CU(d.cuDevicePrimaryCtxRelease(dev));

  std::printf("train_seconds: %.3f\n", elapsed);
  if (steps.size() >= 2) {
    std::vector<double> tail(steps.begin() + static_cast<std::ptrdiff_t>(steps.size() / 2),
                             steps.end());
    std::sort(tail.begin(), tail.end());
    std::printf("steady_step_seconds: %.6f\n", tail[tail.size() / 2]);
  }
  std::printf("peak_bytes: %llu\n", (unsigned long long)mem.peak());
  std::printf("checksum: %016llx\n", (unsigned long long)h);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int rc = Parse(argc, argv, &o);
  if (rc >= 0) return rc;
  return Run(o);
}
