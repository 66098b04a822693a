// simulator.cpp: the discrete-event execution of a plan (see simulator.h for the model).
//
// Launches are processed in trace order. Time only moves forward per stream, and a launch never
// starts before the previous one was issued. Memory releases (finished swap-outs, drops, frees)
// sit in a min-heap by time; a generation counter per region invalidates a release when the
// eviction it belongs to is cancelled because the region was needed again first.
#include "policy/simulator.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <span>
#include <utility>

namespace gswap::policy {
namespace {

enum class St : std::uint8_t { kUnalloc, kResident, kOut, kHost, kDropped, kIn, kFreed };

struct RState {
  St st = St::kUnalloc;
  bool occupying = false;        // counts against the budget
  bool kept = false;             // an intermediate kept after a collective recomputation
  bool recomputing = false;      // its sources are being made resident (a cycle meets this)
  bool on_host_at_free = false;  // freed off the device, its copy on the host (or on its way)
  std::uint32_t gen = 0;
  double ready = 0;                 // kIn: when the swap-in completes
  double release = 0;               // kOut, or freed while occupying: when its memory goes back
  double on_host = 0;               // when its copy-out lands (a restore cannot start earlier)
  double last_use_end = 0;          // end of the last launch that touched it
  std::size_t protect = kNoLaunch;  // == current stamp: needed by the launch being prepared
  std::size_t entry = kNoLaunch;    // the plan entry that evicted it last
};

// A region and its last use, in heaps by last use (least recent on top), ties by region index.
struct LastUse {
  double last_use_end;
  std::size_t r;
  bool operator>(const LastUse& o) const {
    return last_use_end != o.last_use_end ? last_use_end > o.last_use_end : r > o.r;
  }
};
using ByLastUse = std::priority_queue<LastUse, std::vector<LastUse>, std::greater<LastUse>>;

// Indices listed per launch position, stored flat (one array and its offsets): the simulator
// lists plan entries and regions by launch for every plan it runs, and a vector per launch cost
// more in allocation than the simulation itself. Order within a launch is the order of add().
class PerLaunch {
 public:
  void reset(std::size_t n) {
    start_.assign(n + 2, 0);
    items_.clear();
  }
  void add(std::size_t i, std::size_t v) {
    items_.emplace_back(i, v);
    ++start_[i + 2];
  }
  void finish() {
    for (std::size_t i = 2; i < start_.size(); ++i) start_[i] += start_[i - 1];
    flat_.resize(items_.size());
    for (auto [i, v] : items_) flat_[start_[i + 1]++] = v;  // start_[i + 1] ends at i + 1's start
  }
  std::span<const std::size_t> operator[](std::size_t i) const {
    return {flat_.data() + start_[i], flat_.data() + start_[i + 1]};
  }

 private:
  std::vector<std::size_t> start_, flat_;
  std::vector<std::pair<std::size_t, std::size_t>> items_;
};

struct Release {
  double time;
  std::size_t r;
  std::uint32_t gen;
  bool operator>(const Release& o) const { return time > o.time; }
};

class Sim {
 public:
  Sim(const Analysis& a, const Plan& plan, std::uint64_t budget, SimEvents* events)
      : a_(a), t_(*a.trace), plan_(plan), budget_(budget), rs_(t_.regions.size()), ev_(events) {
    bw_out_ = t_.device.d2h_bytes_per_s / 1e6;
    bw_in_ = t_.device.h2d_bytes_per_s / 1e6;
    reading_.assign(t_.regions.size(), 0);
  }

