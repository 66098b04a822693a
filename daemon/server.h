// server.h: gswapd's socket, its clients and its control requests.
//
// Threading: run() is a poll loop that owns the listening socket, every pending connection and
// every Client; nothing here is touched from another thread except `stop`, an atomic flag set by
// the signal handler. Planning runs on the planner thread (planner.h), which sees only copies of
// traces and hands plans back through its own queue.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>
#include <spdlog/logger.h>

#include "daemon/client.h"
#include "daemon/control.h"
#include "daemon/config.h"
#include "daemon/gpu_probe.h"
#include "daemon/planner.h"

namespace gswap::daemon {

class Server {
 public:
  Server(const Config& config, const GpuIdentity& gpu, std::shared_ptr<spdlog::logger> log);
  ~Server();

  // Creates the runtime directory, takes the per-GPU lock and listens. On failure returns false
  // with *error set; *already_running tells a second daemon apart from other failures.
  bool open(std::string* error, bool* already_running);
  // Serves until `stop` becomes true.
  void run(const std::atomic<bool>& stop);
  // One iteration of the loop, waiting at most timeout_ms (exposed for tests).
  void tick(int timeout_ms);

  const std::string& socket_file() const { return socket_path_; }
  std::size_t num_clients() const { return clients_.size(); }

  // The limits of clients that connect from now on (exposed for tests: a small plan area).
  void set_client_limits(const ClientLimits& limits) { limits_ = limits; }

  // Control requests (exposed for tests): a JSON request in, a JSON response out.
  nlohmann::json handle_request(const nlohmann::json& request);
  nlohmann::json status_json() const;

 private:
  struct Pending {
    int fd;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    std::int64_t deadline_ms;
    bool not_allowed;  // refused by SO_PEERCRED; told so once its hello arrives
  };
  void accept_one();
  // Pending connections: the oldest one `which` picks (arrival order), the oldest of the user
  // holding the most (not-allowed users first), and closing one.
  std::size_t oldest_pending(const std::function<bool(const Pending&)>& which) const;
  std::size_t greediest_pending() const;
  void close_pending(std::size_t index);
  // revents: what poll said of the connection (a hang-up tells the end from an empty message).
  void handshake(Pending& p, short revents);
  void refuse(int fd, proto::HelloStatus status, const std::string& message);
  // "refused pid P: MSG", rate-limited: a peer refused in a loop must not fill the log.
  void log_refusal(pid_t pid, const std::string& msg);
  // The lines counted instead of written (refusals, connections closed before their hello),
  // once their second is over, whether or not more come.
  void flush_counted_lines(std::int64_t now);
  // A control peer past its hello: its exchange runs in the loop, never blocking it.
  struct ControlPeer {
    ControlExchange exchange;
    pid_t pid;
    std::int64_t deadline_ms;
  };
  void start_control(int fd, pid_t pid);
  // Reads, answers and writes what the peer's socket allows; false once it is finished or failed.
  bool serve_control(ControlPeer& c);
  std::string answer(const std::string& body);
  void drop(std::size_t index, const std::string& why);
  // Shares the GPU's budget among the clients. A share that falls is published at once (the
  // budgets never add up to more than the GPU's); one that rises waits kGrowDelayMs, so that a
  // client that connects and leaves in a loop does not move every other client's budget, and
  // their plans with it, at every turn.
  void rebalance();
  // The budget the client's library really enforces: its share, capped by its own GSWAP_BUDGET.
  std::uint64_t effective_budget(const Client& c) const;
  std::uint64_t plan_budget(const Client& c) const;
  bool raise_fixed_reserve(Client& c);
  static constexpr std::uint64_t kMinFixedReserveStep = 64ull << 10;
  static constexpr std::uint64_t kMaxFixedReserveStep = 256ull << 10;
  // Hands the client's measured iteration to the planning thread (under its effective budget).
  void replan(Client& c);
  void measure_again(Client& c, const std::string& why);
  // A plan came back from the planning thread: turn it into the library's entries, publish.
  // Returns how many of the plan's entries were left out (regions it cannot name in time).
  std::size_t publish_guided(Client& c, const policy::Plan& plan, const std::string& planner);
  // The feedback rule on the lateness the library reported; divergences.
  PlannerThread::Job planner_job(const Client& c) const;
  void apply_feedback(Client& c);
  void take_feedback(Client& c, const PlannerThread::Result& r);
  // Refinement (plan_refine_ms): the next step's search, and a step's result.
  void refine(Client& c);
  void take_refinement(Client& c, const PlannerThread::Result& r);
  void collect_plans();
  bool allowed(uid_t uid, gid_t gid) const;
  nlohmann::json client_json(const Client& c) const;
  nlohmann::json policy_json(const Client& c) const;

