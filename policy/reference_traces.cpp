// reference_traces.cpp: the generators. Activations are bf16 (2 bytes); parameters, gradients
// and the two Adam moments are fp32 (4 bytes each), as in mixed-precision training. Every
// forward output is registered as recomputable from its inputs at the cost of the kernel that
// produced it, which is what a framework with checkpointing hooks can offer.
#include "policy/reference_traces.h"

#include <algorithm>
#include <string>

#include "policy/trace_builder.h"

namespace gswap::policy {
namespace {

constexpr double kAct = 2;                 // bytes per activation element
constexpr double kParam = 4;               // bytes per parameter element
constexpr build::Precision kFp32Params{};  // bf16 activations, fp32 parameters and state

using build::Builder;
using build::Param;

Param make_param(Builder& b, double elems) {
  return build::make_param(b, elems, kFp32Params);
}
void adam(Builder& b, const std::vector<Param>& params) {
  build::adam(b, params, kFp32Params);
}

// ---- ResNet-50 ----

struct Act {
  RegionId id;
  double c, h, w;  // per image
};

struct ConvSaved {
  Act in;
  RegionId conv_out, out;  // pre-BN output and post-BN(-ReLU) output
  Param* p;
  int k, stride;
  double cout, ho, wo;
  bool relu;
};

class ResNet {
 public:
  ResNet(Builder& b, int batch) : b_(b), n_(batch) {}

  Trace run() {
    b_.persistent(32ull << 20);  // cuDNN/cuBLAS persistent workspace handle pool (not touched)
    Act x{b_.alloc(n_ * 3 * 224 * 224 * kAct), 3, 224, 224};
    b_.kernel("load_batch", 0, n_ * 3 * 224 * 224 * kAct, {x.id});
    Act y = conv_bn(x, 64, 7, 2, true);
    // Max pool 3x3/2.
    Act pool{0, 64, y.h / 2, y.w / 2};
    pool.id = b_.produce("maxpool_fwd", 0, n_ * 64 * pool.h * pool.w * kAct,
                         n_ * 64 * y.h * y.w * kAct, {y.id});
    pools_.push_back({y, pool});
    Act cur = pool;
    const int blocks[] = {3, 4, 6, 3};
    const double mids[] = {64, 128, 256, 512};
    for (int s = 0; s < 4; ++s)
      for (int k = 0; k < blocks[s]; ++k)
        cur = bottleneck(cur, mids[s], (k == 0 && s > 0) ? 2 : 1, k == 0);
    // Global average pool, fully connected, softmax cross-entropy.
    Act gap{0, cur.c, 1, 1};
    gap.id = b_.produce("avgpool_fwd", 0, n_ * cur.c * kAct, n_ * cur.c * cur.h * cur.w * kAct,
                        {cur.id});
    Param& fc = add_param(cur.c * 1000);
    RegionId logits = b_.produce("fc_fwd", 2 * n_ * cur.c * 1000, n_ * 1000 * 4, n_ * cur.c * kAct,
                                 {gap.id, fc.w});
    RegionId dlogits = b_.alloc(n_ * 1000 * 4);
    b_.kernel("softmax_xent", 0, 3 * n_ * 1000 * 4, {logits, dlogits});
    b_.free(logits);
    RegionId dgap = b_.alloc(n_ * cur.c * kAct);
    b_.kernel("fc_dgrad", 2 * n_ * cur.c * 1000, n_ * cur.c * kAct, {dlogits, fc.w, dgap});
    b_.kernel("fc_wgrad", 2 * n_ * cur.c * 1000, n_ * cur.c * kAct, {dlogits, gap.id, fc.g});
    b_.free(dlogits);
    b_.free(gap.id);
    RegionId d = b_.alloc(n_ * cur.c * cur.h * cur.w * kAct);
    b_.kernel("avgpool_bwd", 0, 2 * b_.bytes(d), {dgap, d});
    b_.free(dgap);
    // Backward through the blocks in reverse.
    for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it) d = bottleneck_bwd(*it, d);
    auto& [pin, pout] = pools_.back();
    RegionId dpin = b_.alloc(n_ * pin.c * pin.h * pin.w * kAct);
    b_.kernel("maxpool_bwd", 0, b_.bytes(d) + b_.bytes(dpin) + b_.bytes(pin.id), {d, pin.id, dpin});
    b_.free(d);
    b_.free(pout.id);
    d = conv_bwd(convs_.front(), dpin, /*need_dgrad=*/false);
    b_.free(convs_.front().in.id);  // the input batch
    adam(b_, params_);
    return b_.finish();
  }