  SimResult run() {
    res_.budget_bytes = budget_;
    res_.ideal_step_time_us = a_.ideal_step_us;
    res_.lateness_us.assign(plan_.entries.size(), 0.0);
    if (std::string why = impossible_budget_reason(a_, budget_); !why.empty()) {
      res_.feasible = false;
      res_.reason = why;
      return res_;
    }
    if (bw_out_ <= 0 || bw_in_ <= 0) {
      res_.feasible = false;
      res_.reason = "the trace has no link bandwidth";
      return res_;
    }
    index_plan();
    init_state();
    if (ev_) {
      ev_->launches.assign(a_.n, SimEvents::Launch{});
      ev_->resident_at_start = used_;
      for (std::size_t r = 0; r < rs_.size(); ++r)
        if (rs_[r].st == St::kHost) ev_->host_at_start += t_.regions[r].bytes;
      last_in_.assign(rs_.size(), kNoLaunch);
    }
    double T = 0;
    if (!acquire(0, T)) return fail("what is live at the start of the iteration");
    // Demand evictions that made room for what is live at the start hold their memory until
    // their copies end: the first launch starts no earlier.
    const double start_ready = T;
    // Per stream (Analysis::stream_index): its last launch's end.
    std::vector<double> stream_end(a_.streams, 0.0);
    double prev_start = start_ready, prev_end = 0, last_end = 0;
    for (std::size_t i = 0; i < a_.n; ++i) {
      const Launch& l = t_.launches[i];
      stamp_ = i + 1;
      double& on_stream = stream_end[a_.stream_index[i]];
      const double t0 = std::max(prev_start, on_stream);
      T = t0;
      waited_for_ = kNoLaunch;
      const double rc_before = res_.recompute_us;
      for (std::size_t r : a_.touched[i]) rs_[r].protect = stamp_;
      // An eviction at launch i follows the launches issued before it, as one after launch
      // i - 1 does (issue_evict).
      for (std::size_t e : evict_at_[i]) issue_evict(e, prev_end);
      std::uint64_t need = 0;  // memory this launch itself will take; prefetches leave it free
      for (std::size_t r : allocs_[i]) need += t_.regions[r].bytes;
      for (std::size_t r : a_.touched[i])
        if (!rs_[r].occupying) need += t_.regions[r].bytes;
      for (std::size_t e : trigger_at_[i]) deferred_.push_back(e);
      try_prefetches(T, need);
      for (std::size_t r : allocs_[i]) {
        // The program allocates before it launches: where the allocation fits only in place of
        // what the launch itself touches, it takes that memory, as the library does, and the
        // launch brings those regions back on demand below.
        bool got = acquire(t_.regions[r].bytes, T);
        if (!got) {
          for (std::size_t k : a_.touched[i]) rs_[k].protect = 0;
          restore_aside();
          got = acquire(t_.regions[r].bytes, T);
          for (std::size_t k : a_.touched[i]) rs_[k].protect = stamp_;
        }
        if (!got) return fail("allocation at launch " + std::to_string(i));
        rs_[r].st = St::kResident;
        rs_[r].occupying = true;
        lru_push(r);
      }
      for (std::size_t r : a_.touched[i]) {
        RState& s = rs_[r];
        if (s.entry != kNoLaunch && plan_.entries[s.entry].kind == EvictKind::kSwap) {
          if (s.st == St::kIn && s.ready > T) {
            res_.lateness_us[s.entry] = std::max(res_.lateness_us[s.entry], s.ready - T);
            if (ev_ && last_in_[r] != kNoLaunch) ev_->copies[last_in_[r]].late = true;
          }
          if (s.st == St::kHost && plan_.entries[s.entry].trigger != kNoLaunch)
            res_.lateness_us[s.entry] = plan_.entries[s.entry].swap_in_us;  // never started
        }
        if (!ensure_resident(r, T, 0)) return fail("restore at launch " + std::to_string(i));
      }
      for (std::size_t r : a_.touched[i]) {
        if (rs_[r].st == St::kIn && rs_[r].ready <= T) rs_[r].st = St::kResident, lru_push(r);
        if (rs_[r].st != St::kResident) ++res_.access_violations;
        // An intermediate recomputed earlier and kept is read (or written) by the program now:
        // from here on it is an ordinary region, which a drop for free would lose.
        rs_[r].kept = false;
      }
      // The library issues a trigger's prefetch when the launch is enqueued, after its own
      // allocations: what still does not fit takes the memory of a swap-out or free in flight.
      // (At T, when the launch has its memory: what was released to give it that is gone.)
      try_prefetches(T, 0, /*donors=*/true);
      // The program's own copy over the link waits for the copy engine of its direction (FIFO,
      // shared with gswap's swaps) and holds it for its duration.
      double* engine = l.link == CopyLink::kToDevice ? &h2d_free_
                       : l.link == CopyLink::kToHost ? &d2h_free_
                                                     : nullptr;
      if (engine) T = std::max(T, *engine);
      const double start = T;
      if (engine) *engine = start + l.dur_us;
      const double stall = std::max(0.0, (start - t0) - (res_.recompute_us - rc_before));
      res_.stall_us += stall;
      if (ev_) ev_->launches[i] = {start, start + l.dur_us, stall, waited_for_};
      const double end = start + l.dur_us;
      on_stream = end;
      prev_start = start;
      prev_end = end;
      last_end = std::max(last_end, end);
      for (std::size_t r : a_.touched[i]) {
        rs_[r].last_use_end = std::max(rs_[r].last_use_end, end);
        lru_push(r);
      }
      for (std::size_t r : frees_[i]) free_region(r, end);
      for (std::size_t e : evict_after_[i]) issue_evict(e, end);
    }
    // A region that started the iteration on the host because its next instance was to end it
    // there, where that instance did not (an eviction for good that found it already dropped,
    // say): the copy its next iteration restores from is made at the end.
    for (std::size_t r : host_from_next_) {
      const std::size_t next = a_.next_instance[r];
      if (rs_[next].on_host_at_free) continue;
      const double dur = static_cast<double>(t_.regions[next].bytes) / bw_out_;
      d2h_free_ = std::max(d2h_free_, rs_[next].last_use_end) + dur;
      res_.d2h_busy_us += dur;
      res_.swapped_out_bytes += t_.regions[next].bytes;
    }
    res_.step_time_us = std::max({last_end, d2h_free_, h2d_free_});
    return res_;
  }

