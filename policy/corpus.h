// corpus.h: the traces the planner is held to beyond the three reference traces — convolution
// stacks with huge early activations (VGG-16), attention with large score tensors (ViT-B/16),
// skip connections kept across the whole forward (U-Net), an optimizer-dominated transformer,
// two-stream iterations, mixed precision, swap-only variants of everything, and a seeded
// generator of random but realistic training iterations. All are generated, none hand-tuned.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "policy/reference_traces.h"
#include "policy/trace.h"

namespace gswap::policy {

// The same trace with no region registered as recomputable: what a program that registers no
// recompute callback gives the planner.
Trace without_recompute(Trace t);

// VGG-16 at 224x224: 13 3x3 convolutions (each fused with its ReLU), 5 max pools, 3 fully
// connected layers; bf16 weights and activations, fp32 Adam moments.
Trace make_vgg16(int batch = 64, const H100Rates& rates = {});
// ViT-B/16 at 224x224: 16x16 patch embedding, 197 tokens, 12 layers of hidden 768 with 12 heads
// and a 3072-wide MLP, a 1000-way head on the class token; bf16 weights and activations, fp32
// Adam moments. The attention scores and probabilities are batch x 12 x 197 x 197 each.
// `layers` other than 12 makes a deeper or shallower model of the same width.
Trace make_vit_b16(int batch = 64, const H100Rates& rates = {}, int layers = 12);
// U-Net at 256x256 with 64-128-256-512 channels and a 1024-channel bottleneck: every encoder
// level's output is kept until the decoder concatenates it at the end of the forward; bf16
// weights and activations, fp32 Adam moments.
Trace make_unet(int batch = 16, const H100Rates& rates = {});
// A GPT-2 medium sized transformer at batch 1, sequence 512, fp32 parameters: the parameters,
// gradients and moments (16 bytes per parameter) are most of the peak.
Trace make_optimizer_heavy(const H100Rates& rates = {});
// BERT-large at batch 8 with weight-gradient GEMMs and the optimizer on a second stream, as
// frameworks that overlap them do.
Trace make_two_stream_bert(const H100Rates& rates = {});

struct RandomTrainingOptions {
  int min_layers = 3, max_layers = 24;
  // Activation sizes are drawn log-uniformly between these, in MiB.
  std::uint64_t min_act_mib = 2, max_act_mib = 256;
  bool allow_recompute = true;
  bool allow_two_streams = true;
};

// A random training iteration: a forward of random layers (linear, convolution-like, attention
// with score tensors, elementwise), each saving what its backward reads, with random residual
// and long skip connections; the backward in reverse, reading the saved tensors and freeing
// them after their last use; then an optimizer step per parameter (one fused kernel over all of
// them, half the time). Precision, link speed, streams and recompute registration are drawn
// too. The same seed gives the same trace.
Trace make_random_training(std::uint64_t seed, const RandomTrainingOptions& options = {});

struct CorpusTrace {
  std::string name;
  Trace trace;
};

// The corpus the planner tests and the benchmark run over: the reference traces, the models
// above, `random_count` random iterations, and the swap-only variant of each. `small` keeps
// every model's batch small enough for unit tests to plan all of them in seconds.
std::vector<CorpusTrace> corpus(bool small, int random_count);

// Names accepted by `--trace ref:NAME` beyond the reference traces: "vgg16", "vit-b16", "unet",
// "optimizer-heavy", "two-stream-bert", and "random:SEED".
std::optional<Trace> corpus_trace(std::string_view name);
std::vector<std::string_view> corpus_trace_names();

}  // namespace gswap::policy
