// corpus.cpp: the corpus generators. Convolutional models (VGG-16, U-Net) and the random
// iterations are written as a forward graph of operations; one generic backward walks it in
// reverse: each operation's backward reads the gradient of its output, its saved inputs and
// output and its weights, writes the gradients of its inputs (accumulating where an input feeds
// several operations, as a skip connection does) and of its weights, and then frees its output
// and that output's gradient, which nothing needs any more. The transformers reuse
// make_transformer.
#include "policy/corpus.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <map>
#include <random>
#include <string>

#include "policy/trace_builder.h"

namespace gswap::policy {
namespace {

using build::Builder;
using build::Param;

constexpr Precision kMixed{2, 2, 2, 4};  // bf16 weights and activations, fp32 moments

struct Op {
  std::string name;
  std::vector<RegionId> in;  // activations it reads (saved for its backward)
  RegionId out = 0;
  Param* param = nullptr;
  double flops = 0;
  double ws_bytes = 0;  // a workspace allocated around the kernel (and its backward kernels)
};

class Net {
 public:
  Net(Builder& b, Precision p, bool recompute) : b_(b), p_(p), recompute_(recompute) {}

  RegionId input(double bytes) {
    RegionId x = b_.alloc(bytes);
    b_.kernel("load_batch", 0, bytes, {x});
    inputs_.push_back(x);
    return x;
  }
  // One forward operation producing `out_bytes`; with `param_elems`, it owns a parameter.
  RegionId op(const std::string& name, std::vector<RegionId> in, double out_bytes, double flops,
              double param_elems = 0, double ws_bytes = 0) {
    Op o;
    o.name = name;
    o.in = in;
    o.flops = flops;
    o.ws_bytes = ws_bytes;
    if (param_elems > 0) {
      params_.push_back(build::make_param(b_, param_elems, p_));
      o.param = &params_.back();
    }
    std::vector<RegionId> sources = in;
    if (o.param) sources.push_back(o.param->w);
    double in_bytes = 0;
    for (RegionId r : in) in_bytes += static_cast<double>(b_.bytes(r));
    RegionId ws = ws_bytes > 0 ? b_.alloc(ws_bytes) : 0;
    o.out = b_.alloc(out_bytes);
    std::vector<RegionId> regs = sources;
    regs.push_back(o.out);
    if (ws) regs.push_back(ws);
    const double dur = b_.kernel(name + "_fwd", flops, in_bytes + out_bytes, regs);
    if (ws) b_.free(ws);
    if (recompute_) b_.region(o.out).recompute = Recompute{dur, sources};
    ops_.push_back(o);
    return o.out;
  }
  // Loss on `logits`, the backward of every operation in reverse, then the optimizer (one Adam
  // kernel per parameter, or one fused kernel over all of them). Weight-gradient kernels and the
  // optimizer run on `wgrad_stream`.
  void finish(RegionId logits, bool fused_optimizer, std::uint32_t wgrad_stream = 0) {
    std::map<RegionId, RegionId> grad;
    RegionId dl = b_.alloc(static_cast<double>(b_.bytes(logits)));
    b_.kernel("softmax_xent", 0, 3.0 * b_.bytes(logits), {logits, dl});
    grad[logits] = dl;
    for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
      const Op& o = *it;
      auto g = grad.find(o.out);
      if (g == grad.end()) {  // an output nothing read (cannot happen in these graphs)
        b_.free(o.out);
        continue;
      }
      const RegionId dy = g->second;
      RegionId ws = o.ws_bytes > 0 ? b_.alloc(o.ws_bytes) : 0;
      std::vector<RegionId> regs = {dy, o.out};
      double bytes = 2.0 * b_.bytes(dy);
      for (RegionId x : o.in) {
        if (std::find(inputs_.begin(), inputs_.end(), x) != inputs_.end()) continue;
        auto [gx, fresh] = grad.try_emplace(x, 0);
        if (fresh) gx->second = b_.alloc(static_cast<double>(b_.bytes(x)));
        regs.push_back(gx->second);
        bytes += 2.0 * b_.bytes(x);
      }
      if (o.param) regs.push_back(o.param->w);
      if (ws) regs.push_back(ws);
      b_.kernel(o.name + (o.param ? "_dgrad" : "_bwd"), o.flops, bytes, regs);
      if (o.param) {
        std::vector<RegionId> wr = {dy, o.param->g};
        double wb = static_cast<double>(b_.bytes(dy));
        for (RegionId x : o.in) wr.push_back(x), wb += static_cast<double>(b_.bytes(x));
        if (ws) wr.push_back(ws);
        b_.stream(wgrad_stream);
        b_.kernel(o.name + "_wgrad", o.flops, wb, wr);
        b_.stream(0);
      }
      if (ws) b_.free(ws);
      b_.free(dy);
      b_.free(o.out);
      grad.erase(g);
    }
    for (auto& [x, gx] : grad) b_.free(gx);  // gradients of inputs nobody reads
    for (RegionId x : inputs_) b_.free(x);
    b_.stream(wgrad_stream);
    std::vector<Param> ps(params_.begin(), params_.end());
    if (fused_optimizer) {
      std::vector<RegionId> regs;
      double elems = 0;
      for (const Param& q : ps) regs.insert(regs.end(), {q.w, q.g, q.m, q.v}), elems += q.elems;
      b_.kernel("multi_tensor_adam", 10 * elems, (2 * p_.weight + p_.grad + 4 * p_.moment) * elems,
                regs);
    } else {
      build::adam(b_, ps, p_);
    }
    b_.stream(0);
  }