 private:
  SimResult fail(const std::string& why) {
    res_.feasible = false;
    res_.reason = "budget cannot be met: " + why + " needs more memory than the budget allows";
    return res_;
  }

  void index_plan() {
    for (PerLaunch* l : {&evict_after_, &evict_at_, &trigger_at_, &allocs_, &frees_})
      l->reset(a_.n);
    entry_region_.assign(plan_.entries.size(), kNoRegion);
    for (std::size_t k = 0; k < plan_.entries.size(); ++k) {
      const PlanEntry& e = plan_.entries[k];
      auto it = a_.index.find(e.region);
      if (it == a_.index.end()) continue;  // not this trace's
      entry_region_[k] = it->second;
      if (e.evict_after >= a_.n) continue;
      if (evicts_at(e, a_.n))
        evict_at_.add(e.evict_at, k);
      else
        evict_after_.add(e.evict_after, k);
      if (e.kind == EvictKind::kSwap && e.trigger != kNoLaunch && e.trigger < a_.n &&
          !for_good(e, it->second))
        trigger_at_.add(e.trigger, k);
    }
    for (std::size_t r = 0; r < t_.regions.size(); ++r) {
      if (a_.first_live[r] > a_.last_live[r]) continue;
      if (!a_.live_at_start[r]) allocs_.add(a_.first_live[r], r);
      if (!a_.live_at_end[r]) frees_.add(a_.last_live[r], r);
    }
    for (PerLaunch* l : {&evict_after_, &evict_at_, &trigger_at_, &allocs_, &frees_}) l->finish();
  }

  // Whether entry e on region r evicts it for good: issued after its last access (or on a region
  // never accessed) and not a wrap. No access comes to bring it back, so its back_access names none
  // of r's and its trigger is not followed.
  bool for_good(const PlanEntry& e, std::size_t r) const {
    const auto& acc = a_.accesses[r];
    return !is_wrap(e) && (acc.empty() || first_launch_evicted(e, a_.n) > acc.back());
  }

