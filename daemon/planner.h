// planner.h: gswapd's planning thread. Planning an iteration (policy::plan_iteration: the greedy
// Capuchin plan, then a search scored by the simulator, within a time budget) takes from
// milliseconds to the whole budget, so it runs here, off the poll loop that serves every client.
//
// It also checks feedback (policy::apply_feedback_checked: triggers of late restores move earlier
// only where the simulator says it costs nothing), which simulates the plan at least twice.
//
// A refinement step goes on searching from the best plan found so far (SearchOptions::start),
// with another seed, for a step's time: gswapd spends plan_refine_ms so, step by step, once a plan
// is published. A step starts only when no other job waits, so a client's first plan or feedback
// waits for one step at most.
//
// Threading: submit() and take_results() are called by the poll loop; the worker thread runs
// one job at a time. A planning job for a client replaces that client's jobs still waiting, and
// cancels the one being run (its result would be stale). A feedback or refinement job replaces
// the client's job of its kind still waiting and is dropped while a planning job for the client
// is waiting or running (the new plan supersedes it). mutex_ owns the queue and the results.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "policy/capuchin.h"
#include "policy/search.h"
#include "policy/trace.h"

namespace gswap::daemon {

class PlannerThread {
 public:
  // A planning job searches for a plan; a feedback job checks the lateness of the plan followed;
  // a refinement step goes on searching from a plan.
  enum class Kind { kPlan, kFeedback, kRefine };
  struct Job {
    std::uint64_t client = 0;  // the client's serial (Client::serial)
    std::uint64_t token = 0;   // echoed in the result: which measured iteration it was for
    policy::Trace trace;
    std::uint64_t budget = 0;
    double time_budget_ms = 200;
    std::size_t threads = 1;  // walks side by side (policy::SearchOptions::threads)
    bool allow_recompute = true;
    Kind kind = Kind::kPlan;
    // A feedback job: the plan being followed and the lateness measured per entry. A refinement
    // step: the plan it goes on from.
    policy::Plan plan;
    std::vector<double> lateness_us;
    std::uint64_t plan_generation = 0;  // echoed: which published plan the lateness was for
    std::uint64_t seed = 1;             // a refinement step's search seed
    // A refinement step's seeds to make beside the plan (policy::SearchOptions::seeds): those
    // the searches before it ran out of time before making.
    std::vector<std::string> seeds;
    std::uint64_t refinement = 0;  // echoed: which refinement the step belongs to
  };
  struct Result {
    std::uint64_t client = 0, token = 0;
    std::uint64_t budget = 0;
    policy::SearchResult search;
    double plan_ms = 0;  // wall time the planning took
    Kind kind = Kind::kPlan;
    policy::CheckedFeedback checked;  // a feedback job's answer
    std::uint64_t plan_generation = 0;
    std::uint64_t refinement = 0;
  };

  PlannerThread();
  ~PlannerThread();
  PlannerThread(const PlannerThread&) = delete;
  PlannerThread& operator=(const PlannerThread&) = delete;

  bool submit(Job job);  // false: a feedback or refinement job dropped (see above)
  // The client left or measures again: its jobs and results are dropped.
  void cancel(std::uint64_t client);
  std::vector<Result> take_results();
  bool idle();

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  std::vector<Result> results_;
  std::uint64_t running_client_ = 0;
  bool running_ = false;
  Kind running_kind_ = Kind::kPlan;
  bool stopping_ = false;
  std::atomic<bool> cancel_running_{false};
  std::thread thread_;
};

}  // namespace gswap::daemon