 private:
  Builder& b_;
  Precision p_;
  bool recompute_;
  std::deque<Param> params_;  // stable addresses for Op::param
  std::vector<Op> ops_;
  std::vector<RegionId> inputs_;
};

double conv_flops(double n, double hw, double cin, double cout, int k) {
  return 2 * n * hw * hw * cin * cout * k * k;
}

}  // namespace

Trace without_recompute(Trace t) {
  for (Region& r : t.regions) r.recompute.reset();
  return t;
}

Trace make_vgg16(int batch, const H100Rates& rates) {
  Builder b(rates);
  Net net(b, kMixed, true);
  const double n = batch, A = kMixed.act;
  double c = 3, hw = 224;
  RegionId x = net.input(n * c * hw * hw * A);
  const int cfg[] = {64, 64, 0, 128, 128, 0, 256, 256, 256, 0, 512, 512, 512, 0, 512, 512, 512, 0};
  for (int co : cfg) {
    if (co == 0) {
      hw /= 2;
      x = net.op("maxpool", {x}, n * c * hw * hw * A, 0);
      continue;
    }
    x = net.op("conv3x3_relu", {x}, n * co * hw * hw * A, conv_flops(n, hw, c, co, 3), c * co * 9,
               64ull << 20);
    c = co;
  }
  double in = c * hw * hw;
  for (double out : {4096.0, 4096.0, 1000.0}) {
    x = net.op(out == 1000 ? "fc" : "fc_relu", {x}, n * out * A, 2 * n * in * out, in * out);
    in = out;
  }
  net.finish(x, false);
  return b.finish();
}

Trace make_vit_b16(int batch, const H100Rates& rates, int layers) {
  TransformerConfig c;
  c.name = "vit-b16";
  c.layers = layers, c.hidden = 768, c.heads = 12, c.seq = 197, c.batch = batch, c.vocab = 1000;
  c.patch = 16;
  c.precision = kMixed;
  return make_transformer(c, rates);
}

