// planner.h: gswapd's planning thread. Planning an iteration (policy::plan_iteration: the greedy
// Capuchin plan, then a search scored by the simulator, within a time budget) takes from
// milliseconds to the whole budget, so it runs here, off the poll loop that serves every client.
//
// Threading: submit() and take_results() are called by the poll loop; the worker thread runs
// one job at a time. A job for a client replaces that client's job still waiting, and cancels the
// one being planned (its result would be stale). mutex_ owns the queue and the results.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

#include "policy/search.h"
#include "policy/trace.h"

namespace gswap::daemon {

class PlannerThread {
 public:
  struct Job {
    std::uint64_t client = 0;  // the client's serial (Client::serial)
    std::uint64_t token = 0;   // echoed in the result: which measured iteration it was for
    policy::Trace trace;
    std::uint64_t budget = 0;
    double time_budget_ms = 200;
    bool allow_recompute = true;
  };
  struct Result {
    std::uint64_t client = 0, token = 0;
    std::uint64_t budget = 0;
    policy::SearchResult search;
    double plan_ms = 0;  // wall time the planning took
  };

  PlannerThread();
  ~PlannerThread();
  PlannerThread(const PlannerThread&) = delete;
  PlannerThread& operator=(const PlannerThread&) = delete;

  void submit(Job job);
  void cancel(std::uint64_t client);  // the client left
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
  bool stopping_ = false;
  std::atomic<bool> cancel_running_{false};
  std::thread thread_;
};

}  // namespace gswap::daemon
