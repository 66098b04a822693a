// analysis.h: facts about a trace that every planner, the simulator and the lower bound share —
// per-region accesses and lifetimes, the live-bytes curve, and the ideal (infinite-memory)
// timeline.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "policy/plan.h"
#include "policy/trace.h"

namespace gswap::policy {

// The default of DeviceInfo::min_evictable_bytes: on a real GPU the preload library leaves
// allocations below the 2 MiB VMM granularity to the driver, so no planner may evict them.
inline constexpr std::uint64_t kMinEvictableBytes = 2ull << 20;
inline constexpr std::size_t kNoRegion = static_cast<std::size_t>(-1);

struct Analysis {
  const Trace* trace = nullptr;
  std::size_t n = 0;                                // launches
  std::unordered_map<RegionId, std::size_t> index;  // region id -> index into trace->regions
  std::vector<std::vector<std::size_t>> accesses;   // per region: launch positions, ascending
  std::vector<std::vector<std::size_t>> touched;    // per launch: region indices, deduplicated
  std::vector<std::size_t> first_live;  // per region: first launch position it is allocated for
  std::vector<std::size_t> last_live;   // per region: last launch position it is allocated for
  std::vector<bool> live_at_start;      // allocated before the first launch
  std::vector<bool> live_at_end;        // never freed within the trace
  // Per region carried over from the previous iteration and freed in this one (an activation
  // saved before the iteration's start and read after it): the region allocated in this
  // iteration that is the same allocation one iteration later, the one the next iteration
  // starts with; kNoRegion when none. Matched by size and lifetime (alloc to free, in seq
  // numbers), one iteration's length or more apart. In the steady state the first starts the
  // iteration where the second ended the one before: a plan that evicts the second after its
  // last use with nothing bringing it back leaves the first on the host, and its first use
  // restores it on demand, as the preload library does.
  std::vector<std::size_t> next_instance;
  std::vector<std::size_t> prev_instance;  // the inverse: the region it is the next instance of
  // Per region: whether another region's recomputation reads it (a source), so that the
  // simulator may recompute it as an intermediate of that one.
  std::vector<bool> is_source;
  // Per region: its recomputation's sources as region indices, in the trace's order, kNoRegion
  // for an id the trace does not know (empty when not recomputable).
  std::vector<std::vector<std::size_t>> sources;
  // Per region: the launches where every source of its recomputation is allocated,
  // [sources_from, sources_to], found once so that sources_allocated_together costs the same
  // however many sources a region lists. Empty (from > to) for a region not recomputable, or
  // with a source that is not another region of the trace.
  std::vector<std::size_t> sources_from, sources_to;
  std::vector<std::uint64_t> live_bytes;   // per launch: bytes allocated while it runs
  std::vector<std::uint64_t> working_set;  // per launch: bytes it touches
  std::uint64_t peak_bytes = 0;
  std::size_t peak_launch = 0;
  std::uint64_t max_working_set = 0;
  std::size_t max_working_set_launch = 0;
  // Per launch: what must be resident while it runs whatever the plan: the bytes it touches plus
  // every live region under the trace's min_evictable_bytes (never evicted). A budget below its
  // maximum is impossible.
  std::vector<std::uint64_t> min_resident;
  std::uint64_t max_min_resident = 0;
  std::size_t max_min_resident_launch = 0;
  // Per region allocated in the iteration: its bytes plus the regions under min_evictable_bytes
  // live beside it when it is allocated. The allocation takes that much at once (the library
  // refuses an allocation larger than the budget), so a budget below the maximum is impossible,
  // even for a region no launch touches.
  std::uint64_t max_alloc_need = 0;
  std::size_t max_alloc_need_region = 0;
  // Per launch: bytes live beside it that no plan entry can take off the device, since an entry
  // evicts a region after an access: regions allocated in the iteration and not used yet, or
  // never used, and regions carried over that the iteration frees with no next_instance, before
  // their first use (idle regions carried over are on the host, see idle()). The simulator (and the
  // library) evict those on demand only. A budget below the maximum of min_resident + unplannable
  // is possible, but no plan fits it without demand evictions.
  std::vector<std::uint64_t> unplannable;
  std::uint64_t max_min_planned = 0;  // max over launches of min_resident + unplannable
  std::size_t max_min_planned_launch = 0;
  // Ideal timeline: each launch starts when its stream is free and not before the previous launch
  // started (the host issues in order). Simulator and lower bound use the same rule.
  std::vector<double> start_us, end_us;
  double ideal_step_us = 0;
  // Per launch: the next launch on its stream (n where none). It starts only once this one has
  // ended, and so does every launch issued after it; launches issued in between, on other
  // streams, may run while this one does.
  std::vector<std::size_t> next_on_stream;
  // Per launch: its stream as a dense index, 0 to streams - 1 in order of first use (stream ids
  // may be any 32-bit value; the simulator keeps per-stream state in a flat array by this index).
  std::vector<std::uint32_t> stream_index;
  std::size_t streams = 0;

