// planner.cpp: gswapd's planning thread (see planner.h).
#include "daemon/planner.h"

#include <malloc.h>

#include <algorithm>
#include <chrono>

namespace gswap::daemon {
namespace {
double now_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

PlannerThread::PlannerThread() : thread_([this] { run(); }) {}

PlannerThread::~PlannerThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    cancel_running_.store(true);
  }
  cv_.notify_all();
  thread_.join();
}

bool PlannerThread::submit(Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const bool planning_job = job.kind == Kind::kPlan;
    if (!planning_job) {
      bool planning = running_ && running_client_ == job.client && running_kind_ == Kind::kPlan;
      for (const Job& q : queue_)
        planning = planning || (q.client == job.client && q.kind == Kind::kPlan);
      // A plan made and not yet taken replaces what the job would check or refine.
      for (const Result& r : results_)
        planning = planning || (r.client == job.client && r.kind == Kind::kPlan);
      if (planning) return false;
    }
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->client == job.client && (planning_job || it->kind == job.kind))
        it = queue_.erase(it);
      else
        ++it;
    }
    if (planning_job && running_ && running_client_ == job.client) cancel_running_.store(true);
    queue_.push_back(std::move(job));
  }
  cv_.notify_all();
  return true;
}

void PlannerThread::cancel(std::uint64_t client) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (it->client == client)
      it = queue_.erase(it);
    else
      ++it;
  }
  if (running_ && running_client_ == client) cancel_running_.store(true);
  for (auto it = results_.begin(); it != results_.end();) {
    if (it->client == client)
      it = results_.erase(it);
    else
      ++it;
  }
}

std::vector<PlannerThread::Result> PlannerThread::take_results() {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Result> out;
  out.swap(results_);
  return out;
}

bool PlannerThread::idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !running_ && queue_.empty();
}

namespace {
// Jobs of iterations at least this long give their memory back to the system when done.
constexpr std::size_t kTrimAfterLaunches = 20'000;
}  // namespace

void PlannerThread::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  double trimmed_ms = -1e9;  // when the heap was last given back (below)
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    // Refinement steps wait for every other job.
    auto next = std::find_if(queue_.begin(), queue_.end(),
                             [](const Job& q) { return q.kind != Kind::kRefine; });
    if (next == queue_.end()) next = queue_.begin();
    Job job = std::move(*next);
    queue_.erase(next);
    running_ = true;
    running_client_ = job.client;
    running_kind_ = job.kind;
    cancel_running_.store(false);
    lock.unlock();

    Result r;
    r.client = job.client;
    r.token = job.token;
    r.budget = job.budget;
    r.kind = job.kind;
    r.plan_generation = job.plan_generation;
    r.refinement = job.refinement;
    const double t0 = now_ms();
    // A planning failure (out of memory, out of threads) costs the client its plan, not gswapd:
    // the plan says why and the client runs passive (a feedback check or refinement step just
    // changes nothing).
    try {
      if (job.kind == Kind::kFeedback) {
        const double deadline = t0 + job.time_budget_ms;
        const policy::Analysis a = policy::analyze(job.trace);
        r.checked = policy::apply_feedback_checked(a, job.plan, job.lateness_us, job.budget, [&] {
          return cancel_running_.load() || now_ms() > deadline;
        });
      } else {
        policy::SearchOptions opt;
        opt.time_budget_ms = job.time_budget_ms;
        opt.now_ms = now_ms;
        opt.cancel = &cancel_running_;
        opt.allow_recompute = job.allow_recompute;
        opt.threads = job.threads;
        // The library follows the plan's entries and keeps the rest on demand: a plan that fits
        // (no demand eviction in the simulator) is what it can execute as planned.
        opt.require_fit = true;
        if (job.kind == Kind::kRefine) {
          opt.start = &job.plan;
          opt.start_seed = "refined";
          opt.seed = job.seed;
          opt.seeds = job.seeds;
        }
        r.search = policy::plan_iteration(job.trace, job.budget, opt);
      }
    } catch (const std::exception& e) {
      r.search = policy::SearchResult{};
      r.search.plan.feasible = r.search.plan.fits = false;
      r.search.plan.reason = std::string("planning failed: ") + e.what();
      r.checked = policy::CheckedFeedback{};
    }
    r.plan_ms = now_ms() - t0;
    // A long iteration's job took hundreds of MiB (the trace's copy, the analysis, the search),
    // in this thread's heap: given back to the system once freed, or gswapd holds it for as long
    // as it runs (malloc_trim, as for a client that leaves). Only once no job waits, and once a
    // second at most: refinement steps and feedback checks of one client come every few hundred
    // milliseconds, and would give the memory back only to take it again.
    const bool large = job.trace.launches.size() >= kTrimAfterLaunches;
    const Kind kind = job.kind;
    job = Job{};

    lock.lock();
#ifdef __GLIBC__
    if (large && queue_.empty() && now_ms() - trimmed_ms >= 1000) {
      lock.unlock();  // submit() and cancel() go on meanwhile
      malloc_trim(0);
      trimmed_ms = now_ms();
      lock.lock();
    }
#endif
    running_ = false;
    const bool cancelled = kind == Kind::kFeedback ? cancel_running_.load() : r.search.cancelled;
    if (!cancelled) results_.push_back(std::move(r));
  }
}

}  // namespace gswap::daemon