 private:
  struct Block {
    std::vector<std::size_t> convs;  // indices into convs_, main path
    std::size_t down = SIZE_MAX;     // downsample conv
    Act in;
    RegionId out;
  };

  Param& add_param(double elems) {
    params_.push_back(make_param(b_, elems));
    return params_.back();
  }

  double conv_flops(const ConvSaved& c) {
    return 2 * n_ * c.ho * c.wo * c.cout * c.in.c * c.k * c.k;
  }

  // conv -> BN(+ReLU). The BN output is what the next layer reads and what the ReLU backward
  // needs; the raw conv output is kept for BN's backward.
  Act conv_bn(Act in, double cout, int k, int stride, bool relu, RegionId residual = 0) {
    params_.reserve(256);
    Param& p = add_param(cout * in.c * k * k);
    ConvSaved c{in, 0, 0, &p, k, stride, cout, in.h / stride, in.w / stride, relu};
    const double out_bytes = n_ * cout * c.ho * c.wo * kAct;
    RegionId ws = 0;
    if (k > 1) ws = b_.alloc(64ull << 20);  // implicit-GEMM workspace for spatial convolutions
    std::vector<RegionId> srcs = {in.id, p.w};
    c.conv_out = b_.alloc(out_bytes);
    std::vector<RegionId> regs = srcs;
    regs.push_back(c.conv_out);
    if (ws) regs.push_back(ws);
    double dur = b_.kernel("conv" + std::to_string(k) + "x" + std::to_string(k) + "_fwd",
                           conv_flops(c), b_.bytes(in.id) + out_bytes, regs);
    b_.region(c.conv_out).recompute = Recompute{dur, srcs};
    if (ws) b_.free(ws);
    std::vector<RegionId> bsrc = {c.conv_out};
    if (residual) bsrc.push_back(residual);
    c.out = b_.produce(residual ? "bn_add_relu_fwd" : (relu ? "bn_relu_fwd" : "bn_fwd"), 0,
                       out_bytes, out_bytes * (residual ? 2 : 1), bsrc);
    convs_.push_back(c);
    return {c.out, cout, c.ho, c.wo};
  }

  Act bottleneck(Act in, double mid, int stride, bool first) {
    Block blk;
    blk.in = in;
    RegionId shortcut = in.id;
    if (first) {
      Act sc = conv_bn(in, mid * 4, 1, stride, false);
      blk.down = convs_.size() - 1;
      shortcut = sc.id;
    }
    Act a = conv_bn(in, mid, 1, 1, true);
    blk.convs.push_back(convs_.size() - 1);
    Act b = conv_bn(a, mid, 3, stride, true);
    blk.convs.push_back(convs_.size() - 1);
    Act c = conv_bn(b, mid * 4, 1, 1, true, shortcut);
    blk.convs.push_back(convs_.size() - 1);
    blk.out = c.id;
    blocks_.push_back(blk);
    return c;
  }

  // Backward of conv->BN(+ReLU): d is the gradient of the BN output. Frees what is no longer
  // needed and returns the gradient of the conv input (0 when not needed).
  RegionId conv_bwd(const ConvSaved& c, RegionId d, bool need_dgrad) {
    const double out_bytes = b_.bytes(c.conv_out);
    RegionId dconv = b_.alloc(out_bytes);
    b_.kernel(c.relu ? "bn_relu_bwd" : "bn_bwd", 0, 4 * out_bytes, {d, c.conv_out, c.out, dconv});
    b_.free(d);
    b_.free(c.conv_out);
    b_.free(c.out);
    RegionId ws = c.k > 1 ? b_.alloc(64ull << 20) : 0;
    RegionId din = 0;
    if (need_dgrad) {
      din = b_.alloc(b_.bytes(c.in.id));
      std::vector<RegionId> regs = {dconv, c.p->w, din};
      if (ws) regs.push_back(ws);
      b_.kernel("conv_dgrad", conv_flops(c), out_bytes + b_.bytes(din), regs);
    }
    std::vector<RegionId> regs = {dconv, c.in.id, c.p->g};
    if (ws) regs.push_back(ws);
    b_.kernel("conv_wgrad", conv_flops(c), out_bytes + b_.bytes(c.in.id), regs);
    if (ws) b_.free(ws);
    b_.free(dconv);
    return din;
  }