  // A region carried over from the previous iteration that this one never touches and does not
  // free (a small one stays resident: it is never evicted). Once it has
  // left the device (the first eviction under pressure) nothing brings it back, so in the steady
  // state the simulator and the planners keep it on the host whenever the budget is below the
  // peak: it costs no copy and no memory.
  bool idle(std::size_t r) const {
    return live_at_start[r] && live_at_end[r] && accesses[r].empty() &&
           first_live[r] <= last_live[r] &&
           trace->regions[r].bytes >= trace->device.min_evictable_bytes;
  }
  // Whether idle region r is on the host at the start of an iteration at `budget`.
  bool parked(std::size_t r, std::uint64_t budget) const { return peak_bytes > budget && idle(r); }
  bool evictable(std::size_t r) const {
    return trace->regions[r].bytes >= trace->device.min_evictable_bytes && accesses[r].size() > 0;
  }
  // Whether region r may leave after its last access with nothing bringing it back in the
  // iteration (a plan entry with no back access, its "tail"): it is freed only later (its data
  // is dead), or it outlives the iteration, allocated in it with no instance carried into the
  // next (memory a first step allocates once, such as optimizer state: a swap keeps its copy on
  // the host). A region carried across the iteration leaves by a wrap instead, and the next
  // instance of one carried over is read again by the next iteration's first uses.
  bool has_tail(std::size_t r) const {
    const auto& acc = accesses[r];
    if (acc.empty() || acc.back() >= last_live[r]) return false;
    return !live_at_end[r] || (!live_at_start[r] && prev_instance[r] == kNoRegion);
  }
  // Whether region r can come back recomputed for its access at launch b: it is recomputable and
  // every source is another region of the trace allocated at b (the simulator recomputes only
  // from those; any other source is an access violation).
  bool recomputable_at(std::size_t r, std::size_t b) const;
  // Whether region r, off the device from launch `from` on, can come back recomputed by its
  // access at launch b: recomputable_at(r, b), or, for a source of another region's
  // recomputation (which the simulator may recompute as an intermediate there and keep), every
  // source another region of the trace allocated together at some launch j, from <= j <= b.
  bool recomputable_within(std::size_t r, std::size_t from, std::size_t b) const;
  // Whether region r, carried over, can be recomputed from what the iteration starts with: it is
  // recomputable and every source is another region carried over too.
  bool recomputable_from_start(std::size_t r) const;
  // Whether region r, carried over, may start the iteration dropped (its previous instance
  // dropped for good): recomputable_from_start(r), and recomputable_at its first use when it
  // has one. The simulator's rule, which make_recomputations_executable follows.
  bool starts_recomputable(std::size_t r) const;
  // Whether region r is recomputable and every source another region of the trace, all allocated
  // together at some launch j, from <= j <= b (the three tests above).
  bool sources_allocated_together(std::size_t r, std::size_t from, std::size_t b) const;
  // First launch position whose ideal start is at or after t (n when none).
  std::size_t first_start_at_or_after(double t) const;
  // The same from launch `from` on (`from` when it already starts at or after t), and the last
  // launch up to `to` whose ideal start is at or before t (0 when none). Both gallop from the
  // launch given: a copy ends or starts a few launches from the access it is planned at, and
  // the greedy planner, which asks for each of the million swaps it weighs on a 200,000-launch
  // iteration, spent a tenth of its time in binary searches over the whole iteration.
  std::size_t first_start_at_or_after(double t, std::size_t from) const;
  std::size_t last_start_at_or_before(double t, std::size_t to) const;
};

Analysis analyze(const Trace& trace);

// Empty when every launch fits; otherwise a message naming the launch whose working set (with
// the small regions that are never evicted) exceeds the budget.
std::string impossible_budget_reason(const Analysis& a, std::uint64_t budget);

// Empty when a plan can fit the budget; otherwise a message naming the launch beside which
// regions not used yet (or not at all) leave too little room for its working set: no plan fits
// without the simulator evicting those regions on demand.
std::string unplannable_budget_reason(const Analysis& a, std::uint64_t budget);

// The launches over which plan entry `e` keeps its region off the device in the planners'
// planned-memory curve (segment_tree.h), from launch `from` until `until`, where it is back (its
// back-access, or the launch its restore is issued before): off(lo, hi) for each non-empty range
// [lo, hi), a wrap's two ([from, the end of the region's life) and [0, until)), and up to the end
// of the region's life for an entry that never brings it back.
template <class Off>
void off_ranges(const Analysis& a, const PlanEntry& e, std::size_t from, std::size_t until,
                Off off) {
  const std::size_t r = a.index.at(e.region);
  const std::size_t life_end = std::min(a.n, a.last_live[r] + 1);
  auto range = [&](std::size_t lo, std::size_t hi) {
    if (lo < hi) off(lo, hi);
  };
  if (is_wrap(e)) {
    range(from, life_end);
    range(0, until);
  } else {
    range(from, e.back_access == kNoLaunch ? life_end : until);
  }
}

}  // namespace gswap::policy