  void init_state() {
    std::vector<std::size_t> wrap(t_.regions.size(), kNoLaunch);
    // Per region: how a plan entry leaves it at the end of the iteration (off after its last
    // access, nothing bringing it back): swapped out, or dropped.
    enum class End : std::uint8_t { kOn, kSwapped, kDropped };
    std::vector<End> ends(t_.regions.size(), End::kOn);
    drop_as_swap_.assign(plan_.entries.size(), false);
    // Entries in the order their evictions are issued: of two after a region's last access, the
    // first leaves it off (dropped or copied out) and the second finds nothing to evict, so the
    // first says how the region ends the iteration. Only such entries matter here, and they are
    // few (wraps, evictions for good): they are picked out before the sort, which over every
    // entry took about 5% of a run (two-stream BERT at half its peak, the search's plans).
    std::vector<std::size_t> order;
    for (std::size_t k = 0; k < plan_.entries.size(); ++k) {
      const PlanEntry& e = plan_.entries[k];
      const std::size_t r = entry_region_[k];
      // Entries the run never issues (past the last launch), or ignores (a region too small to
      // evict), leave the region as it is.
      if (r == kNoRegion || e.evict_after >= a_.n ||
          t_.regions[r].bytes < t_.device.min_evictable_bytes)
        continue;
      // Nor one issued before the region is allocated (it finds nothing to evict).
      const std::size_t at = first_launch_evicted(e, a_.n);
      if (!a_.live_at_start[r] && at <= a_.first_live[r]) continue;
      // Only an eviction issued after the last access ends the iteration off: otherwise that
      // access brings the region back, it ends the iteration on the device, and starts there.
      const auto& acc = a_.accesses[r];
      if (!acc.empty() && at <= acc.back()) continue;
      // Nor one that comes only once the region is freed (frees run first after a launch).
      if (!a_.live_at_end[r] && at > a_.last_live[r]) continue;
      order.push_back(k);
    }
    // (One issued after launch i - 1 comes before one issued at launch i.)
    auto issued = [&](std::size_t k) {
      const PlanEntry& e = plan_.entries[k];
      return std::pair{first_launch_evicted(e, a_.n), evicts_at(e, a_.n)};
    };
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t x, std::size_t y) { return issued(x) < issued(y); });
    for (std::size_t k : order) {
      const PlanEntry& e = plan_.entries[k];
      const std::size_t r = entry_region_[k];
      // A drop for good of a region the next iteration reads (as the instance carried over)
      // and cannot recompute by that read (its sources not carried over with it, or gone by
      // then): its data must survive, so the drop keeps a copy on the host (a copy-out, as a
      // swap), which the next iteration's first use restores.
      // (A region carried across the iteration is its own previous instance.)
      const std::size_t prev = a_.live_at_start[r] && a_.live_at_end[r] ? r : a_.prev_instance[r];
      if (e.kind == EvictKind::kRecompute && t_.regions[r].recompute && prev != kNoRegion &&
          !a_.accesses[prev].empty() && !a_.starts_recomputable(prev))
        drop_as_swap_[k] = true;
      if (ends[r] != End::kOn) continue;  // an earlier entry left it off already
      ends[r] = drops(k) ? End::kDropped : End::kSwapped;
      // A wrap entry, or a region that outlives the iteration evicted with nothing bringing it
      // back: either way it ends the iteration on the host, so (steady state) it starts there.
      // (A region the iteration frees ends it nowhere: a wrap entry on it does nothing.)
      if (e.kind == EvictKind::kSwap && a_.live_at_end[r] && (is_wrap(e) || a_.live_at_start[r]))
        wrap[r] = k;
    }
    for (std::size_t r = 0; r < t_.regions.size(); ++r) {
      if (!a_.live_at_start[r] || a_.first_live[r] > a_.last_live[r]) continue;
      // How its previous instance ended the iteration before: the next instance, or the region
      // itself where it outlives the iteration.
      const std::size_t next = a_.live_at_end[r] ? r : a_.next_instance[r];
      const End prev = next != kNoRegion && t_.regions[r].bytes >= t_.device.min_evictable_bytes
                           ? ends[next]
                           : End::kOn;
      if (a_.parked(r, budget_)) {
        rs_[r].st = St::kHost;  // evicted once, long ago: this iteration never needs it
      } else if (wrap[r] != kNoLaunch) {
        rs_[r].st = St::kHost;  // evicted at the end of the previous iteration
        rs_[r].entry = wrap[r];
      } else if (prev == End::kDropped && a_.starts_recomputable(r)) {
        // The previous iteration's instance of a region this one drops for good: its first use
        // recomputes it, as the library's recomputation on demand does.
        rs_[r].st = St::kDropped;
      } else if (prev != End::kOn) {
        // ... or evicts for good: it ended that iteration on the host, and nothing in the plan
        // brings it back before its first use.
        rs_[r].st = St::kHost;
        if (next != r) host_from_next_.push_back(r);
      } else {
        rs_[r].st = St::kResident;
        rs_[r].occupying = true;
        used_ += t_.regions[r].bytes;
        lru_push(r);
      }
    }
  }

  void process(double T) {
    while (!heap_.empty() && heap_.top().time <= T) {
      Release ev = heap_.top();
      heap_.pop();
      RState& s = rs_[ev.r];
      if (ev.gen != s.gen || !s.occupying) continue;
      s.occupying = false;
      used_ -= t_.regions[ev.r].bytes;
      note_memory(ev.time, -static_cast<std::int64_t>(t_.regions[ev.r].bytes), 0);
      if (s.st == St::kOut) s.st = St::kHost;
    }
  }