  const Config& config_;
  GpuIdentity gpu_;
  std::shared_ptr<spdlog::logger> log_;
  std::string dir_, socket_path_, lock_path_;
  int listen_fd_ = -1;
  static constexpr std::int64_t kGrowDelayMs = 1000;
  std::unordered_map<std::uint64_t, std::int64_t> grow_since_;  // client serial: share rose then
  std::int64_t rebalance_at_ms_ = 0;  // a risen share is due then (0: none waits)
  // Accepting failed for want of descriptors or memory: the listening socket is not polled until
  // then (server.cpp, tick), and the failure is logged once a second at most.
  static constexpr std::int64_t kAcceptPauseMs = 100;
  std::int64_t accept_paused_until_ms_ = 0, accept_failure_logged_ms_ = -1000000;
  int lock_fd_ = -1;
  std::vector<Pending> pending_;
  std::vector<ControlPeer> controls_;
  std::size_t pending_closed_ = 0;  // closed to make room, not yet logged
  std::int64_t pending_closed_logged_ms_ = 0;
  std::size_t controls_closed_ = 0;  // control exchanges closed to make room, not yet logged
  std::int64_t controls_closed_logged_ms_ = 0;
  // Lines of one kind kept to a few a second: a line each up to `per_second` in a second, then
  // counted, and the count said in one line once the second is over (flush).
  class CountedLines {
   public:
    explicit CountedLines(std::size_t per_second) : per_second_(per_second) {}
    // Logs `line` at `level`, or, past per_second lines this second, counts it, keeping `last`
    // (what the count's line quotes of the last one not logged).
    void log(spdlog::logger& log, spdlog::level::level_enum level, const std::string& line,
             std::string last);
    // Once the second is over: `summary(count, last)` at the highest level counted, where lines
    // were counted; then a new second begins.
    void flush(spdlog::logger& log, std::int64_t now,
               const std::function<std::string(std::size_t, const std::string&)>& summary);

   private:
    std::size_t per_second_;
    std::int64_t window_ms_ = 0;
    std::size_t logged_ = 0, unlogged_ = 0;
    spdlog::level::level_enum level_ = spdlog::level::trace;
    std::string last_;
  };
  // Refused handshakes (log_refusal): a peer that may not use gswapd (or speaks another protocol)
  // and connects in a loop wrote a line each time, 2 MB of log a second from one process.
  CountedLines refusals_{5};
  // Clients connecting, leaving or dropped (log_coming): a process connecting and leaving in a
  // loop wrote 71,826 lines (6.5 MB) in 25 s at info.
  void log_coming(spdlog::level::level_enum level, const std::string& line);
  CountedLines comings_{10};
  std::vector<std::unique_ptr<Client>> clients_;
  ClientLimits limits_;
  std::int64_t started_at_ = 0;
  std::unique_ptr<PlannerThread> planner_;
  std::uint64_t next_serial_ = 1;
  std::int64_t last_feedback_ms_ = 0;
};

}  // namespace gswap::daemon
