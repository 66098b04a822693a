// search.h: improves on the greedy plan by local search scored by the simulator (HOME's idea —
// search the whole plan with a simulator as the cost model — made practical by seeding with the
// greedy plan and moving one decision at a time).
//
// It is anytime: the best plan so far is always available, and `on_improvement` hears of every
// better one. It is deterministic for a seed and a number of threads: the sequence of moves tried
// depends on the trace, the budget, the seed and SearchOptions::threads only; the clock, the
// evaluation cap and the cancellation flag decide only where the sequences stop. A caller runs it
// on a thread of its own; with threads > 1 it starts that many walks less one on threads of its
// own, and joins them before it returns.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "policy/analysis.h"
#include "policy/plan.h"
#include "policy/simulator.h"

namespace gswap::policy {

struct SearchOptions {
  // Stop once now_ms() - start exceeds this (needs now_ms; ignored without it). Like the
  // evaluation cap below, it stops the search only once the simulator has run one of its plans
  // (see search_plan).
  double time_budget_ms = 200;
  // Milliseconds from any fixed origin. policy/ reads no clock of its own.
  std::function<double()> now_ms;
  // Stop after this many simulated plans (seeds included), whatever the clock says.
  std::size_t max_evaluations = 1'000'000;
  std::uint64_t seed = 1;
  // Walks side by side after the seeds (at most 64): one on the calling thread, the others each
  // on a thread of its own, all from the same plans, each with a generator of its own (the first
  // with `seed`'s), each taking an even share of the evaluations left under max_evaluations. The
  // best plan of all is returned, ties going to the lower walk, so a search is repeatable for a
  // seed and a number of threads. Only the calling thread reads now_ms and calls on_improvement.
  // 1: one walk, on the calling thread. Walks beyond the machine's hardware threads share its
  // cores, and the calling thread, which alone reads the clock, may then stop them late (64 walks
  // on 2 cores: 130-275 ms for a budget of 50); gswapd and gswapctl take usable_search_threads
  // (below). A walk whose thread cannot be started (out of threads or memory) is left out, and so
  // is one that would have no evaluation left to run. Before the walks, up to threads - 1 helper
  // threads (no more than the hardware threads) make and simulate the seeds, run their feedback
  // rounds and simulate the sweeps' next plans side by side, the search trying, keeping and
  // counting the same plans as on one thread.
  std::size_t threads = 1;
  // Checked between evaluations; set from another thread to stop early.
  const std::atomic<bool>* cancel = nullptr;
  // False: swap-only plans, whatever the trace registers as recomputable.
  bool allow_recompute = true;
  // True: a plan that needs demand evictions is returned only when no plan found fits (a faster
  // one otherwise wins, with fits == false). For a caller that wants plans to run as planned.
  // The first walk keeps to plans that fit; later walks may pass through others (search.cpp).
  bool require_fit = false;
  // Called with every plan better than all before it (the first is the best seed); with threads >
  // 1, with the best plan of the other walks when it is better than all it was called with, as
  // the calling thread checks between its simulations.
  std::function<void(const Plan&, const SimResult&)> on_improvement;
  // A plan to go on from, such as the best of an earlier search of the same iteration and budget,
  // which ran the seeds and swept them: it is the only seed (early forms, the sweep and the drops
  // over the peak are left out, as done there), and the walk starts from it, its spread form being
  // the fresh starts' other plan as usual. Ignored when not feasible. `start_seed` names it in
  // SearchResult::seed_policy. With another `seed`, a search that goes on from the last one's
  // plan walks other paths: gswapd refines a plan so, in steps (daemon/README.md).
  const Plan* start = nullptr;
  std::string start_seed = "start";
  // With `start`: seeds to make and simulate beside it, by the names SearchResult::seeds_left
  // gives (unknown names, and names of seeds the search would not make, such as "recompute"
  // swap-only, are ignored), such as those an earlier search of the same iteration ran out of
  // time before making. They run first, with their early forms and feedback rounds; where one
  // is better than the start plan, it is swept and dropped over the peak as in a first search.
  std::vector<std::string> seeds;
};

struct SearchResult {
  Plan plan;      // the best plan found; plan.fits is true only if it ran with no demand eviction
  SimResult sim;  // its simulation; empty (step_time_us 0) if the search was cancelled before
                  // the first simulation finished, and then plan.fits is the greedy planner's
                  // verdict
  std::string seed_policy;       // the seed it descends from
  std::size_t evaluations = 0;   // plans simulated
  std::size_t improvements = 0;  // accepted moves
  std::size_t walks = 0;         // walks run side by side after the seeds (0: stopped before)
  bool cancelled = false;        // stopped by the flag
  bool out_of_time = false;      // stopped by the time budget
  // The seeds it did not make (SearchOptions::seeds, or every seed without a start plan), the
  // time or the evaluation cap up first, in the order it would have made them: on a long
  // iteration the 200 ms may end after the first seeds. A search that goes on from its plan can
  // make them (SearchOptions::seeds), as gswapd's refinement does.
  std::vector<std::string> seeds_left;
};

// Seeds: the greedy hybrid plan (and its swap-only form), recompute-only, Belady's
// traffic-minimising plan, DELTA, vDNN and no plan at all, then each one's early form (its wraps of
// state carried across iterations evicted after the first launch instead), each simulated once
// and then, best first, refined by a few rounds of the feedback rule; the best by simulated step
// time is swept (evictions that do not help taken out) and, when it swaps more bytes than it
// drops, tried with every recomputable region dropped over the launches past the budget (swept
// too); the best plan is then improved by
// local moves: shift a trigger, move an
// eviction to another gap of the same region, add or drop an eviction, trade swap for recompute or
// back, take a persistent region off the device between all of its uses (and across the iteration
// boundary). Moves are accepted by simulated annealing: a worse plan now and then, less often as
// the search goes on, and back to the walk's best plan after a while without progress; after a
// longer while with no new best plan at all, the walk starts over from the seed (the first time
// from the seed with its wraps of optimizer state spread over the optimizer; where the seed evicts
// on demand, every so often from the best seed that does not; after a round of those that found
// nothing better, from the next other seed). A plan with demand
// evictions loses ties to one that fits, but a faster one wins (and is reported with fits ==
// false). The clock and the evaluation cap end the seeds only once one has run in the simulator,
// so a plan it cannot run is returned only when no seed runs (or when cancelled), even with a
// time budget of zero.
SearchResult search_plan(const Analysis& a, std::uint64_t budget, const SearchOptions& options);

// The walks to run for `asked` (gswapd's plan_search_threads, gswapctl simulate's
// --search-threads): no more than the machine's hardware threads (more would only share its
// cores), 1 to 64.
std::size_t usable_search_threads(std::uint64_t asked);

// gswapd's refinement of the plan it published (daemon/README.md): searches that go on from the
// best plan so far (SearchOptions::start), each with the next seed, for kRefineStepMs at most (a
// feedback check or another client's plan waits for one step at most).
constexpr double kRefineStepMs = 500;
// Whether a refined plan whose simulated step is best_us replaces the plan published, of
// published_us: when at least 2% shorter (a new plan starts its feedback over), 0.5% after the
// last step, which no further plan can follow.
bool refined_plan_replaces(double best_us, double published_us, bool last_step);

// The daemon's entry point: analyses one iteration's trace and returns the best plan found
// within the options' time budget (the greedy plan at least, also when the budget ends first).
// Thread-compatible: it touches nothing but its arguments, so a background thread may run it
// while another sets `options.cancel`; `options.on_improvement` is called on the calling thread.
SearchResult plan_iteration(const Trace& trace, std::uint64_t budget, const SearchOptions& options);

}  // namespace gswap::policy