  // Makes room for `bytes` and takes it. Waits (moving T) for the earliest unfinished release;
  // with none in flight, drops kept intermediates, then evicts the least recently used region.
  bool acquire(std::uint64_t bytes, double& T) {
    process(T);
    while (used_ + bytes > budget_) {
      if (!heap_.empty()) {
        T = std::max(T, heap_.top().time);
        process(T);
        continue;
      }
      // Kept intermediates go first, least recently used first. They are listed apart, so
      // dropping them does not scan every region (which made recompute-heavy plans quadratic).
      std::size_t victim = least_recent(
          kept_, aside_kept_,
          [](const RState& s) { return s.kept && s.st == St::kResident && s.occupying; },
          /*rekey=*/true);
      // Then the least recently used resident region, ties by region index: by a scan of every
      // region for the first kScannedEvictions demand evictions of a run, then from a heap pruned
      // lazily, as for the kept intermediates (from then on every change that makes a region
      // resident or moves its last use pushes it). Most plans the search tries have a few demand
      // evictions, for which the pushes would cost more than the scans; a plan with thousands
      // made the scans quadratic.
      if (victim == kNoLaunch && !lru_on_ && ++scans_ > kScannedEvictions) {
        lru_on_ = true;
        for (std::size_t r = 0; r < rs_.size(); ++r)
          if (rs_[r].st == St::kResident && rs_[r].occupying) lru_push(r);
      }
      if (!lru_on_ && victim == kNoLaunch) {
        for (std::size_t r = 0; r < rs_.size(); ++r) {
          const RState& s = rs_[r];
          if (s.st != St::kResident || !s.occupying || s.protect == stamp_ ||
              t_.regions[r].bytes < t_.device.min_evictable_bytes)
            continue;
          if (victim == kNoLaunch || (s.kept && !rs_[victim].kept) ||
              (s.kept == rs_[victim].kept && s.last_use_end < rs_[victim].last_use_end))
            victim = r;
        }
      }
      if (lru_on_ && victim == kNoLaunch)
        victim = least_recent(
            lru_, aside_lru_, [](const RState& s) { return s.st == St::kResident && s.occupying; },
            /*rekey=*/false);
      if (victim == kNoLaunch) {
        // Prefetches in flight hold memory but cannot be evicted mid-copy: wait for the first to
        // land, after which it is an ordinary resident region.
        std::size_t first = kNoLaunch;
        for (std::size_t r = 0; r < rs_.size(); ++r)
          if (rs_[r].st == St::kIn && rs_[r].protect != stamp_ &&
              (first == kNoLaunch || rs_[r].ready < rs_[first].ready))
            first = r;
        if (first == kNoLaunch) return false;
        T = std::max(T, rs_[first].ready);
        rs_[first].st = St::kResident;
        lru_push(first);
        waited_for_ = first;
        continue;
      }
      RState& v = rs_[victim];
      if (v.kept) {  // a recomputed intermediate: dropping it costs nothing now
        v.kept = false;
        v.st = St::kDropped;
        v.occupying = false;
        ++v.gen;
        used_ -= t_.regions[victim].bytes;
        note_memory(T, -static_cast<std::int64_t>(t_.regions[victim].bytes), 0);
      } else {
        ++res_.demand_evictions;
        v.entry = kNoLaunch;
        swap_out(victim, T);
      }
    }
    used_ += bytes;
    res_.peak_resident_bytes = std::max(res_.peak_resident_bytes, used_);
    if (bytes) note_memory(T, static_cast<std::int64_t>(bytes), 0);
    return true;
  }

  void note_memory(double t, std::int64_t device, std::int64_t host) {
    if (ev_) ev_->memory.push_back({t, device, host});
  }

  void swap_out(std::size_t r, double T) {
    RState& s = rs_[r];
    const double dur = static_cast<double>(t_.regions[r].bytes) / bw_out_;
    const double start = std::max({T, d2h_free_, s.last_use_end});
    d2h_free_ = start + dur;
    s.release = s.on_host = d2h_free_;
    leaving_.push_back(r);
    res_.d2h_busy_us += dur;
    res_.swapped_out_bytes += t_.regions[r].bytes;
    s.st = St::kOut;
    if (ev_) {
      ev_->copies.push_back({r, false, start, d2h_free_, s.entry, false});
      note_memory(start, 0, static_cast<std::int64_t>(t_.regions[r].bytes));
    }
    heap_.push({d2h_free_, r, s.gen});
  }

  // Memory already acquired; planned: a prefetch the plan started (else on demand). The copy
  // starts once the engine is free, the host copy exists, and memory handed over is free.
  void swap_in(std::size_t r, double T, bool planned, double not_before = 0) {
    RState& s = rs_[r];
    const double dur = static_cast<double>(t_.regions[r].bytes) / bw_in_;
    const double start = std::max({T, h2d_free_, s.on_host, not_before});
    h2d_free_ = start + dur;
    res_.h2d_busy_us += dur;
    res_.swapped_in_bytes += t_.regions[r].bytes;
    s.st = St::kIn;
    if (ev_) {
      last_in_[r] = ev_->copies.size();
      ev_->copies.push_back({r, true, start, h2d_free_, planned ? s.entry : kNoLaunch, false});
      note_memory(h2d_free_, 0, -static_cast<std::int64_t>(t_.regions[r].bytes));
    }
    s.ready = h2d_free_;
    s.occupying = true;
  }

