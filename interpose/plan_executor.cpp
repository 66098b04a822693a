// plan_executor.cpp: following a plan on the launch path (see plan_executor.h).
#include "interpose/plan_executor.h"

#include <algorithm>

#include "interpose/log.h"

namespace gswap::interpose {
namespace {

// Plans larger than this are refused (a hostile or broken daemon must not make the library
// allocate without bound).
constexpr std::uint64_t kMaxSeqLength = 1ull << 22;
constexpr std::uint32_t kMaxEntries = 1u << 20;

std::uint64_t signature_hash(const std::uint64_t* sig, std::uint32_t n, std::uint64_t length) {
  std::uint64_t h = 1469598103934665603ull ^ length;
  for (std::uint32_t i = 0; i < n; ++i) h = (h ^ sig[i]) * 1099511628211ull;
  return h;
}

}  // namespace

void PlanExecutor::unload() {
  Compiled* old = plan_.exchange(nullptr, std::memory_order_acq_rel);
  mode_.store(static_cast<std::uint32_t>(proto::PlanMode::kPassive), std::memory_order_relaxed);
  if (old) {
    retired_[next_retired_].reset(old);
    next_retired_ = (next_retired_ + 1) % 8;
  }
}

void PlanExecutor::load(const proto::PlanHeader& h, const proto::PlanEntry* entries,
                        std::uint32_t n) {
  auto mode = static_cast<proto::PlanMode>(h.mode);
  if (mode != proto::PlanMode::kMeasure && mode != proto::PlanMode::kGuided) {
    unload();
    generation_.store(0, std::memory_order_relaxed);
    return;
  }
  auto p = std::make_unique<Compiled>();
  p->generation = h.generation;
  p->mode = h.mode;
  if (mode == proto::PlanMode::kGuided) {
    if (h.seq_length == 0 || h.seq_length > kMaxSeqLength || h.signature_length == 0 ||
        h.signature_length > proto::kSignatureLength || n > kMaxEntries) {
      GSWAP_LOG(kWarn,
                "gswapd sent a plan gswap cannot follow (iteration of %llu, signature %u, "
                "%u entries); running on demand",
                (unsigned long long)h.seq_length, h.signature_length, n);
      unload();
      return;
    }
    p->seq_length = h.seq_length;
    p->measure_every = h.measure_every;
    p->signature_length = h.signature_length;
    std::copy(h.signature, h.signature + h.signature_length, p->signature);
    p->entries = std::make_unique<Entry[]>(n);
    p->num_entries = n;
    std::vector<std::pair<std::uint64_t, Action>> acts;
    auto at = [&](std::uint64_t offset, Action a) {
      if (offset < p->seq_length) acts.emplace_back(offset, a);  // beyond the iteration: ignored
    };
    for (std::uint32_t i = 0; i < n; ++i) {
      const proto::PlanEntry& e = entries[i];
      if (e.action != static_cast<std::uint16_t>(proto::PlanAction::kSwap) &&
          e.action != static_cast<std::uint16_t>(proto::PlanAction::kRecompute))
        continue;
      Entry& x = p->entries[i];
      // A drop is undone by recomputation at the next access (residency); it has no prefetch.
      x.drop = e.action == static_cast<std::uint16_t>(proto::PlanAction::kRecompute);
      if (e.region_id) {
        x.region_id = e.region_id;
        if (Region* r = actions_.region_by_id(e.region_id)) {
          x.region.store(r, std::memory_order_relaxed);
          x.id.store(e.region_id, std::memory_order_relaxed);
        }
      } else if (e.bind_offset != proto::kNoOffset) {
        x.bind_offset = e.bind_offset;
        x.bind_slot = e.bind_slot;
        at(e.bind_offset, Action{i, kBind, 0});
      } else {
        continue;
      }
      if (e.evict_after != proto::kNoOffset) at(e.evict_after, Action{i, kEvict, e.evict_function});
      if (e.trigger != proto::kNoOffset && !x.drop) {
        x.has_trigger = true;
        at(e.trigger, Action{i, kPrefetch, e.trigger_function});
      }
      if (e.back_access != proto::kNoOffset && !x.drop) {
        x.back_offset = e.back_access;
        x.back_lead = e.back_lead;
        at(e.back_access, Action{i, kBack, 0});
      }
    }
    // Grouped by offset; within one offset binds come first (a region bound and evicted by the
    // same access).
    std::stable_sort(acts.begin(), acts.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second.kind < b.second.kind;
    });
    p->first.assign(p->seq_length + 1, 0);
    p->actions.reserve(acts.size());
    std::size_t k = 0;
    for (std::uint64_t o = 0; o < p->seq_length; ++o) {
      p->first[o] = static_cast<std::uint32_t>(p->actions.size());
      while (k < acts.size() && acts[k].first == o) p->actions.push_back(acts[k++].second);
    }
    p->first[p->seq_length] = static_cast<std::uint32_t>(p->actions.size());
    p->next_action.assign(p->seq_length + 1, static_cast<std::uint32_t>(p->seq_length));
    for (std::uint64_t o = p->seq_length; o-- > 0;)
      p->next_action[o] =
          p->first[o] < p->first[o + 1] ? static_cast<std::uint32_t>(o) : p->next_action[o + 1];
  }
  // The launch path binds under busy_: with it held here, no bind lands in the old plan after
  // its bindings were carried over (before() reads the plan again once it holds busy_).
  while (busy_.test_and_set(std::memory_order_acquire)) {
  }
  Compiled* old = plan_.load(std::memory_order_relaxed);
  if (old) carry_bindings(*old, p.get());
  quiet_below_.store(0, std::memory_order_relaxed);  // the new plan's positions are not known yet
  quiet_function_.store(p->signature[0], std::memory_order_relaxed);
  plan_.store(p.release(), std::memory_order_release);
  busy_.clear(std::memory_order_release);
  mode_.store(h.mode, std::memory_order_relaxed);
  generation_.store(h.generation, std::memory_order_relaxed);
  if (old) {
    retired_[next_retired_].reset(old);
    next_retired_ = (next_retired_ + 1) % 8;
  }
}