Trace make_unet(int batch, const H100Rates& rates) {
  Builder b(rates);
  Net net(b, kMixed, true);
  const double n = batch, A = kMixed.act;
  double c = 3, hw = 256;
  RegionId x = net.input(n * c * hw * hw * A);
  auto conv = [&](RegionId in, double cin, double cout, std::vector<RegionId> more = {}) {
    std::vector<RegionId> ins = {in};
    ins.insert(ins.end(), more.begin(), more.end());
    return net.op("conv3x3_bn_relu", ins, n * cout * hw * hw * A, conv_flops(n, hw, cin, cout, 3),
                  cin * cout * 9, 64ull << 20);
  };
  std::vector<std::pair<RegionId, double>> skips;
  for (double co : {64.0, 128.0, 256.0, 512.0}) {
    x = conv(x, c, co);
    x = conv(x, co, co);
    c = co;
    skips.push_back({x, c});  // kept until the decoder concatenates it
    hw /= 2;
    x = net.op("maxpool", {x}, n * c * hw * hw * A, 0);
  }
  x = conv(x, c, 1024);
  x = conv(x, 1024, 1024);
  c = 1024;
  for (auto it = skips.rbegin(); it != skips.rend(); ++it) {
    hw *= 2;
    const double co = it->second;
    x = net.op("upconv2x2", {x}, n * co * hw * hw * A, conv_flops(n, hw, c, co, 2), c * co * 4);
    // The concatenation is read directly by the first decoder convolution (2*co channels).
    x = conv(x, 2 * co, co, {it->first});
    x = conv(x, co, co);
    c = co;
  }
  x = net.op("conv1x1", {x}, n * 2 * hw * hw * 4, conv_flops(n, hw, c, 2, 1), c * 2);
  net.finish(x, false);
  return b.finish();
}

Trace make_optimizer_heavy(const H100Rates& rates) {
  TransformerConfig c;
  c.name = "optimizer-heavy";
  c.layers = 24, c.hidden = 1024, c.heads = 16, c.seq = 512, c.batch = 1, c.vocab = 50257;
  return make_transformer(c, rates);
}

Trace make_two_stream_bert(const H100Rates& rates) {
  Trace t = make_bert_large(8, rates);
  for (Launch& l : t.launches)
    if (l.kernel.find("wgrad") != std::string::npos || l.kernel == "adam_step") l.stream = 1;
  return t;
}

Trace make_random_training(std::uint64_t seed, const RandomTrainingOptions& o) {
  std::mt19937_64 rng(seed);
  auto uni = [&](double lo, double hi) {
    return std::uniform_real_distribution<double>(lo, hi)(rng);
  };
  auto chance = [&](double p) { return uni(0, 1) < p; };
  H100Rates rates;
  rates.link_bytes_per_s = uni(12e9, 64e9);
  rates.tensor_flops_per_s = uni(100e12, 800e12);
  const Precision p = chance(0.5) ? kMixed : Precision{};
  const int mode = static_cast<int>(rng() % 3);  // 0: none, 1: all, 2: some recomputable
  const bool recompute = o.allow_recompute && mode != 0;
  const bool two_streams = o.allow_two_streams && chance(0.3);
  Builder b(rates);
  Net net(b, p, recompute);
  const int layers = o.min_layers + static_cast<int>(rng() % (o.max_layers - o.min_layers + 1));
  const double mib = 1 << 20;
  auto act = [&] {  // log-uniform activation size
    const double lo = std::log(static_cast<double>(o.min_act_mib));
    const double hi = std::log(static_cast<double>(o.max_act_mib));
    return std::round(std::exp(uni(lo, hi))) * mib;
  };
  RegionId x = net.input(act());
  std::vector<RegionId> skips;  // outputs kept for a later long skip
  for (int l = 0; l < layers; ++l) {
    const double out = act();
    const double work = uni(1e9, 2e11);
    switch (rng() % 5) {
      case 0:  // linear / convolution with a parameter
        x = net.op("gemm", {x}, out, work, std::round(uni(0.1, 64)) * mib / p.weight,
                   chance(0.3) ? 32 * mib : 0);
        break;
      case 1: {  // attention: a large score tensor, then its softmax, then the weighted sum
        RegionId qkv = net.op("gemm_qkv", {x}, 3 * out, work, std::round(uni(1, 32)) * mib);
        RegionId probs = net.op("qk_softmax", {qkv}, out * uni(2, 8), work / 4);
        x = net.op("gemm_av", {probs, qkv}, out, work / 4);
        break;
      }
      case 2:  // elementwise
        x = net.op("elementwise", {x}, static_cast<double>(b.bytes(x)), 0);
        break;
      case 3: {  // residual block
        RegionId y = net.op("gemm", {x}, static_cast<double>(b.bytes(x)), work,
                            std::round(uni(0.1, 32)) * mib / p.weight);
        x = net.op("add", {y, x}, static_cast<double>(b.bytes(x)), 0);
        break;
      }
      default:  // keep this output for a long skip, or consume one
        if (!skips.empty() && chance(0.5)) {
          RegionId s = skips.back();
          skips.pop_back();
          x = net.op("concat_gemm", {x, s}, out, work, std::round(uni(0.1, 16)) * mib / p.weight);
        } else {
          skips.push_back(x);
          x = net.op("elementwise", {x}, out, 0);
        }
    }
    if (mode == 2 && recompute && chance(0.5)) b.region(x).recompute.reset();
  }
  for (RegionId s : skips) x = net.op("concat_gemm", {x, s}, act(), uni(1e9, 2e11), 1 * mib);
  x = net.op("head", {x}, act(), uni(1e9, 1e11), std::round(uni(1, 64)) * mib / p.weight);
  net.finish(x, chance(0.5), two_streams ? 1 : 0);
  return b.finish();
}