  // `after`: the end of the launch the eviction follows. The library orders a planned copy-out
  // or drop after the work enqueued on the region's streams, which on one stream includes that
  // launch even when it does not touch the region: it starts no earlier.
  void issue_evict(std::size_t k, double after = 0) {
    const std::size_t r = entry_region_[k];
    RState& s = rs_[r];
    if (s.st != St::kResident || !s.occupying ||
        t_.regions[r].bytes < t_.device.min_evictable_bytes)
      return;
    s.entry = k;
    s.kept = false;
    if (drops(k)) {
      s.st = St::kDropped;  // the memory goes back once the last reader has finished
      s.release = std::max(s.last_use_end, after);  // a donor's memory, once freed, lands then
      heap_.push({s.release, r, s.gen});
    } else {
      swap_out(r, after);
    }
  }

  // Starts deferred and newly triggered prefetches, soonest back-access first, while they fit
  // next to what the current launch needs. Never stalls compute. With `donors`, as the library
  // does once the launch's own memory is taken, a prefetch that does not fit takes the memory of
  // a swap-out or free of the same size still in flight (the one that lands first), its copy
  // starting after that one's; memory taken so is no longer on its way back to the budget.
  void try_prefetches(double T, std::uint64_t reserve, bool donors = false) {
    if (deferred_.empty()) return;
    process(T);
    std::sort(deferred_.begin(), deferred_.end(), [&](std::size_t x, std::size_t y) {
      return plan_.entries[x].back_access < plan_.entries[y].back_access;
    });
    keep_.clear();
    for (std::size_t k : deferred_) {
      const std::size_t r = entry_region_[k];
      RState& s = rs_[r];
      if (s.entry != k) continue;  // superseded
      // Past its back-access, which restored it on demand: a later eviction (a wrap entry's,
      // issued after that same access) must not be cancelled by this stale prefetch.
      if (plan_.entries[k].back_access != kNoLaunch && stamp_ - 1 > plan_.entries[k].back_access)
        continue;
      if (s.st == St::kOut) {  // still being copied out: cancel the eviction instead
        ++s.gen;
        s.st = St::kResident;
        lru_push(r);
        note_memory(T, 0, -static_cast<std::int64_t>(t_.regions[r].bytes));
        continue;
      }
      if (s.st != St::kHost) continue;
      const std::uint64_t b = t_.regions[r].bytes;
      if (used_ + b + reserve <= budget_) {
        used_ += b;
        res_.peak_resident_bytes = std::max(res_.peak_resident_bytes, used_);
        note_memory(T, static_cast<std::int64_t>(b), 0);
        swap_in(r, T, true);
      } else if (std::size_t d = donors ? donor_for(b) : kNoLaunch; d != kNoLaunch) {
        RState& g = rs_[d];
        ++g.gen;  // its release is this restore's memory now
        g.occupying = false;
        if (g.st == St::kOut) g.st = St::kHost;
        ++res_.donated_restores;
        swap_in(r, T, true, g.release);
      } else {
        keep_.push_back(k);
      }
    }
    deferred_.swap(keep_);
  }

  // A region of `bytes` whose swap-out or free is in flight, its memory not yet back: the one
  // that lands first. kNoLaunch when none.
  std::size_t donor_for(std::uint64_t bytes) {
    std::size_t best = kNoLaunch;
    std::size_t n = 0;
    for (std::size_t r : leaving_) {
      const RState& s = rs_[r];
      if (!s.occupying || (s.st != St::kOut && s.st != St::kFreed)) continue;  // landed, or back
      leaving_[n++] = r;
      if (t_.regions[r].bytes == bytes && (best == kNoLaunch || s.release < rs_[best].release))
        best = r;
    }
    leaving_.resize(n);
    return best;
  }