// When e's region is needed, for a prefetch at offset `off` of the current iteration: the call
// number of the first call that prepares its back-access (the allocations and frees just before
// that launch), in the next iteration when the back-access's offset is before the trigger's (a
// wrap). A trigger at the back-access itself is for that access, as the simulator counts it.
std::uint64_t PlanExecutor::due_seq(const Compiled& p, const Entry& e, std::uint64_t off) const {
  if (e.back_offset == proto::kNoOffset) return ~0ull;
  return start_ + e.back_offset - e.back_lead + (e.back_offset < off ? p.seq_length : 0);
}

std::uint64_t PlanExecutor::shape_of(const Compiled& p) {
  return signature_hash(p.signature, p.signature_length, p.seq_length);
}

// A plan of the same shape whose entry i binds the same access's region (feedback moved only
// triggers): entry i keeps the region the old plan bound in this iteration.
void PlanExecutor::carry_bindings(const Compiled& from, Compiled* to) {
  if (from.mode != to->mode || from.num_entries != to->num_entries ||
      shape_of(from) != shape_of(*to))
    return;
  for (std::uint32_t i = 0; i < to->num_entries; ++i) {
    const Entry& a = from.entries[i];
    Entry& b = to->entries[i];
    if (a.bind_offset == proto::kNoOffset || a.bind_offset != b.bind_offset ||
        a.bind_slot != b.bind_slot)
      continue;
    b.region.store(a.region.load(std::memory_order_relaxed), std::memory_order_relaxed);
    b.id.store(a.id.load(std::memory_order_relaxed), std::memory_order_relaxed);
  }
}

void PlanExecutor::start_iteration(Compiled& p, std::uint64_t start) {
  start_ = start;
  in_iteration_ = true;
  diverged_ = false;
  ++iteration_;
  measuring_ = p.measure_every && iteration_ % p.measure_every == 0;
  actions_.iteration_started();
}

void PlanExecutor::diverge(Compiled& p, std::uint64_t offset, std::uint64_t expected,
                           std::uint64_t got) {
  diverged_ = true;
  measuring_ = false;
  counters_.divergences.fetch_add(1, std::memory_order_relaxed);
  actions_.divergence(p.generation, offset, expected, got);
}