std::vector<CorpusTrace> corpus(bool small, int random_count) {
  std::vector<CorpusTrace> out;
  auto add = [&](std::string name, Trace t) {
    out.push_back({name + "/swap-only", without_recompute(t)});
    out.push_back({std::move(name), std::move(t)});
  };
  if (small) {
    add("resnet50-b32", make_resnet50(32));
    TransformerConfig c;
    c.name = "gpt2-2l";
    c.layers = 2, c.hidden = 1024, c.heads = 16, c.seq = 1024, c.batch = 2, c.vocab = 50257;
    add(c.name, make_transformer(c));
    add("vgg16-b8", make_vgg16(8));
    add("vit-b16-b16", make_vit_b16(16));
    add("unet-b2", make_unet(2));
    add("two-stream-bert", make_two_stream_bert());
  } else {
    add("resnet50", make_resnet50());
    add("bert-large", make_bert_large());
    add("gpt2-medium", make_gpt2_medium());
    add("vgg16", make_vgg16(64));
    add("vit-b16", make_vit_b16(64));
    add("unet", make_unet(16));
    add("two-stream-bert", make_two_stream_bert());
  }
  add("optimizer-heavy", make_optimizer_heavy());
  for (int k = 0; k < random_count; ++k) {
    Trace t = make_random_training(1000 + static_cast<std::uint64_t>(k));
    out.push_back({"random:" + std::to_string(1000 + k), std::move(t)});
  }
  return out;
}

std::vector<std::string_view> corpus_trace_names() {
  return {"vgg16", "vit-b16", "unet", "optimizer-heavy", "two-stream-bert", "random:SEED"};
}

std::optional<Trace> corpus_trace(std::string_view name) {
  if (name == "vgg16") return make_vgg16();
  if (name == "vit-b16") return make_vit_b16();
  if (name == "unet") return make_unet();
  if (name == "optimizer-heavy") return make_optimizer_heavy();
  if (name == "two-stream-bert") return make_two_stream_bert();
  if (name.rfind("random:", 0) == 0) {
    std::uint64_t seed = 0;
    std::string_view digits = name.substr(7);
    if (digits.empty() || digits.size() > 18) return std::nullopt;
    for (char ch : digits) {
      if (ch < '0' || ch > '9') return std::nullopt;
      seed = seed * 10 + static_cast<std::uint64_t>(ch - '0');
    }
    return make_random_training(seed);
  }
  return std::nullopt;
}

}  // namespace gswap::policy