  bool ensure_resident(std::size_t r, double& T, int depth) {
    RState& s = rs_[r];
    s.protect = stamp_;
    switch (s.st) {
      case St::kResident:
        return true;
      case St::kIn:
        if (s.ready > T) waited_for_ = r;
        T = std::max(T, s.ready);
        s.st = St::kResident;
        lru_push(r);
        return true;
      case St::kOut:  // the copy is still running: the data is still on the device
        ++s.gen;
        s.st = St::kResident;
        lru_push(r);
        note_memory(T, 0, -static_cast<std::int64_t>(t_.regions[r].bytes));
        return true;
      case St::kHost:
        if (!acquire(t_.regions[r].bytes, T)) return false;
        swap_in(r, T, false);
        ++res_.demand_restores;
        waited_for_ = r;
        T = std::max(T, s.ready);
        s.st = St::kResident;
        lru_push(r);
        return true;
      case St::kDropped: {
        // A drop whose last reader has finished has released its memory, as the planner
        // counts it: recompute it rather than reuse it.
        process(T);
        if (s.occupying) {  // dropped but not yet released: keep it
          ++s.gen;
          s.st = St::kResident;
          lru_push(r);
          return true;
        }
        const Region& reg = t_.regions[r];
        // A recomputation that needs itself (sources in a cycle), or a chain longer than the
        // simulator follows, cannot run: the plan reads data it does not have.
        if (s.recomputing || depth >= kMaxRecomputeDepth) {
          ++res_.access_violations;
          if (!s.recomputing) ++res_.too_deep_recomputations;
          return true;
        }
        if (reg.recompute) {
          recomputing(r, true);
          for (std::size_t src : a_.sources[r]) {
            const St st = src == kNoRegion ? St::kFreed : rs_[src].st;
            if (st == St::kUnalloc || st == St::kFreed) {
              // The plan recomputes from a region that is gone (freed in this iteration, or
              // before it began).
              ++res_.access_violations;
              continue;
            }
            if (!ensure_resident(src, T, depth + 1)) {
              recomputing(r, false);
              return false;
            }
          }
          recomputing(r, false);
        }
        if (!acquire(reg.bytes, T)) return false;
        // Intermediates recomputed for this one need no protection once it exists, unless a
        // recomputation it is part of still reads them.
        for (std::size_t src : a_.sources[r])
          if (src != kNoRegion && rs_[src].kept && !touched_now(src) && reading_[src] == 0)
            rs_[src].protect = 0;
        restore_aside();
        const double cost = reg.recompute ? reg.recompute->cost_us : 0;
        if (ev_) ev_->recomputes.push_back({r, stamp_ - 1, T, T + cost});
        T += cost;
        res_.recompute_us += cost;
        res_.recomputed_bytes += reg.bytes;
        s.st = St::kResident;
        s.occupying = true;
        s.last_use_end = std::max(s.last_use_end, T);  // written now: a copy-out starts after
        lru_push(r);
        s.kept = depth > 0;  // collective recomputation: keep while memory allows
        if (s.kept) kept_.push({s.last_use_end, r});
        return true;
      }
      case St::kUnalloc:
      case St::kFreed:
        if (!acquire(t_.regions[r].bytes, T)) return false;
        s.st = St::kResident;
        s.occupying = true;
        lru_push(r);
        return true;
    }
    return true;
  }

  // The least recently used region of `q` (a heap by last use, pruned lazily) that is a
  // candidate, large enough to evict and not protected by the launch being prepared; kNoLaunch
  // when none. Entries whose region is no longer a candidate are dropped; one whose last use has
  // moved is re-keyed (`rekey`) or dropped (its region was pushed again as it moved); protected
  // ones stay listed.
  //
  // Protected entries are set aside (`aside`) for the rest of the launch rather than pushed back
  // at once: a launch touching thousands of regions that evicts on demand for each of them would
  // otherwise pop and push them all again every time (a 4,000-region launch took seconds).
  // restore_aside() returns them when a new launch begins or protection is lifted.
  template <class Candidate>
  std::size_t least_recent(ByLastUse& q, std::vector<LastUse>& aside, Candidate candidate,
                           bool rekey) {
    if (aside_stamp_ != stamp_) {
      restore_aside();
      aside_stamp_ = stamp_;
    }
    std::size_t victim = kNoLaunch;
    while (!q.empty()) {
      const LastUse it = q.top();
      const RState& s = rs_[it.r];
      if (!candidate(s) || t_.regions[it.r].bytes < t_.device.min_evictable_bytes) {
        q.pop();
        continue;
      }
      if (it.last_use_end != s.last_use_end) {
        q.pop();
        if (rekey) q.push({s.last_use_end, it.r});
        continue;
      }
      if (s.protect == stamp_) {
        aside.push_back(it);
        q.pop();
        continue;
      }
      victim = it.r;
      break;
    }
    return victim;
  }

  // Puts the entries least_recent set aside back in their heaps.
  void restore_aside() {
    for (const LastUse& it : aside_lru_) lru_.push(it);
    for (const LastUse& it : aside_kept_) kept_.push(it);
    aside_lru_.clear();
    aside_kept_.clear();
  }

