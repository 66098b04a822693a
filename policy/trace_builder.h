// trace_builder.h: the small vocabulary every trace generator is written in — regions that are
// allocated, freed and touched by launches whose durations come from FLOPs and bytes at given
// device rates — shared by the reference traces (reference_traces.cpp) and the corpus
// (corpus.cpp).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "policy/reference_traces.h"
#include "policy/trace.h"

namespace gswap::policy::build {

using policy::Precision;

class Builder {
 public:
  explicit Builder(const H100Rates& r) : r_(r) {
    t_.device.capacity_bytes = r.capacity_bytes;
    t_.device.h2d_bytes_per_s = r.link_bytes_per_s;
    t_.device.d2h_bytes_per_s = r.link_bytes_per_s;
  }
  RegionId alloc(double bytes) {
    Region reg;
    reg.id = next_id_++;
    reg.bytes = static_cast<std::uint64_t>(bytes);
    reg.alloc_seq = seq_;
    t_.regions.push_back(reg);
    return reg.id;
  }
  RegionId persistent(double bytes) {
    RegionId id = alloc(bytes);
    t_.regions.back().alloc_seq = 0;
    return id;
  }
  void free(RegionId id) { region(id).free_seq = seq_; }
  Region& region(RegionId id) { return t_.regions[id - 1]; }
  // Launches on this stream from now on.
  void stream(std::uint32_t s) { stream_ = s; }
  // Adds a launch and returns its duration.
  double kernel(const std::string& name, double flops, double bytes, std::vector<RegionId> regs) {
    double dur = std::max(
        {flops / r_.tensor_flops_per_s * 1e6, bytes / r_.hbm_bytes_per_s * 1e6, r_.min_kernel_us});
    Launch l;
    l.seq = seq_++;
    l.start_us = now_;
    l.dur_us = dur;
    l.stream = stream_;
    l.regions = std::move(regs);
    l.kernel = name;
    now_ += dur;
    t_.launches.push_back(std::move(l));
    return dur;
  }
  // A forward kernel producing `out`, which becomes recomputable from `sources`.
  RegionId produce(const std::string& name, double flops, double out_bytes, double in_bytes,
                   std::vector<RegionId> sources, double extra_cost_us = 0) {
    RegionId out = alloc(out_bytes);
    std::vector<RegionId> regs = sources;
    regs.push_back(out);
    double dur = kernel(name, flops, in_bytes + out_bytes, regs);
    region(out).recompute = Recompute{dur + extra_cost_us, sources};
    return out;
  }
  std::uint64_t bytes(RegionId id) { return region(id).bytes; }
  Trace finish() {
    t_.iterations.push_back({0, seq_ ? seq_ - 1 : 0});
    return std::move(t_);
  }

 private:
  const H100Rates& r_;
  Trace t_;
  Seq seq_ = 0;
  RegionId next_id_ = 1;
  double now_ = 0;
  std::uint32_t stream_ = 0;
};

struct Param {
  RegionId w, g, m, v;
  double elems;
};

inline Param make_param(Builder& b, double elems, const Precision& p) {
  return {b.persistent(elems * p.weight), b.persistent(elems * p.grad),
          b.persistent(elems * p.moment), b.persistent(elems * p.moment), elems};
}

// One Adam kernel per parameter tensor: reads w, g, m, v and writes w, m, v.
inline void adam(Builder& b, const std::vector<Param>& params, const Precision& p) {
  for (const Param& q : params)
    b.kernel("adam_step", 10 * q.elems, (2 * p.weight + p.grad + 4 * p.moment) * q.elems,
             {q.w, q.g, q.m, q.v});
}

}  // namespace gswap::policy::build
