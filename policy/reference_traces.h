// reference_traces.h: synthetic but shape-faithful training iterations of well-known models, so
// the planners can be compared without a GPU. Kernel times come from FLOPs and bytes at the H100
// rates below (documented with their sources in README.md).
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "policy/trace.h"

namespace gswap::policy {

struct H100Rates {
  double tensor_flops_per_s = 600e12;  // bf16 GEMM/conv, ~60% of the 989 TFLOP/s dense peak
  double hbm_bytes_per_s = 2.6e12;     // ~78% of 3.35 TB/s HBM3, achieved by streaming kernels
  double min_kernel_us = 3.0;          // no kernel is shorter than this on a real GPU
  double link_bytes_per_s = 50e9;      // pinned PCIe Gen5 x16 copies, per direction
  std::uint64_t capacity_bytes = 80ull << 30;
};

// Bytes per element of each kind of tensor. The reference traces keep fp32 parameters and
// gradients; the corpus's mixed-precision models keep bf16 weights and gradients with fp32
// moments.
struct Precision {
  double act = 2;     // activations
  double weight = 4;  // parameters
  double grad = 4;    // parameter gradients
  double moment = 4;  // each of the two Adam moments
};

struct TransformerConfig {
  std::string name = "transformer";
  int layers = 24, hidden = 1024, heads = 16, seq = 512, batch = 32, vocab = 30522;
  Precision precision{};
  // Vision transformer: a patch x patch embedding of a 3-channel image instead of the token
  // embedding, and a `vocab`-way classifier on the class token instead of the tied LM head.
  int patch = 0;
};

Trace make_resnet50(int batch = 256, const H100Rates& rates = {});
Trace make_transformer(const TransformerConfig& c, const H100Rates& rates = {});
Trace make_bert_large(int batch = 32, const H100Rates& rates = {});  // seq 512
Trace make_gpt2_medium(int batch = 8, const H100Rates& rates = {});  // seq 1024

// "resnet50", "bert-large", "gpt2-medium" (as used by `--trace ref:NAME`), or nothing.
std::optional<Trace> reference_trace(std::string_view name);
std::vector<std::string_view> reference_trace_names();

}  // namespace gswap::policy