  RegionId bottleneck_bwd(const Block& blk, RegionId d) {
    // d is the gradient of the block output (after add+ReLU); bn_add_relu_bwd in conv_bwd
    // splits it into the main-path gradient; the shortcut gradient is the same masked tensor.
    RegionId dshort = b_.alloc(b_.bytes(d));
    b_.kernel("relu_mask_bwd", 0, 2 * b_.bytes(d), {d, blk.out, dshort});
    RegionId g = d;
    for (auto it = blk.convs.rbegin(); it != blk.convs.rend(); ++it)
      g = conv_bwd(convs_[*it], g, true);
    RegionId dsc = dshort;
    if (blk.down != SIZE_MAX) dsc = conv_bwd(convs_[blk.down], dshort, true);
    RegionId din = b_.alloc(b_.bytes(g));
    b_.kernel("add_grad", 0, 3 * b_.bytes(din), {g, dsc, din});
    b_.free(g);
    b_.free(dsc);
    return din;
  }

  Builder& b_;
  double n_;
  std::vector<Param> params_;
  std::vector<ConvSaved> convs_;
  std::vector<Block> blocks_;
  std::vector<std::pair<Act, Act>> pools_;
};

}  // namespace

Trace make_resnet50(int batch, const H100Rates& rates) {
  Builder b(rates);
  return ResNet(b, batch).run();
}