void PlanExecutor::before(std::uint64_t seq, std::uint64_t function, const TouchSet& t,
                          Step* step) {
  if (!plan_.load(std::memory_order_relaxed)) return;
  // Measuring needs no iteration state: every access is timed, without the try-lock (a launch
  // that found it held by another thread's would go untimed).
  if (mode_.load(std::memory_order_relaxed) ==
      static_cast<std::uint32_t>(proto::PlanMode::kMeasure)) {
    step->measure = true;
    return;
  }
  if (seq < quiet_below_.load(std::memory_order_acquire) &&
      function != quiet_function_.load(std::memory_order_relaxed)) {
    step->measure = quiet_measure_.load(std::memory_order_relaxed);
    return;
  }
  if (busy_.test(std::memory_order_relaxed) || busy_.test_and_set(std::memory_order_acquire)) {
    counters_.skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Compiled* p = plan_.load(std::memory_order_acquire);  // load() swaps plans under busy_ too
  if (!p) {
    busy_.clear(std::memory_order_release);
    return;
  }
  step->plan = p;
  if (p->mode == static_cast<std::uint32_t>(proto::PlanMode::kMeasure)) {
    step->measure = true;
    busy_.clear(std::memory_order_release);
    return;
  }
  // A new plan of the same iteration (the feedback rule moved triggers) keeps the iteration the
  // executor is in; a plan of another shape starts from its signature.
  std::uint64_t shape = shape_of(*p);
  if (shape != shape_) {
    shape_ = shape;
    in_iteration_ = false;
    matched_ = 0;
  }
  if (proto::match_signature(p->signature, &matched_, function)) candidate_ = seq;
  if (matched_ == p->signature_length) {
    matched_ = 0;
    // A new iteration, unless the signature recurs early in the current one.
    if (!in_iteration_ || candidate_ - start_ >= p->seq_length / 2) {
      if (in_iteration_ && !diverged_)
        counters_.guided_iterations.fetch_add(1, std::memory_order_relaxed);
      start_iteration(*p, candidate_);
    }
  }
  if (in_iteration_ && !diverged_) {
    std::uint64_t off = seq - start_;
    if (off >= p->seq_length + p->seq_length / 4 + 64) {
      diverge(*p, off, p->signature[0], function);  // the next iteration never started
    } else if (off < p->seq_length) {
      for (std::uint32_t i = p->first[off]; i < p->first[off + 1]; ++i) {
        const Action& a = p->actions[i];
        if (a.function && a.function != function) {
          diverge(*p, off, a.function, function);
          break;
        }
        Entry& e = p->entries[a.entry];
        Region* r = e.region.load(std::memory_order_relaxed);
        std::uint64_t id = e.id.load(std::memory_order_relaxed);
        switch (a.kind) {
          case kBind:
            if (e.bind_slot < t.n) {
              e.region.store(t.regions[e.bind_slot], std::memory_order_relaxed);
              e.id.store(t.regions[e.bind_slot]->id, std::memory_order_relaxed);
            }
            break;
          case kPrefetch:
            if (r && r->id == id &&
                !actions_.prefetch(r, id, plan_tag::make(p->generation, a.entry),
                                   due_seq(*p, e, off)))
              counters_.skipped.fetch_add(1, std::memory_order_relaxed);
            break;
          case kBack:
            // Still tagged by this entry: the region was back (or never left) when the stream got
            // here, so its restore was on time. (A restore still in flight was seen by the wait
            // path, which measures and reports it; see residency's wait_restores.)
            if (r && r->id == id) {
              std::uint64_t tag = r->plan_tag.load(std::memory_order_relaxed);
              if (tag && plan_tag::entry(tag) == a.entry &&
                  r->plan_tag.compare_exchange_strong(tag, 0, std::memory_order_relaxed))
                actions_.lateness((tag >> 32) & 0x3fffffffull, a.entry, 0, false);
            }
            break;
          case kEvict:
            if (step->evicts < 8)
              step->evict_entry[step->evicts++] = a.entry;
            else
              counters_.skipped.fetch_add(1, std::memory_order_relaxed);
            break;
        }
      }
    }
  }
  step->measure = measuring_ && in_iteration_ && !diverged_;
  // Until the next planned position (or, past the iteration, until it counts as never having
  // started again; outside a followed iteration, until the signature begins), accesses other than
  // the signature's first have nothing to do.
  std::uint64_t quiet = 0;
  if (matched_ == 0 && (!in_iteration_ || diverged_)) {
    quiet = ~0ull;  // only the signature's first function can change anything now
  } else if (matched_ == 0 && seq >= start_) {
    const std::uint64_t off = seq - start_;
    quiet = start_ + (off + 1 < p->seq_length ? p->next_action[off + 1]
                                              : p->seq_length + p->seq_length / 4 + 64);
  }
  quiet_measure_.store(step->measure, std::memory_order_relaxed);
  quiet_below_.store(quiet, std::memory_order_release);
  busy_.clear(std::memory_order_release);
}

void PlanExecutor::after(const Step& step) {
  if (!step.plan || step.evicts == 0) return;
  const Compiled* p = static_cast<const Compiled*>(step.plan);
  for (std::uint32_t k = 0; k < step.evicts; ++k) {
    std::uint32_t i = step.evict_entry[k];
    Entry& e = p->entries[i];
    Region* r = e.region.load(std::memory_order_relaxed);
    std::uint64_t id = e.id.load(std::memory_order_relaxed);
    if (!r || r->id != id || !actions_.evict(r, id, plan_tag::make(p->generation, i), e.drop))
      counters_.skipped.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace gswap::interpose