  // Whether entry k's eviction drops its region, to be recomputed, rather than copying it out:
  // a "recompute" entry on a region with nothing to recompute it from is a swap, and so is a drop
  // that must keep a copy (drop_as_swap_, set by init_state first).
  bool drops(std::size_t k) const {
    return plan_.entries[k].kind == EvictKind::kRecompute &&
           t_.regions[entry_region_[k]].recompute && !drop_as_swap_[k];
  }

  // Region r's recomputation begins (its sources are being made resident) or ends. reading_
  // counts, per region, the recomputations under way that read it.
  void recomputing(std::size_t r, bool begins) {
    rs_[r].recomputing = begins;
    for (std::size_t src : a_.sources[r])
      if (src != kNoRegion) begins ? ++reading_[src] : --reading_[src];
  }

  bool touched_now(std::size_t r) const {
    const auto& v = a_.touched[stamp_ - 1];
    return std::find(v.begin(), v.end(), r) != v.end();
  }

  void free_region(std::size_t r, double end) {
    RState& s = rs_[r];
    // A copy-out or a drop in flight releases the memory when it completes, as planned; so does
    // a restore in flight, which lands first (it may wait for a donor's copy-out). Memory a
    // launch on another stream still uses comes back when that launch ends.
    if (s.occupying && s.st != St::kOut && s.st != St::kDropped) {
      const double release = std::max({end, s.last_use_end, s.st == St::kIn ? s.ready : end});
      ++s.gen;
      heap_.push({release, r, s.gen});
      s.release = release;
      leaving_.push_back(r);
    }
    // Its host copy goes with it.
    s.on_host_at_free = s.st == St::kHost || s.st == St::kOut;
    if (s.on_host_at_free) note_memory(end, 0, -static_cast<std::int64_t>(t_.regions[r].bytes));
    s.st = St::kFreed;  // a swap-out in flight releases the memory when it completes
    s.kept = false;
  }

  const Analysis& a_;
  const Trace& t_;
  const Plan& plan_;
  std::uint64_t budget_;
  std::vector<RState> rs_;
  SimEvents* ev_ = nullptr;             // null unless events are recorded
  std::vector<std::size_t> last_in_;    // per region: its last swap-in in ev_->copies
  std::size_t waited_for_ = kNoLaunch;  // the region the launch being prepared waited for
  SimResult res_;
  double bw_out_ = 0, bw_in_ = 0;  // bytes per microsecond
  double d2h_free_ = 0, h2d_free_ = 0;
  std::uint64_t used_ = 0;
  std::size_t stamp_ = 0;
  std::priority_queue<Release, std::vector<Release>, std::greater<Release>> heap_;
  PerLaunch evict_after_, evict_at_, trigger_at_, allocs_, frees_;
  std::vector<std::size_t> entry_region_;  // per plan entry: its region's index (kNoRegion: none)
  std::vector<bool> drop_as_swap_;  // per plan entry: a drop that must keep a copy (init_state)
  std::vector<std::size_t> host_from_next_;  // started on the host as its next instance ends
  std::vector<std::size_t> deferred_, keep_;
  // Per region: how many recomputations under way (their sources being made resident) read it.
  std::vector<std::uint32_t> reading_;
  std::vector<std::size_t> leaving_;  // swapped out or freed with memory not back yet (lazily)
  ByLastUse kept_;                    // kept intermediates, pruned lazily (least_recent)
  // Resident regions, the demand evictions' candidates, pruned lazily (least_recent). Kept only
  // once a run has made kScannedEvictions demand evictions (acquire).
  ByLastUse lru_;
  // Protected entries least_recent took out of lru_ and kept_ for launch aside_stamp_.
  std::vector<LastUse> aside_lru_, aside_kept_;
  std::size_t aside_stamp_ = 0;
  bool lru_on_ = false;
  std::size_t scans_ = 0;
  static constexpr std::size_t kScannedEvictions = 64;
  void lru_push(std::size_t r) {
    if (lru_on_) lru_.push({rs_[r].last_use_end, r});
  }
};

}  // namespace

SimResult simulate(const Analysis& a, const Plan& plan, std::uint64_t budget) {
  return Sim(a, plan, budget, nullptr).run();
}

SimResult simulate(const Analysis& a, const Plan& plan, std::uint64_t budget, SimEvents* events) {
  *events = SimEvents{};
  return Sim(a, plan, budget, events).run();
}

}  // namespace gswap::policy