Trace make_transformer(const TransformerConfig& c, const H100Rates& rates) {
  Builder b(rates);
  const Precision& pr = c.precision;
  const double kAct = pr.act;
  auto make_param = [&](Builder& bb, double elems) { return build::make_param(bb, elems, pr); };
  const bool vision = c.patch > 0;
  const double T = static_cast<double>(c.batch) * c.seq, h = c.hidden, S = c.seq;
  const double A = static_cast<double>(c.batch) * c.heads * S * S;  // attention matrix elements
  std::vector<Param> params;
  params.reserve(4 * c.layers + 2);
  // The tied token embedding, or the patch embedding of a vision transformer.
  params.push_back(make_param(b, vision ? 3.0 * c.patch * c.patch * h : c.vocab * h));
  params.push_back(make_param(b, S * h));  // positions
  const Param emb = params[0], pos = params[1];
  Param head{};
  if (vision) head = (params.push_back(make_param(b, h * c.vocab)), params.back());
  struct Layer {
    Param qkv, o, fc1, fc2;
    RegionId x, ln1, qkvo, probs, ctx, x2, ln2, f1, ge, x3;
  };
  std::vector<Layer> L(c.layers);
  for (auto& l : L) {
    l.qkv = (params.push_back(make_param(b, 3 * h * h)), params.back());
    l.o = (params.push_back(make_param(b, h * h)), params.back());
    l.fc1 = (params.push_back(make_param(b, 4 * h * h)), params.back());
    l.fc2 = (params.push_back(make_param(b, 4 * h * h)), params.back());
  }
  RegionId ws = b.persistent(32ull << 20);  // cuBLAS workspace, used by every GEMM
  const double act = T * h * kAct;
  RegionId image = 0;
  RegionId x = 0;
  if (vision) {
    const double pixels = (c.seq - 1.0) * c.patch * c.patch;  // one token per patch + class token
    image = b.alloc(c.batch * 3 * pixels * kAct);
    b.kernel("load_batch", 0, b.bytes(image), {image});
    x = b.alloc(act);
    b.kernel("patch_embed_fwd", 2 * T * h * 3 * c.patch * c.patch, b.bytes(image) + act,
             {image, emb.w, pos.w, x});
  } else {
    x = b.alloc(act);
    b.kernel("embedding_fwd", 0, 2 * act, {emb.w, pos.w, x});
  }
  for (auto& l : L) {
    l.x = x;
    l.ln1 = b.produce("layernorm_fwd", 0, act, act, {x});
    l.qkvo = b.produce("gemm_qkv_fwd", 2 * T * h * 3 * h, 3 * act, act, {l.ln1, l.qkv.w});
    RegionId scores = b.alloc(A * kAct);
    double qk = b.kernel("gemm_qk_fwd", 2 * T * S * h, 2 * act + A * kAct, {l.qkvo, scores, ws});
    l.probs = b.produce("softmax_fwd", 0, A * kAct, A * kAct, {scores}, qk);
    b.free(scores);
    b.region(l.probs).recompute->sources = {l.qkvo};  // scores are gone; recompute QK^T too
    l.ctx = b.produce("gemm_av_fwd", 2 * T * S * h, act, A * kAct + act, {l.probs, l.qkvo});
    l.x2 = b.produce("gemm_proj_residual_fwd", 2 * T * h * h, act, 2 * act, {l.ctx, l.o.w, x});
    l.ln2 = b.produce("layernorm_fwd", 0, act, act, {l.x2});
    l.f1 = b.produce("gemm_fc1_fwd", 2 * T * h * 4 * h, 4 * act, act, {l.ln2, l.fc1.w});
    l.ge = b.produce("gelu_fwd", 0, 4 * act, 4 * act, {l.f1});
    l.x3 =
        b.produce("gemm_fc2_residual_fwd", 2 * T * 4 * h * h, act, 5 * act, {l.ge, l.fc2.w, l.x2});
    x = l.x3;
  }
  // Head: logits over the vocabulary with the tied embedding, loss, and its gradient.
  const double V = c.vocab;
  RegionId lnf = b.produce("layernorm_fwd", 0, act, act, {x});
  RegionId dlnf = 0;
  if (vision) {  // the classifier reads the class token only
    const double B = c.batch;
    RegionId logits = b.alloc(B * V * 4);
    b.kernel("gemm_cls_head_fwd", 2 * B * h * V, B * V * 4, {lnf, head.w, logits});
    b.kernel("softmax_xent_fwd_bwd", 0, 2 * B * V * 4, {logits});  // gradient in place
    dlnf = b.alloc(act);
    b.kernel("gemm_cls_head_dgrad", 2 * B * h * V, act, {logits, head.w, dlnf});
    b.kernel("gemm_cls_head_wgrad", 2 * B * h * V, B * V * 4, {logits, lnf, head.g});
    b.free(logits);
  } else {
    RegionId logits = b.alloc(T * V * kAct);
    b.kernel("gemm_logits_fwd", 2 * T * h * V, T * V * kAct, {lnf, emb.w, logits, ws});
    b.kernel("softmax_xent_fwd_bwd", 0, 2 * T * V * kAct, {logits});  // gradient in place
    dlnf = b.alloc(act);
    b.kernel("gemm_logits_dgrad", 2 * T * h * V, T * V * kAct, {logits, emb.w, dlnf, ws});
    b.kernel("gemm_logits_wgrad", 2 * T * h * V, T * V * kAct, {logits, lnf, emb.g, ws});
    b.free(logits);
  }
  RegionId dy = b.alloc(act);
  b.kernel("layernorm_bwd", 0, 3 * act, {dlnf, x, lnf, dy});
  b.free(dlnf);
  b.free(lnf);
  for (auto it = L.rbegin(); it != L.rend(); ++it) {
    Layer& l = *it;
    RegionId dge = b.alloc(4 * act);
    b.kernel("gemm_fc2_dgrad", 2 * T * 4 * h * h, 5 * act, {dy, l.fc2.w, dge, ws});
    b.kernel("gemm_fc2_wgrad", 2 * T * 4 * h * h, 5 * act, {l.ge, dy, l.fc2.g, ws});
    b.free(l.ge);
    RegionId df1 = b.alloc(4 * act);
    b.kernel("gelu_bwd", 0, 12 * act, {dge, l.f1, df1});
    b.free(dge);
    b.free(l.f1);
    RegionId dln2 = b.alloc(act);
    b.kernel("gemm_fc1_dgrad", 2 * T * h * 4 * h, 5 * act, {df1, l.fc1.w, dln2, ws});
    b.kernel("gemm_fc1_wgrad", 2 * T * h * 4 * h, 5 * act, {l.ln2, df1, l.fc1.g, ws});
    b.free(df1);
    b.free(l.ln2);
    RegionId dx2 = b.alloc(act);
    b.kernel("layernorm_residual_bwd", 0, 4 * act, {dln2, l.x2, dy, dx2});
    b.free(dln2);
    b.free(l.x2);
    b.free(dy);
    b.free(l.x3);
    RegionId dctx = b.alloc(act);
    b.kernel("gemm_proj_dgrad", 2 * T * h * h, 2 * act, {dx2, l.o.w, dctx, ws});
    b.kernel("gemm_proj_wgrad", 2 * T * h * h, 2 * act, {l.ctx, dx2, l.o.g, ws});
    b.free(l.ctx);
    RegionId dprobs = b.alloc(A * kAct);
    RegionId dqkv = b.alloc(3 * act);
    b.kernel("gemm_av_dgrad", 2 * T * S * h, A * kAct + 2 * act, {dctx, l.qkvo, dprobs, ws});
    b.kernel("gemm_av_wgrad", 2 * T * S * h, A * kAct + 2 * act, {l.probs, dctx, dqkv, ws});
    b.free(dctx);
    RegionId dscores = b.alloc(A * kAct);
    b.kernel("softmax_bwd", 0, 3 * A * kAct, {dprobs, l.probs, dscores});
    b.free(dprobs);
    b.free(l.probs);
    b.kernel("gemm_qk_bwd", 4 * T * S * h, A * kAct + 4 * act, {dscores, l.qkvo, dqkv, ws});
    b.free(dscores);
    b.free(l.qkvo);
    RegionId dln1 = b.alloc(act);
    b.kernel("gemm_qkv_dgrad", 2 * T * h * 3 * h, 4 * act, {dqkv, l.qkv.w, dln1, ws});
    b.kernel("gemm_qkv_wgrad", 2 * T * h * 3 * h, 4 * act, {l.ln1, dqkv, l.qkv.g, ws});
    b.free(dqkv);
    b.free(l.ln1);
    RegionId dx = b.alloc(act);
    b.kernel("layernorm_residual_bwd", 0, 4 * act, {dln1, l.x, dx2, dx});
    b.free(dln1);
    b.free(dx2);
    dy = dx;
  }
  if (vision) {
    b.kernel("patch_embed_wgrad", 2 * T * h * 3 * c.patch * c.patch, b.bytes(image) + act,
             {dy, image, emb.g, pos.g});
    b.free(image);
  } else {
    b.kernel("embedding_bwd", 0, 2 * act, {dy, emb.g, pos.g});
  }
  b.free(dy);
  b.free(L.empty() ? x : L.front().x);
  build::adam(b, params, pr);
  return b.finish();
}

Trace make_bert_large(int batch, const H100Rates& rates) {
  TransformerConfig c;
  c.name = "bert-large";
  c.layers = 24, c.hidden = 1024, c.heads = 16, c.seq = 512, c.batch = batch, c.vocab = 30522;
  return make_transformer(c, rates);
}

Trace make_gpt2_medium(int batch, const H100Rates& rates) {
  TransformerConfig c;
  c.name = "gpt2-medium";
  c.layers = 24, c.hidden = 1024, c.heads = 16, c.seq = 1024, c.batch = batch, c.vocab = 50257;
  return make_transformer(c, rates);
}

std::vector<std::string_view> reference_trace_names() {
  return {"resnet50", "bert-large", "gpt2-medium"};
}

std::optional<Trace> reference_trace(std::string_view name) {
  if (name == "resnet50") return make_resnet50();
  if (name == "bert-large") return make_bert_large();
  if (name == "gpt2-medium") return make_gpt2_medium();
  return std::nullopt;
}

}  // namespace gswap::policy
