// search.cpp: seeded local search over plans, scored by the simulator (see search.h).
//
// A plan is a set of evictions, at most one per (region, gap between two accesses). The gaps of
// every evictable region are enumerated once; a move edits one entry (or, for a persistent
// region, adds all of its gaps at once) and is kept if the simulated step gets shorter. Moves
// are drawn from a seeded generator with plain modulo arithmetic, so the sequence is the same on
// every platform.
#include "policy/search.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <mutex>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "policy/baselines.h"
#include "policy/capuchin.h"
#include "policy/corpus.h"
#include "policy/segment_tree.h"

namespace gswap::policy {
namespace {

constexpr double kDemandPenalty = 1 + 1e-6;  // a plan with demand evictions loses ties
constexpr int kFeedbackRounds = 8;
constexpr double kStartTemperature = 0.01;  // a 1% worse plan is first taken with p = 1/e
constexpr std::size_t kRestartAfter = 300;
// After this many plans simulated with no new best, neither the best plan found nor the walk's own
// best since it last started over, the walk starts over from the seed at the starting
// temperature: returning to the best plan keeps it in a basin it has exhausted. A walk that still
// improves on its own best goes on, even while worse than the best plan found: from a seed far
// above the sweeps' plan (below) it needs more than 1,000 moves to pass it.
constexpr std::size_t kReseedAfter = 1000;

struct Gap {
  std::size_t r, e, b;  // b = kNoLaunch: the tail after the last access; b <= e: wraps
};

// A region carried across iterations (never freed) may also leave before its first use: evicted
// after the iteration's first launch, which does not touch it, and back for that use. That costs
// the copies a wrap does, but they run in this iteration's first part, where the link is often
// idle, instead of after the region's last use, where a wrap's copy-out ends the step.
constexpr std::size_t kEarly = 0;

constexpr double kRequireFitPenalty = 1e6;  // require_fit: any plan that fits comes first
// A plan that reads data it does not have (an access violation: a drop whose recomputation
// cannot run) is not valid: any valid plan comes first, even one that does not fit (scores of
// valid plans stay far below this, 1e15 us being 30 years; require_fit's are below 1e24 too).
constexpr double kInvalidPenalty = 1e30;

// SearchOptions::threads beyond this are taken as this many.
constexpr std::size_t kMaxThreads = 64;

// Walk i's generator seed (i > 0; walk 0 keeps the search's generator): splitmix64 of the seed
// and the walk's number, so that nearby seeds and walks give unrelated sequences.
std::uint64_t walk_seed(std::uint64_t seed, std::size_t walk) {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (static_cast<std::uint64_t>(walk) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A simulated plan fits: it runs within the budget with no demand eviction, reading only data it
// has.
bool fits(const SimResult& s) {
  return s.feasible && s.demand_evictions == 0 && s.access_violations == 0;
}

// Helper threads that run jobs for the calling thread while it makes, simulates and sweeps the
// seeds (Search::run, Search::prune): a batch of jobs is shared out, the calling thread taking
// part. Threads waiting for a batch, or for its last job, first yield a while before they sleep:
// on a virtual machine, waking a thread that sleeps takes 35-100 us, as long as a simulation of a
// small iteration, and two such wake-ups per batch made the sweeps slower with a helper than
// without (two-stream BERT, swap-only, at 30% of its peak: 130 ms against 110 ms for the first
// 1,000 plans).
class Helpers {
 public:
  // Starts up to `n` threads; fewer where the process is out of threads or memory.
  explicit Helpers(std::size_t n) {
    threads_.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      try {
        threads_.emplace_back([this] { serve(); });
      } catch (...) {  // std::system_error or std::bad_alloc
        break;
      }
    }
  }
  Helpers(const Helpers&) = delete;
  Helpers& operator=(const Helpers&) = delete;
  ~Helpers() {
    {
      std::lock_guard<std::mutex> lock(m_);
      quit_.store(true);
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  // Jobs run at once: the helpers' and the calling thread's.
  std::size_t width() const { return threads_.size() + 1; }

  // Runs job(i) for every i < n and returns once all have run; rethrows the first exception a
  // job threw. `waiting`, when set, is called on the calling thread, between its checks, while
  // it waits for the helpers' last jobs.
  void run(std::size_t n, const std::function<void(std::size_t)>& job,
           const std::function<void()>& waiting = {}) {
    std::unique_lock<std::mutex> lock(m_);
    job_ = &job;
    count_ = n;
    next_ = 0;
    pending_.store(n);
    error_ = nullptr;
    round_.store(round_.load() + 1);
    lock.unlock();
    wake_.notify_all();
    lock.lock();
    drain(lock);
    lock.unlock();
    // `waiting` may throw (it reads the caller's clock): the helpers' jobs still run on this
    // frame's objects, so its exception waits with theirs until every job is done.
    std::exception_ptr waited;
    auto call_waiting = [&] {
      if (!waiting || waited) return;
      try {
        waiting();
      } catch (...) {
        waited = std::current_exception();
      }
    };
    auto all_done = [&] { return pending_.load() == 0; };
    for (int i = 0; i < kYields && !all_done(); ++i) {
      if (i % 64 == 0) call_waiting();
      std::this_thread::yield();
    }
    lock.lock();
    while (!done_.wait_for(lock, std::chrono::milliseconds(1), all_done)) {
      lock.unlock();
      call_waiting();
      lock.lock();
    }
    job_ = nullptr;
    if (error_) std::rethrow_exception(error_);
    if (waited) std::rethrow_exception(waited);
  }

 private:
  // Yields before sleeping: a few milliseconds (0.5-1.4 us each on the machine of
  // docs/benchmarks.md).
  static constexpr int kYields = 4000;

  void serve() {
    std::uint64_t seen = 0;
    for (;;) {
      for (int i = 0; i < kYields && round_.load() == seen && !quit_.load(); ++i)
        std::this_thread::yield();
      std::unique_lock<std::mutex> lock(m_);
      wake_.wait(lock, [&] { return quit_.load() || round_.load() != seen; });
      if (quit_.load()) return;
      seen = round_.load();
      drain(lock);
    }
  }

  // Runs jobs of the batch until none is left to take (m_ held on entry and exit).
  void drain(std::unique_lock<std::mutex>& lock) {
    while (job_ && next_ < count_) {
      const std::size_t i = next_++;
      const std::function<void(std::size_t)>& job = *job_;
      lock.unlock();
      std::exception_ptr e;
      try {
        job(i);
      } catch (...) {
        e = std::current_exception();
      }
      lock.lock();
      if (e && !error_) error_ = e;
      pending_.store(pending_.load() - 1);
      if (pending_.load() == 0) done_.notify_all();
    }
  }

  std::mutex m_;  // guards what follows; the atomics are written under it and read without it
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t)>* job_ = nullptr;  // the batch's, while one runs
  std::size_t count_ = 0, next_ = 0;                       // its jobs, and the next to take
  std::atomic<std::size_t> pending_{0};                    // its jobs not done yet
  std::atomic<std::uint64_t> round_{0};                    // batches handed out
  std::atomic<bool> quit_{false};
  std::exception_ptr error_;
  std::vector<std::thread> threads_;
};

class Search {
 public:
  struct Best {
    Plan plan;
    SimResult sim;
    std::string seed;
  };

  Search(const Analysis& a, std::uint64_t budget, const SearchOptions& o)
      : a_(a), t_(*a.trace), budget_(budget), o_(o), rng_(o.seed), cap_(o.max_evaluations) {
    start_ms_ = o_.now_ms ? o_.now_ms() : 0;
    Moves m;
    auto add_gap = [&](Gap g) {
      m.gaps.push_back(g);
      return m.gaps.size() - 1;
    };
    for (std::size_t r = 0; r < t_.regions.size(); ++r) {
      if (!a_.evictable(r)) continue;
      const auto& acc = a_.accesses[r];
      std::vector<std::size_t> mine;
      for (std::size_t k = 0; k + 1 < acc.size(); ++k)
        if (acc[k + 1] > acc[k] + 1) mine.push_back(add_gap({r, acc[k], acc[k + 1]}));
      if (a_.live_at_start[r] && a_.live_at_end[r] && a_.n > 1)
        mine.push_back(add_gap({r, acc.back(), acc.front()}));
      if (a_.has_tail(r)) mine.push_back(add_gap({r, acc.back(), kNoLaunch}));
      if (a_.live_at_start[r] && a_.live_at_end[r] && !mine.empty())
        m.persistent.push_back(std::move(mine));
    }
    // Early gaps last, so the gaps above keep their places in the move sequence.
    for (std::size_t r = 0; r < t_.regions.size(); ++r)
      if (a_.evictable(r) && a_.live_at_start[r] && a_.live_at_end[r] &&
          a_.accesses[r].front() > kEarly + 1)
        add_gap({r, kEarly, a_.accesses[r].front()});
    moves_ = std::make_shared<const Moves>(std::move(m));
  }

  SearchResult run() {
    SearchResult res;
    // Seeds, planned lazily: on a long iteration the time budget may end after the first. The
    // strongest and cheapest come first. Over the corpus the best seed is Belady's plan in 33 of
    // 78 cells, the greedy plan in 30 and recompute-only in 14; Belady's takes a twentieth of the
    // greedy plan's time. DELTA's is cheap too, and ahead of the greedy plan where that stalls.
    const std::vector<std::string> all =
        o_.allow_recompute ? std::vector<std::string>{"capuchin",  "belady", "recompute", "delta",
                                                      "swap-only", "vdnn",   "lru"}
                           : std::vector<std::string>{"capuchin", "belady", "delta", "vdnn", "lru"};
    const bool go_on = o_.start && o_.start->feasible;
    // Going on from a start plan, only the seeds asked for (an earlier search's seeds_left).
    std::vector<std::string> names;
    for (const std::string& name : all)
      if (!go_on || std::find(o_.seeds.begin(), o_.seeds.end(), name) != o_.seeds.end())
        names.push_back(name);
    auto left_from = [&](std::size_t i) {
      res.seeds_left.assign(names.begin() + static_cast<std::ptrdiff_t>(i), names.end());
    };
    Plan first;
    // The first batch's time (the first seed's, on one thread): a later batch starts only with
    // room left for as much, so that the search overruns its budget by a seed's simulations at
    // most, not by a seed too.
    double seed_ms = 0;
    std::vector<std::pair<Plan, std::string>> early;  // the seeds' early forms, tried after them
    std::vector<Best> seeds;                          // each seed's first simulation
    std::vector<Best> tuned;  // each seed's best feedback round (with_feedback), for fresh starts
    // Helper threads: one less than the walks to come, and no more than the machine runs at once
    // (a job beyond them would wait for a core). They make and simulate seeds side by side, run
    // their feedback rounds side by side, and simulate the sweeps' next plans side by side; in
    // each, what the search keeps and counts is what one thread keeps and counts (taken in the
    // one-thread order, with its checks of the evaluation cap), so a search that the cap stops
    // before its walks is the one-thread search. They end before the walks start.
    if (const std::size_t width = std::min(o_.threads, usable_search_threads(o_.threads));
        width > 1 && !(o_.cancel && o_.cancel->load()))
      helpers_ = std::make_shared<Helpers>(width - 1);
    const std::size_t width = helpers_ ? helpers_->width() : 1;
    if (go_on) {
      first = *o_.start;
      if (!o_.allow_recompute) strip_recompute(first);
      if (auto b = simulated(first, o_.start_seed, /*seeding=*/true))
        seeds.push_back(std::move(*b));
    }
    // The seeds, unless going on, `width` at a time.
    struct Made {
      Plan plan;  // with recomputation stripped when swap-only, as simulated
      SimResult sim;
      Plan as_made;  // the first seed only, as its planner made it
    };
    for (std::size_t i = 0; i < names.size();) {
      if ((i > 0 || go_on) &&
          (seeding_done() || (best_ && best_->sim.feasible && !room_for(seed_ms)))) {
        left_from(i);
        break;
      }
      const std::size_t n = std::min(width, names.size() - i);
      std::vector<Made> made(n);
      const bool timed = i == 0 && o_.now_ms;
      const double t0 = timed ? o_.now_ms() : 0;
      run_jobs(n, [&](std::size_t j) {
        Plan plan = make_seed(names[i + j]);
        if (i + j == 0 && !go_on) {
          made[j].as_made = plan;
          if (!plan.feasible) return;  // see below
        }
        if (!o_.allow_recompute) strip_recompute(plan);
        made[j].sim = simulate(a_, plan, budget_);
        made[j].plan = std::move(plan);
      });
      if (timed) seed_ms = o_.now_ms() - t0;
      std::size_t j = 0;
      for (; j < n; ++j) {
        const std::string& name = names[i + j];
        if (i + j == 0 && !go_on) {
          first = std::move(made[j].as_made);
          if (!first.feasible) {  // no plan can fit: say why, as the greedy planner does
            res.plan = first;
            res.plan.fits = false;
            finish(res, false);
            return res;
          }
        } else if (batch_done()) {
          break;
        }
        if (Plan e = early_wraps(made[j].plan); !e.entries.empty())
          early.emplace_back(std::move(e), name + " (early)");
        if (auto b = simulated(std::move(made[j].plan), std::move(made[j].sim), name))
          seeds.push_back(std::move(*b));
      }
      if (j < n) {
        left_from(i + j);
        break;
      }
      i += n;
    }
    for (std::size_t i = 0; i < early.size();) {
      if (seeding_done() || (best_ && best_->sim.feasible && !room_for(seed_ms))) break;
      const std::size_t n = std::min(width, early.size() - i);
      std::vector<Plan> plans;
      for (std::size_t j = 0; j < n; ++j) plans.push_back(early[i + j].first);
      std::vector<SimResult> sims = simulate_all(plans);
      std::size_t j = 0;
      for (; j < n && (j == 0 || !batch_done()); ++j)
        if (auto b = simulated(std::move(plans[j]), std::move(sims[j]), early[i + j].second))
          seeds.push_back(std::move(*b));
      if (j < n) break;
      i += n;
    }
    // Then the feedback rounds, from the best seed down. On a long iteration the time budget may
    // end here; every seed planned has run once, so the plan returned is at least as fast as any
    // of them (the baselines among them).
    std::stable_sort(seeds.begin(), seeds.end(),
                     [&](const Best& x, const Best& y) { return rank(x.sim) < rank(y.sim); });
    for (std::size_t i = 0; i < seeds.size();) {
      if (stop()) break;
      const std::size_t n = std::min(width, seeds.size() - i);
      std::vector<std::vector<Best>> rounds(n);
      if (n > 1) {
        // Each seed's rounds side by side; out of time, the calling thread tells the others to
        // leave theirs (those left are then not taken: the search stops).
        std::atomic<bool> leave{false};
        auto out_of_time = [&] {
          if (!leave.load() && stop_walks()) leave.store(true);
        };
        run_jobs(
            n,
            [&](std::size_t j) {
              rounds[j] = feedback_rounds(seeds[i + j], [&] {
                if (std::this_thread::get_id() == caller_) out_of_time();
                return leave.load();
              });
            },
            out_of_time);
      }
      std::size_t j = 0;
      for (; j < n && (j == 0 || !stop()); ++j)
        tuned.push_back(with_feedback(std::move(seeds[i + j]), std::move(rounds[j])));
      if (j < n) break;
      i += n;
    }
    if (!best_) {  // cancelled before the first simulation: the greedy plan, unsimulated
      res.plan = first;
      res.seed_policy = go_on ? o_.start_seed : names[0];
      finish(res, false);
      return res;
    }
    // Local moves from the best seed, accepted by simulated annealing: a worse plan is taken
    // with probability exp(-relative loss / temperature), the temperature falling with the
    // evaluations, and the walk returns to its best plan after kRestartAfter moves without
    // bettering it. Plain hill climbing stalls on the first plateau (a restore cannot move earlier
    // until another one does). After kReseedAfter moves without a new best (the walk's or the
    // search's) the walk starts over from the seed at the starting temperature: a different path
    // from the same plan often ends in a better basin (the generator has moved on, so the moves
    // differ). The walk starts from the best plan simulated so far, which the spread start may be.
    const Best seed = *best_;
    // Where the best seed evicts on demand, the best plan simulated that does not (a seed or one
    // of its feedback rounds): with require_fit there is none then. A walk from a plan with
    // demand evictions may never reach the plans that fit, where a walk from one of those finds
    // faster ones: on a training iteration whose weights and optimizer state fill most of the
    // budget, no plan at all was the best seed (two demand evictions, 1.93 of the bound at 90% of
    // the peak), and its walks stayed there, where walks from the greedy plan, 3% slower, reach
    // 1.27 in 200 ms. Over 400 random training iterations outside the corpus, each swap-only too,
    // at 30-90% of their peaks (1,520 feasible cells, two seeds, 20,000 plans a search), 87
    // searches gained more than 2% from it and 17 lost as much.
    std::optional<Best> fitting;
    if (seed.sim.demand_evictions && best_fit_) fitting = *best_fit_;
    // Fresh starts cycle, from the first, through the best seed with its wrapped optimizer state
    // spread over the optimizer (spread_wraps), when it wraps any, the seed, and `fitting`.
    std::optional<Best> spread;
    if (Plan sp = spread_wraps(seed.plan); !sp.entries.empty())
      if (auto b = simulated(std::move(sp), seed.seed + " (spread)", /*seeding=*/false))
        spread = with_feedback(std::move(*b));
    // Both swept first (prune): the walk starts from the better; fresh starts from them as they
    // were, which leaves later walks other paths than the sweep's. Between the two sweeps, the
    // best plan so far with the recomputable regions dropped over the launches past the budget
    // (with_drops), swept too: the walk, adding one drop at a time, seldom frees enough for a
    // swap to go.
    // A start plan was swept, and dropped over the peak, where it was found; a seed made beside
    // it that is better was not.
    if (!go_on || seed.seed.rfind(o_.start_seed, 0) != 0) {
      prune(seed);
      if (!stop())
        if (Plan dp = with_drops(best_->plan); !dp.entries.empty())
          if (auto b = simulated(std::move(dp), best_->seed + " (drops)", /*seeding=*/false))
            prune(std::move(*b));
    }
    if (spread) prune(*spread);
    helpers_.reset();  // their threads end before the walks' start
    if (!stop() && !moves_->gaps.empty()) {
      std::vector<Best> starts;
      if (spread) starts.push_back(std::move(*spread));
      starts.push_back(seed);
      if (fitting) starts.push_back(std::move(*fitting));
      // After a round of them that found no better plan, one other seed, best first, in turn
      // (its best feedback round; the early forms are left out, as is a seed that is already a
      // start): the best seed's basin may be a poor one. On a five-layer iteration at 95% of its
      // peak (policy/testdata/recompute_and_small_swaps.json) walks from Belady's plan, the best
      // seed, stay at 3.5 of the bound, where those from DELTA's reach 2.1. Over 400 random
      // training iterations outside the corpus, each swap-only too, at 30-95% of their peaks
      // (2,278 feasible cells, two seeds, 20,000 plans a search), 256 searches gained more than
      // 2% and 74 lost as much (the ratio to the bound 1.283 to 1.274, geometric mean). Every
      // seed in every round did more there (415 and 136, 1.269), but left swap-only VGG-16 at
      // 90% of its peak with require_fit at 1.13-1.20 of the bound in 10,000 plans, where the
      // rounds of the seed and its spread form reach 1.08-1.12.
      const std::size_t base = starts.size();
      std::stable_sort(tuned.begin(), tuned.end(),
                       [&](const Best& x, const Best& y) { return rank(x.sim) < rank(y.sim); });
      for (Best& b : tuned)
        if (b.seed.find(" (") == std::string::npos &&
            std::none_of(starts.begin(), starts.end(),
                         [&](const Best& x) { return x.seed == b.seed; }))
          starts.push_back(std::move(b));
      res.walks = 1;
      if (o_.threads > 1)
        res.walks = walk_side_by_side(starts, base);
      else
        walk(starts, base);
    }
    res.plan = best_->plan;
    res.sim = best_->sim;
    res.seed_policy = best_->seed;
    finish(res, true);
    return res;
  }

 private:
  // The walk: local moves from the best plan so far (the sweeps'), accepted by simulated
  // annealing, with fresh starts from each of the first `base` of `starts` in turn and, after a
  // round of those that found no better plan, from the next of the others (run, above).
  void walk(const std::vector<Best>& starts, std::size_t base) {
    Best cur = *best_, walk_best = cur;  // walk_best: the best since the walk last started over
    std::size_t since_best = 0, walked = 0, since_new_best = 0;
    std::size_t round_at = 0, others = 0;   // the next of the first starts; other starts made
    double round_best = merit(best_->sim);  // the best plan's merit as the round began
    bool walk_moved = false;                // walk_best bettered since the walk last started
    while (!stop() && !moves_->gaps.empty()) {
      Plan cand = cur.plan;
      made_ = kNoLaunch;
      if (!move(cand, cur.sim)) continue;
      SimResult s = eval(cand);
      // A swap the move made afresh, in a plan that evicts on demand: also with its restore
      // after the plan's peak (after_planned_peak), the better kept.
      if (made_ != kNoLaunch && s.demand_evictions && !stop()) {
        const std::size_t t = after_planned_peak(cand, made_);
        if (t != cand.entries[made_].trigger) {
          Plan other = cand;
          other.entries[made_].trigger = t;
          SimResult so = eval(other);
          if (score(so) < score(s)) cand = std::move(other), s = std::move(so);
        }
      }
      const double sc = score(s), cs = score(cur.sim);
      bool accept = sc < cs * (1 - 1e-9);
      if (!accept && std::isfinite(sc)) {
        const double temp = kStartTemperature / (1.0 + static_cast<double>(walked) / 1000.0);
        const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
        accept = u < std::exp(-(sc - cs) / cs / temp);
      }
      ++walked;
      if (accept) cur = Best{std::move(cand), std::move(s), cur.seed};
      if (rank(cur.sim) < rank(best_->sim) * (1 - 1e-9)) {
        ++improvements_;
        consider(cur.plan, cur.sim, cur.seed);
        since_new_best = 0;
      } else if (++since_new_best >= kReseedAfter) {
        // What the walk left behind may hold evictions that do not help (a walk that never
        // bettered its start has been swept already).
        if (walk_moved) prune(walk_best);
        bool other = false;
        if (round_at == base) {  // a round of the first starts is done
          const double now = merit(best_->sim);
          other = !(now < round_best * (1 - 1e-9)) && starts.size() > base;
          round_best = now;
          round_at = 0;
        }
        cur = walk_best = starts[other ? base + others++ % (starts.size() - base) : round_at++];
        walk_past_demand_ = true;
        since_best = since_new_best = walked = 0;
        walk_moved = false;
        continue;
      }
      if (score(cur.sim) < score(walk_best.sim) * (1 - 1e-9)) {
        walk_best = cur;
        walk_moved = true;
        since_best = since_new_best = 0;
      } else if (++since_best >= kRestartAfter) {
        cur = walk_best;
        since_best = 0;
      }
    }
  }

  // SearchOptions::threads walks, one on the calling thread (walk 0, with the search's generator)
  // and the others each on a thread of its own, with a generator seeded from the search's seed and
  // its number. Each starts from the same plans, so walks differ by their moves only; each takes
  // an even share of the evaluations left, and only the calling thread reads the clock, stopping
  // the others when the time is up. The best plan of all wins, ties going to the lower walk, so
  // the result depends on the seed and the number of walks only. Returns how many walks ran: a
  // walk whose thread cannot be started (the process is out of threads or memory) is left out,
  // with its share of the evaluations, and so is a walk that would have no evaluation to run.
  std::size_t walk_side_by_side(const std::vector<Best>& starts, std::size_t base) {
    const std::size_t used = evaluations_, left = cap_ > used ? cap_ - used : 0;
    // No walk with nothing to simulate.
    const std::size_t n =
        std::clamp<std::size_t>(std::min<std::size_t>(o_.threads, left), 1, kMaxThreads);
    auto share = [&](std::size_t i) { return used + left / n + (i < left % n ? 1 : 0); };
    Shared shared;
    std::vector<Search> others;
    others.reserve(n - 1);
    for (std::size_t i = 1; i < n; ++i) {
      Search& w = others.emplace_back(*this);
      w.rng_.seed(walk_seed(o_.seed, i));
      w.cap_ = share(i);
      w.shared_ = &shared;
      w.on_other_thread_ = true;
      w.improvements_ = 0;
    }
    cap_ = share(0);
    shared_ = &shared;
    std::vector<std::exception_ptr> errors(n - 1);
    std::vector<std::thread> threads;
    threads.reserve(n - 1);
    shared.running = n - 1;
    for (std::size_t i = 0; i + 1 < n; ++i) {
      try {
        threads.emplace_back([&, i] {
          try {
            others[i].walk(starts, base);
          } catch (...) {
            errors[i] = std::current_exception();
            shared.stop.store(true);
          }
          std::lock_guard<std::mutex> lock(shared.m);
          --shared.running;
          shared.done.notify_all();
        });
      } catch (...) {  // std::system_error (out of threads) or std::bad_alloc
        break;
      }
    }
    {
      std::lock_guard<std::mutex> lock(shared.m);
      shared.running -= n - 1 - threads.size();
    }
    std::exception_ptr mine;
    try {
      walk(starts, base);
      // Done with its share: the others may not be, and only this thread reads the clock.
      for (;;) {
        if (stop_walks()) shared.stop.store(true);
        hear();
        std::unique_lock<std::mutex> lock(shared.m);
        if (shared.done.wait_for(lock, std::chrono::milliseconds(1),
                                 [&] { return shared.running == 0; }))
          break;
      }
    } catch (...) {
      mine = std::current_exception();
      shared.stop.store(true);
    }
    for (std::thread& t : threads) t.join();
    shared_ = nullptr;
    if (mine) std::rethrow_exception(mine);
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
    for (std::size_t i = 0; i < threads.size(); ++i) {
      Search& w = others[i];
      evaluations_ += w.evaluations_ - used;
      improvements_ += w.improvements_;
      if (w.best_ && merit(w.best_->sim) < merit(best_->sim)) best_ = std::move(w.best_);
    }
    if (o_.on_improvement && merit(best_->sim) < heard_) publish(best_->plan, best_->sim);
    return threads.size() + 1;
  }

  // What the walk compares plans by. With require_fit, a plan with demand evictions comes after
  // every plan that fits, in the first walk; the walks after the first fresh start rank it by its
  // step, losing ties only, as without require_fit, so that they can pass through such plans to
  // plans that fit beyond them (the corpus's swap-only VGG-16 at 90% of its peak: 1.07-1.09 of
  // the bound with seeds 1-3 at the 200 ms search's evaluation count, against 1.29-1.33 with
  // every walk kept to plans that fit). What is best is decided by rank.
  double score(const SimResult& s) const { return score(s, walk_past_demand_); }
  // The score in a walk that has (past_demand) or has not yet passed its first fresh start.
  double score(const SimResult& s, bool past_demand) const {
    if (!s.feasible) return std::numeric_limits<double>::infinity();
    if (s.access_violations) return kInvalidPenalty + s.step_time_us;
    if (s.demand_evictions == 0) return s.step_time_us;
    return s.step_time_us * (o_.require_fit && !past_demand ? kRequireFitPenalty : kDemandPenalty);
  }
  // What the best plan is chosen by: the score, with require_fit any plan that fits first.
  double rank(const SimResult& s) const {
    const double sc = score(s);
    return o_.require_fit && walk_past_demand_ && s.demand_evictions && std::isfinite(sc)
               ? sc * kRequireFitPenalty
               : sc;
  }

  // A sweep over b's entries, from the last: each is taken out, or failing that traded swap for
  // recompute or back, where the simulator rates the plan no worse; every plan is considered for
  // the best. Planners evict more than the simulator needs (their memory models are coarser),
  // or swap where the link is saturated and recomputing costs less, and the walk makes such a
  // move one time in ten on a random entry: on a plan of hundreds of entries it takes thousands
  // of moves to find them. Two-stream BERT with recompute at 30% of its peak: 3.61 of the bound
  // after 1,000 plans without the sweep, 1.85 with it.
  //
  // With helper threads (helpers_), the plans the sweep would try next from b are simulated
  // together, one per thread, and taken in the sweep's order up to the first one kept, which
  // changes b; the ones after it are dropped, uncounted. So the sweep tries, keeps and counts the
  // same plans whatever the number of threads. Few are kept where the seeds are swap-only (none of
  // 918 on two-stream BERT at 30% of its peak) and about a third with recompute.
  Best prune(Best b) {
    struct Step {
      std::size_t k;  // the entry
      bool trade;     // false: taken out; true: traded swap for recompute or back
    };
    // The plan of a step from b; none when the step does not apply (a trade that cannot be made).
    auto plan_of = [&](const Step& st) -> std::optional<Plan> {
      Plan q = b.plan;
      if (!st.trade) {
        q.entries.erase(q.entries.begin() + static_cast<std::ptrdiff_t>(st.k));
        return q;
      }
      if (!trade(q.entries[st.k])) return std::nullopt;
      return q;
    };
    const std::size_t width = helpers_ ? helpers_->width() : 1;
    std::optional<Step> at;  // the next step; none once the sweep is done
    if (!b.plan.entries.empty()) at = Step{b.plan.entries.size() - 1, false};
    while (at && !stop()) {
      // The next steps from b, as long as none is kept.
      std::vector<Step> steps;
      std::vector<Plan> plans;
      for (std::optional<Step> st = at; st && plans.size() < width;) {
        if (std::optional<Plan> q = plan_of(*st)) {
          steps.push_back(*st);
          plans.push_back(std::move(*q));
        }
        st = st->trade ? (st->k > 0 ? std::optional<Step>(Step{st->k - 1, false}) : std::nullopt)
                       : std::optional<Step>(Step{st->k, true});
      }
      if (plans.empty()) break;
      std::vector<SimResult> sims = simulate_all(plans);
      for (std::size_t i = 0; i < plans.size(); ++i) {
        ++evaluations_;
        consider(plans[i], sims[i], b.seed);
        const Step st = steps[i];
        // After a step kept, or a trade, the next entry down; after an entry not taken out, its
        // trade.
        const bool kept = score(sims[i]) <= score(b.sim);
        if (kept) b = Best{std::move(plans[i]), std::move(sims[i]), b.seed};
        if (kept || st.trade)
          at = st.k > 0 ? std::optional<Step>(Step{st.k - 1, false}) : std::nullopt;
        else
          at = Step{st.k, true};
        if (kept || stop()) break;
      }
    }
    return b;
  }

  // Simulates `plan` once and considers it for the best plan; none when the search has stopped
  // (`seeding`: where the seeds may stop, seeding_done).
  std::optional<Best> simulated(Plan plan, const std::string& name, bool seeding) {
    if (seeding ? seeding_done() : stop()) return std::nullopt;
    SimResult s = eval(plan);
    consider(plan, s, name);
    return Best{std::move(plan), std::move(s), name};
  }
  // The same for a seed simulated already (`sim`, not counted yet), where the seeds may stop.
  std::optional<Best> simulated(Plan plan, SimResult sim, const std::string& name) {
    if (batch_done()) return std::nullopt;
    ++evaluations_;
    consider(plan, sim, name);
    return Best{std::move(plan), std::move(sim), name};
  }

  // While the last round has late prefetches, applies the feedback rule to it and simulates
  // again, up to kFeedbackRounds rounds in all (b's own included); every round is considered for
  // the best plan. Returns the best round. `ahead`: rounds simulated already (feedback_rounds,
  // not counted yet), taken before any is simulated here.
  Best with_feedback(Best b, std::vector<Best> ahead = {}) {
    Best last = b;
    for (std::size_t round = 1; round < kFeedbackRounds && !stop(); ++round) {
      std::optional<Best> next;
      if (round <= ahead.size())
        next = std::move(ahead[round - 1]);
      else
        next = feedback_round(last);
      if (!next) break;
      ++evaluations_;
      consider(next->plan, next->sim, b.seed);
      last = std::move(*next);
      if (score(last.sim) < score(b.sim)) b = last;
    }
    return b;
  }

  // The feedback round after `last`, simulated (not counted); none when it has no late prefetch.
  std::optional<Best> feedback_round(const Best& last) const {
    if (std::none_of(last.sim.lateness_us.begin(), last.sim.lateness_us.end(),
                     [](double x) { return x > 0; }))
      return std::nullopt;
    Plan next = apply_feedback(a_, last.plan, last.sim.lateness_us);
    SimResult s = simulate(a_, next, budget_);
    return Best{std::move(next), std::move(s), last.seed};
  }

  // with_feedback's rounds after b, simulated ahead on any thread (not counted, not considered),
  // until one has no late prefetch or `leave` says to stop.
  template <typename Leave>
  std::vector<Best> feedback_rounds(const Best& b, Leave leave) const {
    std::vector<Best> rounds;
    for (std::size_t round = 1; round < kFeedbackRounds && !leave(); ++round) {
      std::optional<Best> next = feedback_round(rounds.empty() ? b : rounds.back());
      if (!next) break;
      rounds.push_back(std::move(*next));
    }
    return rounds;
  }

  // Runs job(i) for every i < n: on the helper threads and this one, or on this one alone.
  void run_jobs(std::size_t n, const std::function<void(std::size_t)>& job,
                const std::function<void()>& waiting = {}) {
    if (helpers_ && n > 1) {
      helpers_->run(n, job, waiting);
      return;
    }
    for (std::size_t i = 0; i < n; ++i) job(i);
  }

  // Simulates every plan (not counted), side by side on the helper threads where there are.
  std::vector<SimResult> simulate_all(const std::vector<Plan>& plans) {
    std::vector<SimResult> sims(plans.size());
    run_jobs(plans.size(), [&](std::size_t i) { sims[i] = simulate(a_, plans[i], budget_); });
    return sims;
  }

  Plan make_seed(const std::string& name) const {
    CapuchinOptions full, swap_only;
    full.cancel = swap_only.cancel = o_.cancel;
    swap_only.allow_recompute = false;
    if (name == "capuchin")
      return plan_capuchin(a_, budget_, o_.allow_recompute ? full : swap_only);
    if (name == "swap-only") return plan_capuchin(a_, budget_, swap_only);
    if (name == "recompute") return plan_recompute_only(a_, budget_);
    if (name == "belady") return plan_belady(a_, budget_);
    if (name == "delta") return plan_delta(a_, budget_);
    if (name == "vdnn") return plan_vdnn(a_, budget_);
    return plan_lru(a_, budget_);
  }

  // `simulated`: res.sim holds the plan's simulation, which then decides `fits`; otherwise the
  // greedy planner's own verdict stands (its memory model is the simulator's).
  void finish(SearchResult& res, bool simulated) {
    res.plan.policy = "capuchin";
    if (simulated) res.plan.fits = fits(res.sim);
    if (!res.plan.fits && res.plan.feasible) {  // regions not used yet leaving no room, else
      std::string why = unplannable_budget_reason(a_, budget_);  // what the seed says
      if (!why.empty()) res.plan.reason = std::move(why);
      if (res.plan.reason.empty())
        res.plan.reason = res.sim.access_violations
                              ? "the best plan found reads data it does not have (a drop whose "
                                "recomputation cannot run)"
                              : "the best plan found still needs demand evictions";
    }
    if (res.plan.fits) res.plan.reason.clear();
    res.evaluations = evaluations_;
    res.improvements = improvements_;
    res.cancelled = o_.cancel && o_.cancel->load(std::memory_order_relaxed);
    res.out_of_time = out_of_time_;
  }

  void strip_recompute(Plan& p) const {
    for (PlanEntry& e : p.entries)
      if (e.kind == EvictKind::kRecompute) {
        e.kind = EvictKind::kSwap;
        if (e.trigger == kNoLaunch) e.trigger = e.back_access;
        e.swap_in_us = static_cast<double>(t_.regions[a_.index.at(e.region)].bytes) /
                       (t_.device.h2d_bytes_per_s / 1e6);
      }
  }

  // A region carried across iterations and read by one launch only: optimizer state (an Adam
  // moment), which a plan takes off with a wrap entry, copied out after that launch and back
  // before it in the next iteration.
  bool read_once_persistent(std::size_t r) const {
    return a_.evictable(r) && a_.live_at_start[r] && a_.live_at_end[r] &&
           a_.accesses[r].size() == 1;
  }

  // `base` with its wraps of read-once persistent regions replaced by as many bytes of such
  // regions spread evenly over the order of their launches (empty when it wraps fewer than two).
  // The greedy planner and the baselines wrap the state of the last optimizer steps, whose
  // copy-outs can begin only once the optimizer reaches them: on optimizer-heavy at 90% of the
  // peak, 6.3 ms into a 7.1 ms ideal step, while both copy engines need 12.75 ms. Spread, each
  // comes back just before its step and leaves just after, and the copies overlap the rest of
  // the optimizer. The restores keep the base plan's triggers, in the same order, since those
  // say when memory frees up for them.
  Plan spread_wraps(const Plan& base) const {
    Plan out = base;
    out.entries.clear();
    std::vector<std::size_t> triggers;
    double wrapped = 0;
    for (const PlanEntry& e : base.entries) {
      const auto it = a_.index.find(e.region);
      if (it != a_.index.end() && e.kind == EvictKind::kSwap && is_wrap(e) &&
          read_once_persistent(it->second)) {
        triggers.push_back(e.trigger);
        wrapped += static_cast<double>(t_.regions[it->second].bytes);
      } else {
        out.entries.push_back(e);
      }
    }
    if (triggers.size() < 2) return {};
    std::vector<std::size_t> regions;
    double total = 0;
    for (std::size_t r = 0; r < t_.regions.size(); ++r)
      if (read_once_persistent(r)) regions.push_back(r), total += t_.regions[r].bytes;
    std::stable_sort(regions.begin(), regions.end(), [&](std::size_t x, std::size_t y) {
      return a_.accesses[x][0] < a_.accesses[y][0];
    });
    // Take a region when the bytes due so far (the wrapped share of every region passed) reach
    // half of it beyond the bytes taken.
    const double share = std::min(1.0, wrapped / total);
    double due = 0, taken = 0;
    std::vector<std::size_t> chosen;
    for (std::size_t r : regions) {
      const double b = static_cast<double>(t_.regions[r].bytes);
      due += b * share;
      if (due >= taken + b / 2) chosen.push_back(r), taken += b;
    }
    std::sort(triggers.begin(), triggers.end());
    for (std::size_t k = 0; k < chosen.size(); ++k) {
      const std::size_t r = chosen[k], at = a_.accesses[r][0];
      PlanEntry e = entry_for({r, at, at}, false);
      e.trigger = triggers[k * triggers.size() / chosen.size()];
      out.entries.push_back(e);
    }
    return out;
  }

  // `base` with every wrap of a region carried across iterations replaced by its early gap:
  // evicted after the iteration's first launch instead of after its last use, back for the same
  // first use (empty when it wraps none). The copy-out then runs while the iteration starts,
  // where a wrap's, after the optimizer, ends the step. The seeds evict optimizer state first
  // (its next use is the furthest), so where little must leave (90% of the peak) they wrap it
  // and nothing else: a 48-layer transformer, swap-only, at 1.34 of the bound (belady), 1.07 in
  // this form.
  Plan early_wraps(const Plan& base) const {
    Plan out = base;
    bool changed = false;
    for (PlanEntry& e : out.entries) {
      const auto it = a_.index.find(e.region);
      if (it == a_.index.end() || e.kind != EvictKind::kSwap || !is_wrap(e)) continue;
      const std::size_t r = it->second;
      if (!a_.live_at_start[r] || !a_.live_at_end[r] || a_.accesses[r].front() <= kEarly + 1)
        continue;
      const std::size_t trigger = e.trigger;
      e = entry_for({r, kEarly, a_.accesses[r].front()}, false);
      e.trigger = std::clamp(trigger, kEarly + 1, e.back_access);  // when memory frees up
      changed = true;
    }
    return changed ? out : Plan{};
  }

  // `base` with every recomputable region dropped over each gap between two of its accesses that
  // holds a launch over the budget and that base leaves alone, those entries first (empty when
  // there are none, or when base already drops at least as many bytes as it swaps: the walk
  // refines such a plan, and the sweep would only take plans from it). A sweep (prune), from the
  // last entry, then takes out the swaps they make needless, or trades them for drops.
  // Optimizer-heavy at 70% of its peak: 1.37 of the bound in 200 ms before (swap-only plans,
  // link-bound), 1.12 with it.
  Plan with_drops(const Plan& base) const {
    if (!o_.allow_recompute) return {};
    double swapped = 0, dropped = 0;
    for (const PlanEntry& e : base.entries)
      (e.kind == EvictKind::kSwap ? swapped : dropped) +=
          static_cast<double>(t_.regions[a_.index.at(e.region)].bytes);
    if (dropped >= swapped) return {};
    const std::size_t n = a_.n;
    std::vector<std::size_t> over(n + 1, 0);
    for (std::size_t i = 0; i < n; ++i) over[i + 1] = over[i] + (a_.live_bytes[i] > budget_);
    // What base already evicts, as taken() reads it: by (region, access after) and by (region,
    // access before).
    std::vector<std::pair<RegionId, std::size_t>> after, before;
    for (const PlanEntry& e : base.entries) {
      after.emplace_back(e.region, e.evict_after);
      if (e.back_access != kNoLaunch) before.emplace_back(e.region, e.back_access);
    }
    std::sort(after.begin(), after.end());
    std::sort(before.begin(), before.end());
    Plan out = base;
    out.entries.clear();
    for (std::size_t r = 0; r < t_.regions.size(); ++r) {
      if (!t_.regions[r].recompute || !a_.evictable(r)) continue;
      const RegionId id = t_.regions[r].id;
      const auto& acc = a_.accesses[r];
      for (std::size_t k = 0; k + 1 < acc.size(); ++k) {
        const Gap g{r, acc[k], acc[k + 1]};
        if (over[g.b] == over[g.e + 1] || !recomputable(g) ||
            std::binary_search(after.begin(), after.end(), std::make_pair(id, g.e)) ||
            std::binary_search(before.begin(), before.end(), std::make_pair(id, g.b)))
          continue;
        out.entries.push_back(entry_for(g, true));
      }
    }
    if (out.entries.empty()) return {};
    out.entries.insert(out.entries.end(), base.entries.begin(), base.entries.end());
    return out;
  }

  // Whether `ms` more fit in the time budget (always, without a clock).
  bool room_for(double ms) const {
    return !o_.now_ms || o_.now_ms() - start_ms_ + ms <= o_.time_budget_ms;
  }

  bool stop() {
    if (evaluations_ >= cap_) return true;
    if (on_other_thread_)
      return shared_->stop.load(std::memory_order_relaxed) ||
             (o_.cancel && o_.cancel->load(std::memory_order_relaxed));
    // Another walk failed (its exception comes out once every walk has stopped).
    if (shared_ && shared_->stop.load(std::memory_order_relaxed)) return true;
    hear();
    return stop_walks();
  }

  // The calling thread's checks: the cancellation flag and the clock.
  bool stop_walks() {
    if (o_.cancel && o_.cancel->load(std::memory_order_relaxed)) return true;
    if (o_.now_ms && o_.now_ms() - start_ms_ > o_.time_budget_ms) {
      out_of_time_ = true;
      return true;
    }
    return false;
  }

  // Whether the seeds may stop here. Out of time or evaluations, they go on until the simulator
  // has run one: what the search returns is what gswapd publishes, and a greedy plan, even one
  // that fits by its own verdict, may be one the simulator cannot run at all (say, a
  // recomputation with no room beside its sources), where a baseline would have run. Only a
  // cancellation stops them at once (its caller drops the result).
  bool seeding_done() {
    if (o_.cancel && o_.cancel->load(std::memory_order_relaxed)) return true;
    return stop() && best_ && best_->sim.feasible;
  }
  // The same for a seed made and simulated already, beside an earlier one of its batch (helper
  // threads): the clock does not leave it out, as its cost is paid; the evaluation cap does, as
  // on one thread. On a long iteration the batch that takes the time budget may hold the best
  // seed: on a 2,000-layer transformer (58,010 launches) at 30% of its peak, the greedy plan runs
  // 32.7 times the ideal step, behind recompute-only and no plan at all, and Belady's plan, made
  // beside it, 12.3 times.
  bool batch_done() {
    if (o_.cancel && o_.cancel->load(std::memory_order_relaxed)) return true;
    return evaluations_ >= cap_ && best_ && best_->sim.feasible;
  }

  SimResult eval(const Plan& p) {
    ++evaluations_;
    return simulate(a_, p, budget_);
  }

  void consider(const Plan& p, const SimResult& s, const std::string& seed) {
    if (fits(s) && (!best_fit_ || s.step_time_us < best_fit_->sim.step_time_us))
      best_fit_ = Best{p, s, seed};
    if (best_ && rank(s) >= rank(best_->sim)) return;
    best_ = Best{p, s, seed};
    if (!o_.on_improvement) return;
    if (on_other_thread_) {  // for the calling thread to hear (hear)
      std::lock_guard<std::mutex> lock(shared_->m);
      if (!shared_->posted || merit(s) < merit(shared_->posted->sim)) shared_->posted = best_;
      return;
    }
    if (!shared_ || merit(s) < heard_) publish(p, s);
  }

  // Calls on_improvement with the plan.
  void publish(const Plan& p, const SimResult& s) {
    heard_ = merit(s);
    Plan pub = p;
    pub.policy = "capuchin";
    pub.fits = fits(s);
    o_.on_improvement(pub, s);
  }

  // On the calling thread, while walks run side by side: on_improvement hears of the best plan
  // the other walks posted when it is better than every plan it heard of before.
  void hear() {
    if (!shared_ || on_other_thread_ || !o_.on_improvement) return;
    std::optional<Best> b;
    {
      std::lock_guard<std::mutex> lock(shared_->m);
      b.swap(shared_->posted);
    }
    if (b && merit(b->sim) < heard_) publish(b->plan, b->sim);
  }

  // How walks' best plans compare, the same in every walk: the score of a walk before its first
  // fresh start (rank's order, up to its tie-breaking factors).
  double merit(const SimResult& s) const { return score(s, /*past_demand=*/false); }

  std::size_t pick(std::size_t n) { return static_cast<std::size_t>(rng_() % n); }

  bool recomputable(const Gap& g) const {
    if (!o_.allow_recompute) return false;
    const Region& reg = t_.regions[g.r];
    if (!reg.recompute || (g.b != kNoLaunch && g.b <= g.e)) return false;
    if (g.b == kNoLaunch) return !a_.live_at_end[g.r];  // a drop of dead data only
    for (RegionId s : reg.recompute->sources) {
      auto it = a_.index.find(s);
      if (it == a_.index.end() || a_.first_live[it->second] > g.b || a_.last_live[it->second] < g.b)
        return false;
    }
    return true;
  }

  PlanEntry entry_for(const Gap& g, bool recompute) const {
    PlanEntry e;
    e.region = t_.regions[g.r].id;
    e.evict_after = g.e;
    e.back_access = g.b;
    if (recompute) {
      e.kind = EvictKind::kRecompute;
      e.trigger = g.b;
      return e;
    }
    e.kind = EvictKind::kSwap;
    if (g.b == kNoLaunch) return e;
    const SwapTiming st = swap_timing(a_, t_.regions[g.r].bytes, g.e, g.b);
    e.trigger = st.in_trigger;
    if (g.b > g.e) e.trigger = std::clamp(e.trigger, g.e + 1, g.b);
    e.swap_in_us = st.swap_in_us;
    return e;
  }

  // The trigger for entry `k` of `p`, a restore, past every launch before its back-access where
  // the plan's memory model is over the budget: the trace's live bytes there, less those the
  // other entries keep off the device (from the launch after the eviction to the one before the
  // restore is issued). Restored before such a launch, the region may be back where the plan has
  // no room even without it, and another region leave on demand. swap_timing's trigger hides the
  // copy but knows nothing of memory: on random 17 of the exact table it gave 1.82 times the
  // optimum, and the shifts of a quarter of the gap at most did not reach the four triggers after
  // the peak that give the optimum across the plans in between, all at 1.82. The entry's own
  // trigger where no launch there is over the budget, or where it is no restore.
  std::size_t after_planned_peak(const Plan& p, std::size_t k) const {
    const PlanEntry& e = p.entries[k];
    if (e.kind != EvictKind::kSwap || e.back_access == kNoLaunch || e.trigger == kNoLaunch ||
        e.trigger >= e.back_access)
      return e.trigger;
    MaxSegmentTree curve(std::vector<std::int64_t>(a_.live_bytes.begin(), a_.live_bytes.end()));
    for (std::size_t j = 0; j < p.entries.size(); ++j) {
      if (j == k) continue;
      const PlanEntry& x = p.entries[j];
      const auto bytes = static_cast<std::int64_t>(t_.regions[a_.index.at(x.region)].bytes);
      const bool restored = x.kind == EvictKind::kSwap && x.trigger != kNoLaunch;
      off_ranges(a_, x, first_launch_evicted(x, a_.n), restored ? x.trigger : x.back_access,
                 [&](std::size_t lo, std::size_t hi) { curve.add(lo, hi - 1, -bytes); });
    }
    // Compared as the curve's values are: a budget of 2^63 bytes or more is above them all.
    const auto budget = static_cast<std::int64_t>(
        std::min<std::uint64_t>(budget_, std::numeric_limits<std::int64_t>::max()));
    const std::size_t last = curve.find_last_above(e.trigger, e.back_access - 1, budget);
    return last == MaxSegmentTree::npos ? e.trigger : last + 1;
  }

  // Whether `p` already takes g's region off for the same back-access (a wrap and an early gap
  // both end at the first use), or for g itself: two entries would each restore it, and the
  // library follows both (the simulator only the one that evicted it last).
  // `except`: an entry not to count (the one a move is about to change).
  bool taken(const Plan& p, const Gap& g, std::size_t except = kNoLaunch) const {
    const RegionId id = t_.regions[g.r].id;
    for (std::size_t k = 0; k < p.entries.size(); ++k) {
      const PlanEntry& e = p.entries[k];
      if (k != except && e.region == id &&
          (e.evict_after == g.e || (g.b != kNoLaunch && e.back_access == g.b)))
        return true;
    }
    return false;
  }

  // Trades e's swap for a recomputation over the same gap, or back; false when its region cannot
  // be recomputed there.
  bool trade(PlanEntry& e) const {
    const Gap g{a_.index.at(e.region), e.evict_after, e.back_access};
    const bool to_recompute = e.kind == EvictKind::kSwap;
    if (to_recompute && !recomputable(g)) return false;
    e = entry_for(g, to_recompute);
    return true;
  }

  // Edits `p` by one move; false when the move drawn does not apply.
  bool move(Plan& p, const SimResult& last) {
    const std::vector<Gap>& gaps = moves_->gaps;
    const std::vector<std::vector<std::size_t>>& persistent = moves_->persistent;
    const std::size_t kind = pick(10);
    if (p.entries.empty() || kind < 2) {  // add an eviction
      const Gap& g = gaps[pick(gaps.size())];
      if (taken(p, g)) return false;
      p.entries.push_back(entry_for(g, recomputable(g) && pick(2) == 0));
      made_ = p.entries.size() - 1;
      return true;
    }
    if (kind == 2 && !persistent.empty()) {  // a persistent region off between all its uses
      const auto& gs = persistent[pick(persistent.size())];
      bool added = false;
      for (std::size_t gi : gs)
        if (!taken(p, gaps[gi])) p.entries.push_back(entry_for(gaps[gi], false)), added = true;
      return added;
    }
    // Prefer the entries that were late last time.
    std::size_t k = pick(p.entries.size());
    if (kind >= 7 && !last.lateness_us.empty()) {
      std::vector<std::size_t> late;
      for (std::size_t j = 0; j < last.lateness_us.size() && j < p.entries.size(); ++j)
        if (last.lateness_us[j] > 0) late.push_back(j);
      if (!late.empty()) k = late[pick(late.size())];
    }
    PlanEntry& e = p.entries[k];
    const std::size_t r = a_.index.at(e.region);
    switch (kind) {
      case 3:  // drop the eviction
        p.entries.erase(p.entries.begin() + static_cast<std::ptrdiff_t>(k));
        return true;
      case 4:  // trade swap for recompute or back
        return trade(e);
      case 5: {  // move the eviction to another gap of the same region
        std::vector<std::size_t> same;
        for (std::size_t gi = 0; gi < gaps.size(); ++gi)
          if (gaps[gi].r == r && gaps[gi].e != e.evict_after && !taken(p, gaps[gi], k))
            same.push_back(gi);
        if (same.empty()) return false;
        const Gap& g = gaps[same[pick(same.size())]];
        e = entry_for(g, e.kind == EvictKind::kRecompute && recomputable(g));
        made_ = k;
        return true;
      }
      default: {  // shift a restore's trigger
        if (e.kind != EvictKind::kSwap || e.back_access == kNoLaunch || e.trigger == kNoLaunch)
          return false;
        const bool wrap = is_wrap(e);
        const std::size_t lo = wrap ? 0 : e.evict_after + 1, hi = e.back_access;
        if (hi <= lo) return false;
        const std::size_t span = std::max<std::size_t>(1, (hi - lo) / 4);
        const std::size_t d = 1 + pick(span);
        const bool earlier = kind >= 7 || pick(2) == 0;
        std::size_t t = e.trigger;
        t = earlier ? (t >= lo + d ? t - d : lo) : std::min(hi, t + d);
        if (t == e.trigger) return false;
        e.trigger = t;
        return true;
      }
    }
  }

  const Analysis& a_;
  const Trace& t_;
  std::uint64_t budget_;
  const SearchOptions& o_;
  std::mt19937_64 rng_;
  double start_ms_ = 0;
  // The gaps and the persistent regions' gap lists, made once and shared by the walks.
  struct Moves {
    std::vector<Gap> gaps;
    std::vector<std::vector<std::size_t>> persistent;  // per persistent region: its gaps
  };
  std::shared_ptr<const Moves> moves_;
  std::size_t made_ = kNoLaunch;  // the entry the last move made afresh, if it made one
  std::optional<Best> best_;
  std::optional<Best> best_fit_;  // the best plan simulated that fits (fits)
  // Helper threads, with threads > 1, while the seeds are made, simulated and swept.
  std::shared_ptr<Helpers> helpers_;
  const std::thread::id caller_ = std::this_thread::get_id();  // the thread that runs the search
  // What walks side by side share (walk_side_by_side).
  struct Shared {
    std::atomic<bool> stop{false};  // set by the calling thread: out of time, or cancelled
    std::mutex m;                   // guards what follows
    std::condition_variable done;   // signalled as each walk on another thread ends
    std::size_t running = 0;        // walks on other threads still running
    std::optional<Best> posted;     // their best plan not yet heard of (with on_improvement)
  };
  Shared* shared_ = nullptr;      // while walks run side by side
  bool on_other_thread_ = false;  // a walk on a thread of its own: never reads the clock
  std::size_t cap_;               // evaluations at which this walk stops
  double heard_ = std::numeric_limits<double>::infinity();  // merit of the last plan published
  std::size_t evaluations_ = 0, improvements_ = 0;
  bool out_of_time_ = false;
  bool walk_past_demand_ = false;  // see score
};

}  // namespace

SearchResult search_plan(const Analysis& a, std::uint64_t budget, const SearchOptions& options) {
  if (options.allow_recompute || !a.trace) return Search(a, budget, options).run();
  // Swap-only: plan on a copy of the trace that registers no recomputation, so that no seed
  // (DELTA included) and no move can choose one. Positions and region ids are unchanged.
  const Trace stripped = without_recompute(*a.trace);
  const Analysis sa = analyze(stripped);
  SearchResult r = Search(sa, budget, options).run();
  r.sim = simulate(a, r.plan, budget);
  r.plan.fits = fits(r.sim);
  return r;
}

std::size_t usable_search_threads(std::uint64_t asked) {
  const std::uint64_t cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<std::size_t>(
      std::clamp<std::uint64_t>(std::min(asked, cores), 1, kMaxThreads));
}

bool refined_plan_replaces(double best_us, double published_us, bool last_step) {
  return best_us <= published_us * (1 - (last_step ? 0.005 : 0.02));
}

SearchResult plan_iteration(const Trace& trace, std::uint64_t budget,
                            const SearchOptions& options) {
  const Analysis a = analyze(trace);
  return search_plan(a, budget, options);
}

}  // namespace gswap::policy
