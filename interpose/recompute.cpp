// recompute.cpp: recomputation (recompute.h): registrations, planned drops, and bringing dropped
// regions back through the framework's callbacks.
#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "interpose/check.h"
#include "interpose/clock.h"
#include "interpose/log.h"
#include "interpose/residency.h"
#include "interpose/telemetry.h"
#include "interpose/timeline.h"

namespace gswap::interpose {
namespace {

constexpr int kMaxChain = 16;           // registrations: sources of sources, this deep at most
constexpr int kMaxRecomputeDepth = 64;  // recomputation: chains registered over time
constexpr std::size_t kMaxRanges = 16;  // registered ranges per region

bool source_alive(const RecomputeSource& s) {
  return s.region && s.region->id == s.id && s.region->state.load() != kRegionFree;
}

// Whether r must be recomputed before it is touched: dropped, and not the region this thread is
// recomputing now (mapped, its callback running: the callback's own launches touch it).
bool needs_recompute(const Region* r) {
  return r->state.load() == kRegionDropped && !(in_recompute() && r->handle);
}

}  // namespace

void announce_recomputable(const Region& r) {
  const RecomputeInfo* info = r.recompute;
  if (!info || !info->covers(r.size)) return;
  std::uint64_t ids[proto::kMaxRecomputeSources];
  std::uint32_t n = 0;
  double cost_us = 0;
  bool known = true;
  for (const RecomputeRange& g : info->ranges) {
    cost_us += g.cost_us;
    known = known && g.cost_us > 0;
    for (const RecomputeSource& s : g.sources) {
      if (!source_alive(s) || n == proto::kMaxRecomputeSources) continue;
      if (std::find(ids, ids + n, s.id) == ids + n) ids[n++] = s.id;
    }
  }
  telemetry::recomputable(r.id, known ? static_cast<std::uint64_t>(cost_us * 1e3) : 0, ids, n);
}

// --- registrations -----------------------------------------------------------------------------

// The longest chain of live sources below `from` (edges), capped at kMaxChain + 1, or -1 when
// `target` is among them (a cycle). Each region is walked once: the sources form a DAG (cycles
// are refused), and a dense one (every region reading every region of the layer before) has
// exponentially many paths.
int Residency::chain_below(const Region* from, const Region* target,
                           std::unordered_map<const Region*, int>* memo) const {
  if (from == target) return -1;
  if (!from->recompute) return 0;
  if (auto it = memo->find(from); it != memo->end()) return it->second;
  int height = 0;
  for (const RecomputeRange& g : from->recompute->ranges)
    for (const RecomputeSource& s : g.sources) {
      if (!source_alive(s)) continue;
      const int h = chain_below(s.region, target, memo);
      if (h < 0) return (*memo)[from] = -1;
      height = std::max(height, std::min(h + 1, kMaxChain + 1));
    }
  return (*memo)[from] = height;
}

// The longest chain of live dependents above `r` (edges), capped at kMaxChain + 1: registrations
// made from the top of a chain down are checked too. Only regions some registration reads are
// looked up (`dependents`), so a chain registered from its sources up costs nothing here.
int Residency::chain_above(const Region* r, std::unordered_map<const Region*, int>* memo,
                           int depth) const {
  if (r->dependents == 0) return 0;
  if (depth > kMaxChain) return kMaxChain + 1;
  if (auto it = memo->find(r); it != memo->end()) return it->second;
  int up = 0;
  for (const Region* d : live_) {
    if (!d->recompute || d == r) continue;
    bool reads = false;
    for (const RecomputeRange& g : d->recompute->ranges)
      for (const RecomputeSource& s : g.sources)
        reads = reads || (source_alive(s) && s.region == r);
    if (reads) up = std::max(up, std::min(chain_above(d, memo, depth + 1) + 1, kMaxChain + 1));
  }
  return (*memo)[r] = up;
}

int Residency::register_recompute(std::uint64_t ptr, std::uint64_t bytes,
                                  const unsigned long long* sources, int num_sources,
                                  double cost_us, gswap_recompute_fn fn, void* ctx) {
  if (!fn || bytes == 0 || num_sources < 0 || num_sources > GSWAP_MAX_RECOMPUTE_SOURCES ||
      (num_sources > 0 && !sources) || !std::isfinite(cost_us) || cost_us < 0)
    return GSWAP_ERROR_INVALID;
  if (!device_ready()) return GSWAP_ERROR_NOT_READY;
  Region* r = fast_.map.find(ptr);
  if (!r) return GSWAP_ERROR_INVALID;  // not an allocation gswap manages (or a small one)
  std::lock_guard<std::mutex> lock(mutex_);
  if (r->state.load() == kRegionFree || ptr < r->base || ptr - r->base > r->size ||
      bytes > r->size - (ptr - r->base))
    return GSWAP_ERROR_INVALID;
  RecomputeRange range;
  range.offset = ptr - r->base;
  range.bytes = bytes;
  range.fn = fn;
  range.ctx = ctx;
  range.cost_us = cost_us;
  std::unordered_map<const Region*, int> below, above;
  const int up = chain_above(r, &above, 0);
  for (int i = 0; i < num_sources; ++i) {
    Region* s = fast_.map.find(sources[i]);
    if (!s) {
      // Memory gswap never moves (a small allocation the driver keeps) is always there; anything
      // else (no allocation at all) is not a source.
      if (!dev_.is_device_memory(sources[i])) return GSWAP_ERROR_INVALID;
      continue;
    }
    if (s == r || s->state.load() == kRegionFree || sources[i] < s->base ||
        sources[i] >= s->base + s->size)
      return GSWAP_ERROR_INVALID;
    const int down = chain_below(s, r, &below);
    if (down < 0 || up + 1 + down > kMaxChain) {
      GSWAP_LOG(kWarn,
                "gswap_register_recompute: region %llu reads region %llu, which is computed from "
                "it (a cycle) or through a chain deeper than %d: refused",
                (unsigned long long)r->id, (unsigned long long)s->id, kMaxChain);
      return GSWAP_ERROR_INVALID;
    }
    bool dup = false;
    for (const RecomputeSource& k : range.sources) dup = dup || k.region == s;
    if (!dup) range.sources.push_back(RecomputeSource{s, s->id});
  }
  if (r->recompute &&
      (r->recompute->ranges.size() >= kMaxRanges || r->recompute->overlaps(range.offset, bytes)))
    return GSWAP_ERROR_INVALID;
  if (!r->recompute) r->recompute = new RecomputeInfo();
  for (const RecomputeSource& s : range.sources) ++s.region->dependents;
  auto& ranges = r->recompute->ranges;
  auto at = std::find_if(ranges.begin(), ranges.end(),
                         [&](const RecomputeRange& g) { return g.offset > range.offset; });
  ranges.insert(at, std::move(range));
  if (!r->recompute->announced && r->recompute->covers(r->size)) {
    r->recompute->announced = true;
    announce_recomputable(*r);
  }
  return GSWAP_OK;
}

void Residency::end_range(Region* r, std::size_t i) {
  RecomputeInfo* info = r->recompute;
  for (const RecomputeSource& s : info->ranges[i].sources)
    if (s.region->id == s.id && s.region->dependents > 0) --s.region->dependents;
  info->ranges.erase(info->ranges.begin() + static_cast<std::ptrdiff_t>(i));
  if (info->announced && !info->covers(r->size)) {
    info->announced = false;
    telemetry::not_recomputable(r->id);
  }
  if (info->ranges.empty()) {
    delete info;
    r->recompute = nullptr;
  }
}

void Residency::end_registration(Region* r) {
  while (r->recompute) end_range(r, r->recompute->ranges.size() - 1);
}

CUresult Residency::settle_drop(std::unique_lock<std::mutex>& lock, Region* r) {
  // Pinned meanwhile: nothing evicts it while the mutex is released below.
  r->pins.fetch_add(1, std::memory_order_seq_cst);
  CUresult e = settle_pinned(lock, r);
  r->pins.fetch_sub(1, std::memory_order_release);
  return e;
}

CUresult Residency::settle_pinned(std::unique_lock<std::mutex>& lock, Region* r) {
  TouchSet one;
  one.add(r);
  settle_drops_in_flight(lock, one);
  if (r->state.load() != kRegionDropped) return CUDA_SUCCESS;
  if (r->host_valid) {
    r->host_valid = false;
    transition(r, kRegionHost);  // restored from its copy when next needed
    return CUDA_SUCCESS;
  }
  CUresult e = recompute(lock, r, gate_.capturing() ? restore_stream_ : legacy_stream(), 0);
  if (e == CUDA_ERROR_OUT_OF_MEMORY) log_oom(r->mapped);
  return e;
}

int Residency::unregister_recompute(std::uint64_t ptr) {
  if (!device_ready()) return GSWAP_ERROR_NOT_READY;
  Region* r = fast_.map.find(ptr);
  if (!r) return GSWAP_ERROR_INVALID;
  // From a recomputation callback: the registration may be the one running, and ending it would
  // recompute (or restore over) the region being written. Refused: end it after the callback.
  if (in_recompute()) {
    GSWAP_LOG_ONCE(kWarn,
                   "gswap_unregister_recompute called from a recomputation callback: refused "
                   "(end the registration after the callback returns)");
    return GSWAP_ERROR_INVALID;
  }
  RestorerLock one_restorer(*this);
  std::unique_lock<std::mutex> lock(mutex_);
  Context ctx(*this);
  auto find = [&]() -> std::size_t {
    if (r->state.load() == kRegionFree || !r->recompute) return ~std::size_t{0};
    for (std::size_t i = 0; i < r->recompute->ranges.size(); ++i)
      if (r->base + r->recompute->ranges[i].offset == ptr) return i;
    return ~std::size_t{0};
  };
  if (find() == ~std::size_t{0}) return GSWAP_ERROR_INVALID;
  CUresult e = settle_drop(lock, r);
  if (e != CUDA_SUCCESS) {
    GSWAP_LOG(kError,
              "gswap_unregister_recompute: region %llu could not be recomputed before its "
              "registration ends (CUresult %d): the registration stays",
              (unsigned long long)r->id, static_cast<int>(e));
    return GSWAP_ERROR_DEVICE;
  }
  std::size_t i = find();  // the mutex was released: look again
  if (i == ~std::size_t{0}) return GSWAP_ERROR_INVALID;
  end_range(r, i);
  return GSWAP_OK;
}

void Residency::release_dependents(Region* source) {
  RestorerLock one_restorer(*this);
  std::unique_lock<std::mutex> lock(mutex_);
  Context ctx(*this);
  std::uint64_t source_id = source->id;
  std::vector<std::pair<Region*, std::uint64_t>> deps;
  for (Region* d : live_) {
    if (!d->recompute) continue;
    bool reads = false;
    for (const RecomputeRange& g : d->recompute->ranges)
      for (const RecomputeSource& s : g.sources)
        reads = reads || (s.region == source && s.id == source_id);
    if (reads) deps.emplace_back(d, d->id);
  }
  for (auto [d, id] : deps) {
    if (d->id != id || d->state.load() == kRegionFree || !d->recompute) continue;
    CUresult e = settle_drop(lock, d);
    if (e != CUDA_SUCCESS) {
      GSWAP_LOG(kError,
                "region %llu was dropped to be recomputed from region %llu, which is being freed, "
                "and could not be recomputed first (CUresult %d): its bytes are lost",
                (unsigned long long)id, (unsigned long long)source_id, static_cast<int>(e));
      GSWAP_CHECK(!"a dropped region could not be recomputed before its source was freed");
    }
    if (d->id != id || !d->recompute) continue;
    for (std::size_t i = d->recompute->ranges.size(); i-- > 0;) {
      bool reads = false;
      for (const RecomputeSource& s : d->recompute->ranges[i].sources)
        reads = reads || (s.region == source && s.id == source_id);
      if (reads) end_range(d, i);
      if (!d->recompute) break;
    }
  }
}

// --- drops and recomputation -------------------------------------------------------------------

bool Residency::plan_drop(Region* r, std::uint64_t id, std::uint64_t tag) {
  return queue_.push(Command{CommandType::kPlanDrop, r, 0, id, tag});
}

bool Residency::begin_drop(Region* r) {
  r->dropping = true;
  r->drop_copy = cfg_.recompute_keep_copy || !trusted_.all_trusted(*r->recompute);
  if (!begin_evict(r)) {
    r->dropping = false;
    return false;
  }
  ++planned_drops_;
  return true;
}

// A region whose drop ends while request_restores waits for it is given memory at once (a
// dropped region gets memory only, its caller recomputing it), and holds that memory while the
// recomputation of its sources, a chain, takes more: at a budget the plan found enough for the
// chain, the deepest source then found no room (a launch of a 6-deep chain at 1 MiB failed with
// CUDA_ERROR_OUT_OF_MEMORY, where 832 KiB sufficed once each region had memory only after its
// sources). So the drops end first, and dropped regions get memory in recompute, after their
// sources.
void Residency::settle_drops_in_flight(std::unique_lock<std::mutex>& lock, const TouchSet& t) {
  for (;;) {
    bool waiting = false;
    for (std::size_t i = 0; i < t.n; ++i) {
      Region* r = t.regions[i];
      if (r->state.load() != kRegionEvicting || !r->dropping) continue;
      if (!r->swapper_busy && !r->handle_given)
        rescue(r);  // still mapped with its bytes
      else
        waiting = true;  // its memory went to another region: let the drop end first
    }
    if (!waiting) return;
    wait_progress(lock, 1000);
  }
}

// A recomputation needs its sources on the device beside its region, and the access its other
// regions: together more than the budget may hold where the access alone fits (a plan made for
// more memory than the library now has: gswapd's first plan, made before the library reported
// the small allocations of the program, dropped one of three activations at a budget of three,
// and the backward's launch failed with CUDA_ERROR_OUT_OF_MEMORY where a run with no plan
// passes). So the access's regions that need no recomputation may leave for its memory once
// nothing else can (make_room): they come back after, when its sources may leave in turn (an
// extra swap, never a failure).
CUresult Residency::recompute_dropped(std::unique_lock<std::mutex>& lock, TouchSet& t, CUstream s) {
  // From a recomputation callback: the regions of the access it recomputes for may be yielding.
  if (in_recompute()) return recompute_each(lock, t, s);
  bool any = false;
  for (std::size_t i = 0; i < t.n && !any; ++i) any = needs_recompute(t.regions[i]);
  if (!any) return CUDA_SUCCESS;
  TouchSet others;
  for (std::size_t i = 0; i < t.n; ++i)
    if (!needs_recompute(t.regions[i])) others.add(t.regions[i]);
  yieldable_ = &others;  // restorer_mutex_ held: one access at a time
  CUresult e = recompute_each(lock, t, s);
  yieldable_ = nullptr;
  for (Region* r : yielded_) r->pins.fetch_add(1, std::memory_order_seq_cst);
  yielded_.clear();
  return e;
}

CUresult Residency::recompute_each(std::unique_lock<std::mutex>& lock, TouchSet& t, CUstream s) {
  for (std::size_t i = 0; i < t.n; ++i)
    if (needs_recompute(t.regions[i]))
      if (CUresult e = recompute(lock, t.regions[i], s, 0); e != CUDA_SUCCESS) return e;
  return CUDA_SUCCESS;
}

CUresult Residency::recompute(std::unique_lock<std::mutex>& lock, Region* r, CUstream s,
                              int depth) {
  if (depth > kMaxRecomputeDepth) {
    GSWAP_LOG(kError, "region %llu: its chain of recomputations is deeper than %d",
              (unsigned long long)r->id, kMaxRecomputeDepth);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  GSWAP_CHECK(r->recompute && "a dropped region keeps its registration");
  // The callbacks run with the mutex released: a copy of what they need.
  struct Call {
    std::uint64_t offset, bytes;
    gswap_recompute_fn fn;
    void* ctx;
  } calls[kMaxRanges];
  std::size_t num_calls = 0;
  TouchSet src;
  for (const RecomputeRange& g : r->recompute->ranges) {
    calls[num_calls++] = Call{g.offset, g.bytes, g.fn, g.ctx};
    for (const RecomputeSource& k : g.sources)
      if (source_alive(k)) src.add(k.region);
  }
  for (std::size_t i = 0; i < src.n; ++i)
    src.regions[i]->pins.fetch_add(1, std::memory_order_seq_cst);
  auto unpin_sources = [&] {
    for (std::size_t i = 0; i < src.n; ++i)
      src.regions[i]->pins.fetch_sub(1, std::memory_order_release);
  };
  // Dropped sources first (a chain: they stay pinned, so resident, until this one is done), then
  // the sources' restores and this region's memory. A source whose drop was in flight may be
  // dropped by then: round again.
  CUresult e = CUDA_SUCCESS;
  for (;;) {
    settle_drops_in_flight(lock, src);
    for (std::size_t i = 0; i < src.n && e == CUDA_SUCCESS; ++i)
      if (needs_recompute(src.regions[i])) e = recompute(lock, src.regions[i], s, depth + 1);
    if (e != CUDA_SUCCESS) break;
    TouchSet all = src;
    all.add(r);
    e = request_restores(lock, all);
    if (e != CUDA_SUCCESS) break;
    bool again = false;
    for (std::size_t i = 0; i < src.n; ++i) again = again || needs_recompute(src.regions[i]);
    if (!again) break;
  }
  if (e != CUDA_SUCCESS) {
    unpin_sources();
    return e;
  }
  const bool has_copy = r->host_valid;
  Device::Event mapped = r->restore_event;  // after r's memory is free to write (issue_restore)
  const std::uint64_t gen = r->gen;
  lock.unlock();
  // The stream waits on the device for the sources' restores and for r's memory.
  e = wait_restores(src, s, false, false);
  if (e == CUDA_SUCCESS) e = dev_.wait(s, mapped);
  if (e != CUDA_SUCCESS) {
    lock.lock();
    // Dropped as before, unless another thread freed it meanwhile: its memory is the free's then
    // (kept mapped for reuse, or already another region's), never unmapped here.
    if (r->gen == gen) undo_map(r);
    unpin_sources();
    return e;
  }
  Device::Event t0 = timings_.take(), t1 = t0 ? timings_.take() : nullptr;
  if (t0 && dev_.record(t0, s) != CUDA_SUCCESS) {
    timings_.give_back(t0);
    timings_.give_back(t1);
    t0 = t1 = nullptr;
  }
  int rc = 0;
  gswap_recompute_fn failed = nullptr;
  ++t_recompute_depth;
  for (std::size_t k = 0; k < num_calls && rc == 0; ++k) {
    rc =
        calls[k].fn(calls[k].ctx, r->base + calls[k].offset, calls[k].bytes, static_cast<void*>(s));
    if (rc != 0) failed = calls[k].fn;
  }
  --t_recompute_depth;
  if (t1 && dev_.record(t1, s) != CUDA_SUCCESS) {
    timings_.give_back(t0);
    timings_.give_back(t1);
    t0 = t1 = nullptr;
  }
  // Freed meanwhile (the callback freed it, against the contract, or another thread did): its
  // bytes are nobody's, and its host copy may be gone with it; nothing is copied back.
  const bool freed = r->state.load() == kRegionFree;
  if (rc != 0 && !freed) {
    if (!has_copy) {
      GSWAP_LOG(kError,
                "region %llu (%s, %llu bytes) was dropped to be recomputed, and its callback "
                "failed (returned %d) after it had succeeded before; gswap holds no copy of its "
                "bytes. Stopping rather than let the program read garbage "
                "(GSWAP_RECOMPUTE_KEEP_COPY=1 keeps a copy of every dropped region)",
                (unsigned long long)r->id, r->name[0] ? r->name : "unnamed",
                (unsigned long long)r->size, rc);
      GSWAP_CHECK(!"a recomputation callback failed with no copy to fall back on");
    }
    // The host copy, in stream order after whatever the callback enqueued.
    CUresult c = !r->host.ptr     ? CUDA_ERROR_INVALID_VALUE
                 : r->host.pinned ? dev_.copy_h2d(r->base, r->host.ptr, r->size, s)
                                  : host_.staged_h2d(r->base, r->host.ptr, r->size, s);
    if (c != CUDA_SUCCESS) {
      GSWAP_LOG(kError,
                "region %llu: its recomputation failed and so did the copy back (CUresult %d)",
                (unsigned long long)r->id, static_cast<int>(c));
      GSWAP_CHECK(!"a dropped region can be neither recomputed nor copied back");
    }
  }
  e = dev_.record(r->restore_event, s);
  // Enqueued work with no event to see it end: the host waits for the device instead.
  if (e != CUDA_SUCCESS && dev_.synchronize_context() != CUDA_SUCCESS)
    GSWAP_CHECK(!"a recomputation's end can be neither seen nor waited for");
  lock.lock();
  if (r->state.load() == kRegionFree) {
    // Freed by another thread meanwhile (its memory goes back after the streams that used it).
    timings_.give_back(t0);
    timings_.give_back(t1);
    unpin_sources();
    return CUDA_SUCCESS;
  }
  if (t0 || t1) timings_.push_recompute(r->id, r->size, rc != 0, t0, t1);
  if (rc != 0) {
    ++recompute_failures_;
    trusted_.failed(failed);
    GSWAP_LOG(kError,
              "region %llu (%s): its recomputation callback failed (returned %d); its bytes came "
              "back from gswap's host copy, and it is swapped, not recomputed, from now on",
              (unsigned long long)r->id, r->name[0] ? r->name : "unnamed", rc);
    end_registration(r);
  } else {
    for (std::size_t k = 0; k < num_calls; ++k) trusted_.succeeded(calls[k].fn);
    r->kept = depth > 0;  // a chain's intermediate (Region::kept)
    ++recomputes_;
    recomputed_bytes_ += r->size;
  }
  r->host_valid = false;
  transition(r, kRegionRestoring);
  if (e == CUDA_SUCCESS) {
    r->restore_pending = true;
    recompute_flight_.push_back({r, ++r->restores_issued, false});
  } else {
    transition(r, kRegionResident);  // the host waited for the device
  }
  unpin_sources();
  return CUDA_SUCCESS;
}

// Swapper: recomputed regions become resident once their stream has passed the callbacks' work.
bool Residency::complete_recomputes() {
  bool did = false;
  for (std::size_t i = 0; i < recompute_flight_.size();) {
    InFlight f = recompute_flight_[i];
    Region* r = f.region;
    if (f.gen == r->restores_issued && r->restore_pending) {
      CUresult q = dev_.query(r->restore_event);
      if (q == CUDA_ERROR_NOT_READY) {
        ++i;
        continue;
      }
      if (q != CUDA_SUCCESS) GSWAP_CHECK(!"a recomputation's completion cannot be known");
      r->restore_pending = false;
      if (r->state.load() == kRegionRestoring) transition(r, kRegionResident);
      if (r->state.load() == kRegionResident && r->d2h_in_flight == 0)
        host_.release(&r->host, monotonic_ns());
    }
    recompute_flight_[i] = recompute_flight_.back();
    recompute_flight_.pop_back();
    did = true;
  }
  return did;
}

}  // namespace gswap::interpose
