// server.cpp: gswapd's poll loop, handshake, security checks, budget sharing and control requests
// (see server.h for the threading rules).
#include "daemon/server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>

#include <fmt/format.h>

#include "daemon/control.h"
#include "policy/analysis.h"
#include "policy/capuchin.h"
#include "daemon/timeline_dump.h"
#include "policy/search.h"
#include "policy/trace_json.h"
#include "proto/fdpass.h"

namespace gswap::daemon {
namespace {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

constexpr std::int64_t kHandshakeTimeoutMs = 5000;
// A control peer's whole exchange after its hello (gswapctl gives up after 10 s itself), and how
// many may be under way at once (past that, the oldest is closed).
constexpr std::int64_t kControlTimeoutMs = 10000;
constexpr std::size_t kMaxControls = 64;
// Library connections one process may hold at once (handshake).
constexpr std::size_t kMaxConnectionsPerProcess = 4;
// One planning pass stays near-linear in the iteration's length (issue 12); beyond this the
// trace window could not hold two iterations anyway.
constexpr std::size_t kMaxPlannedLaunches = 250000;
// After a plan that moved nothing: how long swaps already under way may still count. How often a
// client whose plan was made from part of its iteration is measured again.
constexpr std::int64_t kIdleGraceMs = 500;
// A guided plan the library has followed no iteration of for this long (and three iterations'
// worth of launches) is measured again, diverged or not.
constexpr std::int64_t kNeverMetMs = 3000;
constexpr unsigned kMaxRemeasures = 3;
constexpr std::int64_t kWaitLogMs = 10000;  // how often a client still measuring says why
// Time the planner thread may spend checking one round of feedback entry by entry.
constexpr double kFeedbackCheckMs = 50;
// Connections that have not said hello yet: at most kMaxPendingPerPeer from one process and
// kMaxPending in all. Beyond either, the oldest of the same process (else of the user holding the
// most) is closed, so connections that never say hello cannot lock other peers out.
constexpr std::size_t kMaxPending = 256;
constexpr std::size_t kMaxPendingPerPeer = 8;
constexpr int kTickMs = 10;

// How a measured iteration of the same shape differs from the one the plan was made from: by
// more than a tenth in its kernels' total time (codes 1 slower, 2 faster) or in a direction of
// the link measured in both (3 slower, 4 faster); 0 and "" when it does not.
std::pair<int, std::string> drift_of(const MeasuredIteration& planned,
                                     const MeasuredIteration& now) {
  auto total = [](const policy::Trace& t) {
    double d = 0;
    for (const policy::Launch& l : t.launches) d += l.dur_us;
    return d;
  };
  auto moved = [](double was, double is) { return is > 1.1 * was ? 1 : is < 0.9 * was ? 2 : 0; };
  const policy::DeviceInfo &a = planned.trace.device, &b = now.trace.device;
  const double was = total(planned.trace), is = total(now.trace);
  if (int m = moved(was, is))
    return {m, fmt::format("measured iteration {:.0f} us against {:.0f} us planned", is, was)};
  // A link that moved: up (more bandwidth) is faster, 4; down is slower, 3.
  int m =
      planned.h2d_measured && now.h2d_measured ? moved(a.h2d_bytes_per_s, b.h2d_bytes_per_s) : 0;
  if (!m && planned.d2h_measured && now.d2h_measured)
    m = moved(a.d2h_bytes_per_s, b.d2h_bytes_per_s);
  if (m)
    return {m == 1 ? 4 : 3,
            fmt::format("link {:.2f}/{:.2f} GB/s against {:.2f}/{:.2f} GB/s planned",
                        b.h2d_bytes_per_s / 1e9, b.d2h_bytes_per_s / 1e9, a.h2d_bytes_per_s / 1e9,
                        a.d2h_bytes_per_s / 1e9)};
  return {0, ""};
}
}  // namespace

Server::Server(const Config& config, const GpuIdentity& gpu, std::shared_ptr<spdlog::logger> log)
    : config_(config),
      gpu_(gpu),
      log_(std::move(log)),
      planner_(std::make_unique<PlannerThread>()) {
  limits_.trace_launches = config_.uint("trace_launches");  // at least kMinTraceLaunches
  started_at_ = std::chrono::duration_cast<std::chrono::seconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
}

Server::~Server() {
  clients_.clear();
  for (Pending& p : pending_) close(p.fd);
  for (ControlPeer& c : controls_) close(c.exchange.fd());
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(socket_path_.c_str());
  }
  if (lock_fd_ >= 0) close(lock_fd_);  // releases the flock
}

bool Server::allowed(uid_t uid, gid_t gid) const {
  if (uid == geteuid()) return true;
  for (std::uint32_t u : config_.allow_uids())
    if (u == uid) return true;
  for (std::uint32_t g : config_.allow_gids())
    if (g == gid) return true;
  return false;
}

bool Server::open(std::string* error, bool* already_running) {
  *already_running = false;
  dir_ = runtime_dir(config_);
  bool shared = !config_.allow_uids().empty() || !config_.allow_gids().empty();
  bool existed = false;
  if (!make_runtime_dir(config_, &existed, error)) return false;
  struct stat st {};
  if (stat(dir_.c_str(), &st) != 0 || st.st_uid != geteuid())
    return *error = fmt::format("{} is not owned by uid {}", dir_, geteuid()), false;
  // One that was there keeps its own mode, which is its owner's choice (it may be /tmp). There, a
  // directory others may write without the sticky bit would let them replace the socket: said in
  // the log.
  if (existed && (st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
    log_->warn("{} is writable by other users (mode {:o}): they could replace gswapd's socket",
               dir_, st.st_mode & 07777);
  socket_path_ = socket_path(dir_, gpu_.uuid_text);
  lock_path_ = lock_path(dir_, gpu_.uuid_text);
  lock_fd_ = ::open(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0)
    return *error = fmt::format("cannot open {}: {}", lock_path_, strerror(errno)), false;
  if (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {};
    ssize_t n = pread(lock_fd_, buf, sizeof buf - 1, 0);
    *already_running = true;
    *error = fmt::format("another gswapd (pid {}) already serves GPU {} ({})",
                         n > 0 ? std::string(buf, strcspn(buf, "\n")) : "?", gpu_.ordinal,
                         gpu_.uuid_text);
    return false;
  }
  if (ftruncate(lock_fd_, 0) == 0) {
    std::string pid = fmt::format("{}\n", getpid());
    (void)!pwrite(lock_fd_, pid.data(), pid.size(), 0);
  }
  unlink(socket_path_.c_str());  // stale socket of a daemon that died; we hold the lock
  listen_fd_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) return *error = fmt::format("socket: {}", strerror(errno)), false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (socket_path_.size() >= sizeof addr.sun_path)
    return *error = fmt::format("socket path {} too long", socket_path_), false;
  std::memcpy(addr.sun_path, socket_path_.c_str(), socket_path_.size() + 1);
  mode_t old = umask(shared ? 0111 : 0177);
  int rc = bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  umask(old);
  if (rc != 0) return *error = fmt::format("bind {}: {}", socket_path_, strerror(errno)), false;
  chmod(socket_path_.c_str(), shared ? 0666 : 0600);
  if (listen(listen_fd_, 64) != 0)
    return *error = fmt::format("listen: {}", strerror(errno)), false;
  log_->info("gswapd serving GPU {} ({}, {} bytes) at {}", gpu_.ordinal, gpu_.uuid_text,
             gpu_.total_bytes, socket_path_);
  if (const std::uint64_t total = config_.size("gpu_budget").resolve(gpu_.total_bytes);
      gpu_.total_bytes && total > gpu_.total_bytes)
    log_->warn(
        "gpu_budget {} bytes is above the device's {}: shares are parts of it, and no process "
        "goes above its own budget (the device's size without GSWAP_BUDGET)",
        total, gpu_.total_bytes);
  return true;
}

void Server::run(const std::atomic<bool>& stop) {
  while (!stop.load()) tick(kTickMs);
  log_->info("gswapd stopping ({} client{})", clients_.size(), clients_.size() == 1 ? "" : "s");
}

// What poll says of a connection whose peer has ended it (or shut its side down): on a
// SOCK_SEQPACKET socket recv answers 0 both then and for a message of no bytes.
constexpr short kHungUp = POLLHUP | POLLRDHUP | POLLERR;

void Server::tick(int timeout_ms) {
  std::vector<pollfd> fds;
  // While accepting fails for want of descriptors, the listening socket stays readable: polled,
  // it would wake every tick for nothing (a busy loop). It is left out for a while instead.
  const bool accepting = now_ms() >= accept_paused_until_ms_;
  fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
  // POLLRDHUP: a peer that shut its side down has ended too (handshake, and the clients below).
  for (const Pending& p : pending_) fds.push_back({p.fd, POLLIN | POLLRDHUP, 0});
  for (const auto& c : clients_) fds.push_back({c->fd(), POLLIN | POLLRDHUP, 0});
  for (const ControlPeer& c : controls_) fds.push_back({c.exchange.fd(), c.exchange.events(), 0});
  ::poll(fds.data(), fds.size(), timeout_ms);
  std::size_t np = pending_.size();
  const std::size_t first_control = 1 + np + clients_.size();  // before any client goes
  // Clients first (indexes stay valid while we only mark), then pending, then new connections.
  for (std::size_t i = clients_.size(); i-- > 0;) {
    const pollfd& f = fds[1 + np + i];
    if (f.revents & (POLLIN | kHungUp)) {
      char b;
      ssize_t n = recv(f.fd, &b, 1, MSG_DONTWAIT);
      // 0 is the end where poll saw the peer hang up, else an empty message (kHungUp).
      const bool hung_up = f.revents & kHungUp;
      if ((n == 0 && hung_up) || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        // Drain what it left before reaping so its last events still count.
        std::string ignored;
        clients_[i]->poll(&ignored);
        drop(i, "exited");
        continue;
      }
      if (n >= 0) {
        drop(i, "sent data on the socket after the handshake (protocol error)");
        continue;
      }
    }
  }
  // Control exchanges under way: their poll entries follow the clients' (first_control, counted
  // before any client went), and handshakes below may add new ones, polled from the next tick.
  {
    const std::int64_t now = now_ms();
    std::vector<ControlPeer> going;
    for (std::size_t i = 0; i < controls_.size(); ++i) {
      ControlPeer& c = controls_[i];
      bool keep = true;
      if (fds[first_control + i].revents)
        keep = serve_control(c);
      else if (now > c.deadline_ms) {
        log_->warn("pid {}: control exchange not done within {} ms, closing", c.pid,
                   kControlTimeoutMs);
        keep = false;
      }
      if (keep)
        going.push_back(std::move(c));
      else
        close(c.exchange.fd());
    }
    controls_ = std::move(going);
  }
  std::int64_t now = now_ms();
  std::vector<Pending> still;
  for (std::size_t i = 0; i < np; ++i) {
    if (fds[1 + i].revents) {
      try {
        handshake(pending_[i], fds[1 + i].revents);
      } catch (const std::exception& e) {
        // The peer's socket is closed or owned by then; the others are served on.
        log_->error("pid {}: handshake failed: {}", pending_[i].pid, e.what());
      }
    } else if (now > pending_[i].deadline_ms) {
      log_->warn("pid {}: no hello within {} ms, closing", pending_[i].pid, kHandshakeTimeoutMs);
      close(pending_[i].fd);
    } else {
      still.push_back(pending_[i]);
    }
  }
  // handshake() may have appended nothing to pending_; keep the ones still waiting.
  pending_ = std::move(still);
  if (fds[0].revents & POLLIN) accept_one();
  if (rebalance_at_ms_ && now_ms() >= rebalance_at_ms_) {  // a risen share is due
    rebalance_at_ms_ = 0;
    rebalance();
  }
  for (std::size_t i = clients_.size(); i-- > 0;) {
    std::string error;
    if (!clients_[i]->poll(&error)) {
      drop(i, error);
      continue;
    }
    Client& c = *clients_[i];
    // More memory became fixed than plans leave for it: the plan followed, or the one being made,
    // must fit in less. (A client measured afresh is planned once its new shape repeats.)
    if (c.take_fixed_most_rose() && raise_fixed_reserve(c) &&
        (c.planning() || c.published().mode == proto::PlanMode::kGuided))
      replan(c);
    // The program no longer does what the plan says (three iterations in a row, or it has not
    // finished one of the plan's iterations in three iterations' worth of launches: a new shape
    // that never starts the way the plan's does diverges once, and a plan whose start the library
    // never meets does not diverge at all): forget what was learned, measure afresh, and plan the
    // shape once it repeats.
    const std::size_t planned = c.planned_from().trace.launches.size();
    const std::int64_t off_plan_ms = c.off_plan_ms(now);
    // (Without a divergence, also three seconds without one: the library publishes its counters,
    // the count of iterations it followed among them, once a second, and a program of short
    // iterations launches many in that time.)
    if (c.published().mode == proto::PlanMode::kGuided &&
        (c.divergences_since_plan() >= 3 ||
         (planned && c.launches_off_plan() > 3 * std::max<std::size_t>(planned, 64) &&
          (c.divergences_since_plan() >= 1 || off_plan_ms >= kNeverMetMs)))) {
      const bool diverged = c.divergences_since_plan() > 0;
      if (diverged)
        log_->info("pid {}: the program no longer follows its plan; measuring again", c.pid());
      else
        log_->info(
            "pid {}: the library has not met the start of the plan's iteration in {} "
            "launches; measuring again",
            c.pid(), c.launches_off_plan());
      c.forget_launches();
      measure_again(c, diverged ? "none: measuring again after divergences"
                                : "none: measuring again (the plan's start was never met)");
      continue;
    }
    // A plan that moved nothing said the iteration fits; the library swapping anyway says the
    // iteration was not the program's (a stretch of identical layers, seen before the first
    // iteration had ended, repeats too). Measured again, keeping the window, once the iteration
    // it finds is another than the one planned (measuring the same again would plan the same),
    // a few times at most; it finds the program's once the window holds enough of it, a
    // start-up that never recurs beside the first iterations hiding it until then.
    if (std::uint64_t out = c.swapped_while_idle(now, kIdleGraceMs);
        out && c.iteration().length && c.iteration().length != planned &&
        c.remeasures() < kMaxRemeasures) {
      log_->info(
          "pid {}: the plan moved nothing, yet the library swapped {} bytes out; measuring again",
          c.pid(), out);
      c.count_remeasure();
      measure_again(c, "none: measuring again (the library swapped with nothing planned)");
      continue;
    }
    // The same mistake with a plan that moves something: followed layer by layer, it never
    // diverges, and only one "iteration" (a layer) in measure_every is timed. The launch window
    // shows the whole iteration by now, at least twice as long: measure again.
    if (c.published().mode == proto::PlanMode::kGuided && !c.planning() && planned &&
        c.iteration().length >= 2 * planned && c.remeasures() < kMaxRemeasures) {
      log_->info("pid {}: the plan follows {} launches, the iteration has {}; measuring again",
                 c.pid(), planned, c.iteration().length);
      c.count_remeasure();
      measure_again(c, "none: measuring again (the iteration is longer than the plan's)");
      continue;
    }
    std::optional<MeasuredIteration> m = c.take_measured(gpu_.total_bytes);
    // While the library times every launch and no iteration can be planned yet, say why, every
    // ten seconds: a run that never leaves measuring shows its cause in the log.
    if (!m && c.published().mode == proto::PlanMode::kMeasure && !c.measure_wait().empty() &&
        now - c.wait_logged_ms() >= kWaitLogMs) {
      if (c.wait_logged_ms()) log_->info("pid {}: not planned yet: {}", c.pid(), c.measure_wait());
      c.wait_logged_ms() = now;
    }
    if (m) {
      // A plan is made again when the iteration changed: its length, or, once the plan is
      // followed, its measured time or link bandwidth by more than a tenth, the same way in two
      // samples in a row (a sample every measure_every iterations shows drift; one sample alone
      // is often noise, and a new plan starts its feedback over). A plan made before any swap copy
      // was timed (the link at its default figure) is made again at the first sample that has one.
      // An iteration of the same length as the one being planned leaves that search alone:
      // restarting it at every iteration would never let a plan finish when iterations are
      // shorter than the search.
      const MeasuredIteration& old = c.planned_from();
      bool same_shape =
          !old.trace.launches.empty() && old.trace.launches.size() == m->trace.launches.size();
      bool same = same_shape && c.planning();
      if (same_shape && !c.planning() && c.published().mode == proto::PlanMode::kGuided) {
        auto [drift, why] = drift_of(old, *m);
        const bool link_now =
            (m->h2d_measured && !old.h2d_measured) || (m->d2h_measured && !old.d2h_measured);
        same = !link_now && (drift == 0 || drift != c.drift());
        if (same && drift)
          log_->debug("pid {}: {}; plan kept until a second sample agrees", c.pid(), why);
        else if (!same)
          log_->info("pid {}: {}", c.pid(), link_now ? "the link was measured" : why);
        c.set_drift(drift);
      }
      if (!same) {
        log_->info(
            "pid {}: measured iteration of {} launches ({:.0f}% timed), link {:.2f} GB/s "
            "to the device, {:.2f} GB/s back",
            c.pid(), m->trace.launches.size(), 100 * m->timed_fraction,
            m->trace.device.h2d_bytes_per_s / 1e9, m->trace.device.d2h_bytes_per_s / 1e9);
        c.set_planned_from(std::move(*m));
        replan(c);
      }
    }
  }
  collect_plans();
  flush_counted_lines(now);
  if (now - last_feedback_ms_ >= 300) {
    last_feedback_ms_ = now;
    for (auto& c : clients_) apply_feedback(*c);
  }
}

void Server::accept_one() {
  std::size_t closed = 0;
  for (int k = 0; k < 16; ++k) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      const int e = errno;
      if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
        // Out of descriptors or memory: the connection waits in the backlog until some are
        // back (a client leaves, a connection that never says hello times out).
        const std::int64_t now = now_ms();
        accept_paused_until_ms_ = now + kAcceptPauseMs;
        if (now - accept_failure_logged_ms_ >= 1000) {
          accept_failure_logged_ms_ = now;
          log_->warn(
              "cannot accept connections: {} ({} clients, {} waiting for their hello); "
              "trying again every {} ms",
              std::strerror(e), clients_.size(), pending_.size(), kAcceptPauseMs);
        }
      }
      break;
    }
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    const bool ok = allowed(cred.uid, cred.gid);
    std::size_t same = 0;
    for (const Pending& p : pending_) same += p.pid == cred.pid;
    if (same >= kMaxPendingPerPeer) {
      close_pending(oldest_pending([&](const Pending& p) { return p.pid == cred.pid; }));
      ++closed;
    } else if (pending_.size() >= kMaxPending) {
      if (!ok) {  // room is kept for peers that may use the daemon
        close(fd);
        ++closed;
        continue;
      }
      close_pending(greediest_pending());
      ++closed;
    }
    // A peer that is not allowed is still read: refusing only after its hello lets it receive
    // the reason instead of a broken pipe.
    pending_.push_back({fd, cred.pid, cred.uid, cred.gid, now_ms() + kHandshakeTimeoutMs, !ok});
  }
  // One line a second at most: a flood must not fill the log either.
  pending_closed_ += closed;
  flush_counted_lines(now_ms());
}

void Server::CountedLines::log(spdlog::logger& log, spdlog::level::level_enum level,
                               const std::string& line, std::string last) {
  if (logged_ < per_second_) {
    ++logged_;
    log.log(level, "{}", line);
    return;
  }
  ++unlogged_;
  level_ = std::max(level_, level);
  last_ = std::move(last);
}

void Server::CountedLines::flush(
    spdlog::logger& log, std::int64_t now,
    const std::function<std::string(std::size_t, const std::string&)>& summary) {
  if (now - window_ms_ < 1000) return;
  if (unlogged_) log.log(level_, "{}", summary(unlogged_, last_));
  window_ms_ = now;
  logged_ = unlogged_ = 0;
  level_ = spdlog::level::trace;
  last_.clear();
}

void Server::log_refusal(pid_t pid, const std::string& msg) {
  flush_counted_lines(now_ms());
  refusals_.log(*log_, spdlog::level::warn, fmt::format("refused pid {}: {}", pid, msg),
                fmt::format("pid {}: {}", pid, msg));
}

void Server::log_coming(spdlog::level::level_enum level, const std::string& line) {
  flush_counted_lines(now_ms());
  comings_.log(*log_, level, line, line);
}

void Server::flush_counted_lines(std::int64_t now) {
  comings_.flush(*log_, now, [](std::size_t n, const std::string& last) {
    return fmt::format(
        "{} more client{} connected or left in a second, without a line each (the last: {})", n,
        n == 1 ? "" : "s", last);
  });
  if (pending_closed_ && now - pending_closed_logged_ms_ >= 1000) {
    log_->warn(
        "closed {} connection{} that had not said hello, to make room (at most {} per "
        "process, {} in all)",
        pending_closed_, pending_closed_ == 1 ? "" : "s", kMaxPendingPerPeer, kMaxPending);
    pending_closed_ = 0;
    pending_closed_logged_ms_ = now;
  }
  refusals_.flush(*log_, now, [](std::size_t n, const std::string& last) {
    return fmt::format(
        "refused {} more handshake{} in a second, without a line each (the last: {})", n,
        n == 1 ? "" : "s", last);
  });
}

std::size_t Server::oldest_pending(const std::function<bool(const Pending&)>& which) const {
  for (std::size_t i = 0; i < pending_.size(); ++i)  // in arrival order
    if (which(pending_[i])) return i;
  return 0;
}

std::size_t Server::greediest_pending() const {
  // Peers that may not use the daemon lose theirs first (false orders first), then the user
  // holding the most.
  std::map<std::pair<bool, uid_t>, std::size_t> held;
  for (const Pending& p : pending_) ++held[{!p.not_allowed, p.uid}];
  auto worst = held.begin();
  for (auto it = held.begin(); it != held.end() && it->first.first == worst->first.first; ++it)
    if (it->second > worst->second) worst = it;
  const std::pair<bool, uid_t> key = worst->first;
  return oldest_pending(
      [&](const Pending& p) { return !p.not_allowed == key.first && p.uid == key.second; });
}

void Server::close_pending(std::size_t index) {
  close(pending_[index].fd);
  pending_.erase(pending_.begin() + static_cast<std::ptrdiff_t>(index));
}

void Server::refuse(int fd, proto::HelloStatus status, const std::string& message) {
  proto::HelloReply r{};
  r.magic = proto::kReplyMagic;
  r.version = proto::kProtocolVersion;
  r.status = static_cast<std::int32_t>(status);
  std::strncpy(r.message, message.c_str(), sizeof r.message - 1);
  send(fd, &r, sizeof r, MSG_NOSIGNAL | MSG_DONTWAIT);
  close(fd);
}

void Server::handshake(Pending& p, short revents) {
  alignas(8) unsigned char buf[512];
  // MSG_TRUNC: n is the message's real length even when it is longer than buf (only the first
  // bytes are read then), so the refusal can say how long it was.
  ssize_t n = recv(p.fd, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC);
  // 0 is the end where poll saw the peer hang up, else a message of no bytes: refused as a hello
  // of the wrong size, as any other.
  if (n < 0 || (n == 0 && (revents & kHungUp))) {
    close(p.fd);
    return;
  }
  if (p.not_allowed) {
    std::string msg = fmt::format("uid {} gid {} may not use this gswapd (uid {}); see allow_uids",
                                  p.uid, p.gid, geteuid());
    log_refusal(p.pid, msg);
    refuse(p.fd, proto::HelloStatus::kNotAllowed, msg);
    return;
  }
  proto::Hello h{};
  proto::HelloStatus st = proto::check_hello(buf, static_cast<std::size_t>(n), gpu_.uuid, &h);
  if (st == proto::HelloStatus::kOk &&
      h.kind == static_cast<std::uint32_t>(proto::PeerKind::kLibrary) && h.pid != p.pid) {
    st = proto::HelloStatus::kBadPid;  // the pid claimed must be the peer's, per SO_PEERCRED
  }
  if (st != proto::HelloStatus::kOk) {
    std::string msg;
    if (st == proto::HelloStatus::kBadVersion) {
      std::uint32_t v = 0;
      std::memcpy(&v, buf + 4, 4);
      msg = fmt::format("protocol version {} refused: gswapd speaks version {}", v,
                        proto::kProtocolVersion);
    } else if (st == proto::HelloStatus::kBadSize) {
      msg = fmt::format("handshake refused: bad message size ({} bytes; a hello is {})", n,
                        sizeof(proto::Hello));
    } else if (st == proto::HelloStatus::kWrongGpu) {
      char text[48];
      msg = fmt::format("this gswapd serves {}, not {}", gpu_.uuid_text,
                        proto::format_uuid(h.gpu_uuid, text));
    } else {
      msg = fmt::format("handshake refused: {}", proto::hello_status_name(st));
    }
    log_refusal(p.pid, msg);
    refuse(p.fd, st, msg);
    return;
  }
  if (h.kind == static_cast<std::uint32_t>(proto::PeerKind::kControl)) {
    start_control(p.fd, p.pid);
    return;
  }
  // The library connects once per process (a child after fork is a process of its own), and a
  // reconnection may briefly overlap the connection it replaces: more from one process is not a
  // library's, and would take the slots (and the budget shares) of other programs.
  if (std::count_if(clients_.begin(), clients_.end(), [&](const auto& c) {
        return c->pid() == p.pid;
      }) >= static_cast<std::ptrdiff_t>(kMaxConnectionsPerProcess)) {
    std::string msg = fmt::format("pid {} already holds {} connections (a process needs one)",
                                  p.pid, kMaxConnectionsPerProcess);
    log_refusal(p.pid, msg);
    refuse(p.fd, proto::HelloStatus::kFull, msg);
    return;
  }
  if (clients_.size() >= config_.uint("max_clients")) {
    std::string msg =
        fmt::format("gswapd already serves {} clients (max_clients)", clients_.size());
    log_refusal(p.pid, msg);
    refuse(p.fd, proto::HelloStatus::kFull, msg);
    return;
  }
  // The Client keeps the name printable (untrusted_text.h): it reaches the log and JSON.
  auto client = std::make_unique<Client>(p.fd, p.pid, p.uid,
                                         std::string(h.exe, strnlen(h.exe, sizeof h.exe)), limits_);
  client->set_requested_budget(h.requested_budget_bytes);
  std::string error;
  if (!client->init_shm(&error)) {
    log_->error("pid {}: cannot set up shared memory: {}", p.pid, error);
    int fd = client->release_fd();  // refuse() closes it
    client.reset();
    refuse(fd, proto::HelloStatus::kFull, "daemon could not create shared memory");
    return;
  }
  proto::HelloReply r{};
  r.magic = proto::kReplyMagic;
  r.version = proto::kProtocolVersion;
  r.status = 0;
  r.shm_bytes = client->shm().bytes();
  std::strncpy(r.message, "welcome", sizeof r.message - 1);
  client->set_serial(next_serial_++);
  // Kernels are timed from the start: the first complete iteration is then a measured one.
  PublishedPlan measure;
  measure.mode = proto::PlanMode::kMeasure;
  client->publish(0, measure);
  // The client's share is in its plan area before the reply: the library applies it as it
  // connects, before the program's first cuMemGetInfo (it waits for that in cuInit).
  Client* added = client.get();
  clients_.push_back(std::move(client));
  rebalance();
  if (proto::send_with_fd(p.fd, &r, sizeof r, added->shm().fd(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(sizeof r)) {
    drop(clients_.size() - 1, fmt::format("could not send the shared memory: {}", strerror(errno)));
    return;  // the Client destructor closes the socket
  }
  log_coming(spdlog::level::info, fmt::format("client pid {} ({}, uid {}) connected", p.pid,
                                              added->exe().empty() ? "?" : added->exe(), p.uid));
}

void Server::drop(std::size_t index, const std::string& why) {
  const Client& c = *clients_[index];
  if (why == "exited")
    log_coming(spdlog::level::info,
               fmt::format("client pid {} ({}) disconnected", c.pid(), c.exe()));
  else
    log_coming(spdlog::level::warn,
               fmt::format("client pid {} ({}) dropped: {}", c.pid(), c.exe(), why));
  planner_->cancel(c.serial());
  grow_since_.erase(c.serial());
  clients_.erase(clients_.begin() + static_cast<std::ptrdiff_t>(index));
  rebalance();
}

void Server::rebalance() {
  std::uint64_t total = config_.size("gpu_budget").resolve(gpu_.total_bytes);
  // Shares in proportion to the weights, filled as water: a client whose own budget (its
  // GSWAP_BUDGET, or its device's size) is below its share gets that budget, and what it leaves
  // is shared among the others the same way, until no share is above its client's budget.
  const std::size_t n = clients_.size();
  std::vector<double> weight(n);
  std::vector<bool> capped(n, false);
  std::vector<long double> share(n, 0);
  long double left = static_cast<long double>(total), sum = 0;
  for (std::size_t i = 0; i < n; ++i) sum += weight[i] = config_.weight_for(clients_[i]->exe());
  for (bool again = true; again && sum > 0;) {
    again = false;
    for (std::size_t i = 0; i < n; ++i) {
      const std::uint64_t own = clients_[i]->requested_budget();
      if (capped[i] || own == 0 || static_cast<long double>(own) >= left * weight[i] / sum)
        continue;
      capped[i] = again = true;
      share[i] = static_cast<long double>(own);
      left -= share[i];
      sum -= weight[i];
    }
  }
  for (std::size_t i = 0; i < n; ++i)
    if (!capped[i]) share[i] = sum > 0 ? left * weight[i] / sum : 0;
  const std::int64_t now = now_ms();
  bool changed = false;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& c = clients_[i];
    auto budget = static_cast<std::uint64_t>(share[i]);
    // At least one byte: a share of 0 reads as "no budget yet" to the library (a tiny gpu_budget
    // shared among many clients gives each the least budget there is, not none).
    budget = std::max<std::uint64_t>(budget, 1);
    if (budget == c->budget()) {
      grow_since_.erase(c->serial());
      continue;
    }
    if (c->budget() != 0 && budget > c->budget()) {  // a rise waits (rebalance's comment)
      const std::int64_t since = grow_since_.try_emplace(c->serial(), now).first->second;
      if (now - since < kGrowDelayMs) {
        const std::int64_t due = since + kGrowDelayMs;
        rebalance_at_ms_ = rebalance_at_ms_ ? std::min(rebalance_at_ms_, due) : due;
        continue;
      }
    }
    grow_since_.erase(c->serial());
    c->publish_budget(budget);
    changed = true;
    if (!c->planned_from().trace.launches.empty()) replan(*c);  // the plan depends on it
  }
  if (changed)
    log_->info("budget {} bytes shared among {} client{}", total, clients_.size(),
               clients_.size() == 1 ? "" : "s");
}

std::uint64_t Server::effective_budget(const Client& c) const {
  std::uint64_t b = c.budget();
  if (c.requested_budget() && (b == 0 || c.requested_budget() < b)) b = c.requested_budget();
  return b;
}

// What the planner may fill with regions: the effective budget less what the library can never
// move (small allocations, regions that must stay), which the trace does not show.
std::uint64_t Server::plan_budget(const Client& c) const {
  std::uint64_t b = effective_budget(c);
  // The most the library reported, not the last figure: small allocations come and go within an
  // iteration, and a plan made for a budget that moved is thrown away (collect_plans). Regions
  // that must stay are in the trace too; counting them twice only makes the plan safer.
  std::uint64_t fixed = c.fixed_reserve();
  return fixed < b ? b - fixed : 0;
}

// The reserve covers the most fixed bytes reported, rounded up to a sixteenth of the effective
// budget (at least 64 KiB, at most 256 KiB) so that it rises seldom: a plan is made again at
// each rise. A fixed step of 256 KiB took a quarter of a 1 MiB budget for an 8-byte allocation,
// and left the last third of the budgets a program runs at without a plan. True when it rose.
bool Server::raise_fixed_reserve(Client& c) {
  const std::uint64_t step = std::clamp<std::uint64_t>(effective_budget(c) / 16,
                                                       kMinFixedReserveStep, kMaxFixedReserveStep);
  const std::uint64_t most = c.fixed_most();
  const std::uint64_t reserve = most > ~0ull - step ? ~0ull : (most + step - 1) / step * step;
  if (reserve <= c.fixed_reserve()) return false;
  c.set_fixed_reserve(reserve);
  return true;
}

// A job on the iteration c was planned from, at the budget the plan fills.
PlannerThread::Job Server::planner_job(const Client& c) const {
  PlannerThread::Job job;
  job.client = c.serial();
  job.token = c.planned_from().token;
  job.trace = c.planned_from().trace;
  job.budget = plan_budget(c);
  job.threads = policy::usable_search_threads(config_.uint("plan_search_threads"));
  return job;
}

// Asks the library to time every launch again; the next measured iteration is planned.
void Server::measure_again(Client& c, const std::string& why) {
  c.set_planning(false);
  c.restart_refinement();
  planner_->cancel(c.serial());  // what it plans or checks is for the plan left
  c.set_feedback_pending(false);
  c.set_planner(why);
  PublishedPlan measure;
  measure.mode = proto::PlanMode::kMeasure;
  c.publish(c.budget(), measure);
}

void Server::replan(Client& c) {
  c.set_drift(0);  // samples are compared with the iteration planned from anew
  c.restart_refinement();
  const MeasuredIteration& m = c.planned_from();
  if (m.trace.launches.empty()) return;
  if (m.trace.launches.size() > kMaxPlannedLaunches) {
    c.set_planner(fmt::format("none: iteration of {} launches is above the planning limit of {}",
                              m.trace.launches.size(), kMaxPlannedLaunches));
    return;
  }
  PlannerThread::Job job = planner_job(c);
  job.time_budget_ms = static_cast<double>(config_.uint("plan_search_ms"));
  planner_->submit(std::move(job));  // drops the client's feedback job, if any
  c.set_planning(true);
  c.set_feedback_pending(false);
}

void Server::collect_plans() {
  for (PlannerThread::Result& r : planner_->take_results()) {
    if (r.kind != PlannerThread::Kind::kPlan) {
      for (auto& c : clients_) {
        if (c->serial() != r.client) continue;
        if (r.kind == PlannerThread::Kind::kFeedback)
          take_feedback(*c, r);
        else
          take_refinement(*c, r);
      }
      continue;
    }
    for (auto& c : clients_) {
      if (c->serial() != r.client || c->planned_from().token != r.token) continue;
      if (r.budget != plan_budget(*c)) break;  // the budget moved meanwhile: replanned
      c->set_planning(false);
      const policy::Plan& plan = r.search.plan;
      std::string planner =
          fmt::format("{} ({} plans simulated in {:.0f} ms{})",
                      r.search.seed_policy.empty() ? "capuchin" : r.search.seed_policy,
                      r.search.evaluations, r.plan_ms,
                      r.search.walks > 1 ? fmt::format(", {} walks side by side", r.search.walks)
                                         : std::string());
      if (!plan.feasible) {
        c->set_planner("capuchin: infeasible: " + plan.reason);
        PublishedPlan passive;
        c->publish(c->budget(), passive);
      } else {
        if (std::size_t unbound = publish_guided(*c, plan, planner))
          log_->info(
              "pid {}: {} of {} plan entries left out: regions the library cannot name "
              "before their swap-out (until then touched only before the iteration's "
              "signature completes)",
              c->pid(), unbound, plan.entries.size());
        // A plan published that fits is refined: the search goes on from it.
        if (c->published().mode == proto::PlanMode::kGuided && plan.fits &&
            r.search.sim.step_time_us > 0) {
          Client::Refinement& f = c->restart_refinement();
          f.best = plan;
          f.best_us = f.searched_us = f.published_us = r.search.sim.step_time_us;
          f.planner = planner;
          f.left_ms = static_cast<double>(config_.uint("plan_refine_ms"));
          f.seed = 2;  // the search's own was 1
          f.seeds_left = r.search.seeds_left;
          refine(*c);
        }
      }
      log_->info("pid {}: {} entries, {}", c->pid(), c->plan().size(), c->planner());
      break;
    }
  }
}

std::size_t Server::publish_guided(Client& c, const policy::Plan& plan,
                                   const std::string& planner) {
  const MeasuredIteration& m = c.planned_from();
  const std::size_t n = m.trace.launches.size();
  PublishedPlan p;
  p.mode = proto::PlanMode::kGuided;
  p.iteration_length = n;
  p.first_seq = m.first_seq;
  p.seq_length = m.seq_length;
  // The plan header holds 32 bits; a larger figure means at most one iteration in 2^32 - 1.
  p.measure_every = static_cast<std::uint32_t>(std::min<std::uint64_t>(
      config_.uint("measure_every"), std::numeric_limits<std::uint32_t>::max()));
  std::size_t sig = signature_length(m.functions);
  p.signature.assign(m.functions.begin(), m.functions.begin() + static_cast<std::ptrdiff_t>(sig));
  // The library recognises the iteration only once its whole signature was launched: positions
  // before its last launch move there (a swap-out or prefetch a few launches late), and regions
  // first touched before it cannot be bound.
  const std::size_t first_usable = sig ? sig - 1 : 0;
  auto offset = [&](std::size_t i) {
    return m.trace.launches[std::max(i, first_usable)].seq - m.first_seq;
  };
  auto function = [&](std::size_t i) { return m.functions[std::max(i, first_usable)]; };
  // The calls between launch i and the launch before it (the last of the iteration before, for
  // the first).
  auto back_lead = [&](std::size_t i) {
    std::uint64_t prev = i ? m.trace.launches[i - 1].seq
                           : m.trace.launches[n - 1].seq - m.seq_length;  // wraps below zero
    std::uint64_t calls = m.trace.launches[i].seq - prev - 1;
    return static_cast<std::uint16_t>(std::min<std::uint64_t>(calls, 0xffff));
  };
  std::unordered_map<policy::RegionId, const policy::Region*> regions;
  for (const policy::Region& r : m.trace.regions) regions[r.id] = &r;
  std::vector<std::size_t> entry_of;
  std::size_t unbound = 0, cut = 0;
  for (std::size_t k = 0; k < plan.entries.size(); ++k) {
    if (p.entries.size() >= c.plan_capacity()) {  // the plan area is full: the rest is left out
      ++cut;
      continue;
    }
    const policy::PlanEntry& e = plan.entries[k];
    auto it = regions.find(e.region);
    if (it == regions.end() || e.evict_after >= n) continue;
    const policy::Region& reg = *it->second;
    proto::PlanEntry w{};
    w.action = static_cast<std::uint16_t>(e.kind == policy::EvictKind::kSwap
                                              ? proto::PlanAction::kSwap
                                              : proto::PlanAction::kRecompute);
    bool persistent = reg.alloc_seq < m.first_seq &&
                      (!reg.free_seq || *reg.free_seq >= m.first_seq + m.seq_length);
    w.bind_offset = proto::kNoOffset;
    // The library issues a swap-out after the access at its position.
    const std::size_t evict = policy::first_launch_evicted(e, n) - 1;
    if (persistent) {
      w.region_id = reg.id;
    } else {
      // Bound at its first access the library can see (from the signature's last launch on; an
      // input uploaded before it is bound where a kernel reads it), which must come no later
      // than the swap-out.
      std::size_t bind = n;
      for (std::size_t i = first_usable; i < n && bind == n; ++i) {
        const auto& ids = m.regions[i];
        auto pos = std::find(ids.begin(), ids.end(), reg.id);
        if (pos != ids.end()) {
          bind = i;
          w.bind_slot = static_cast<std::uint32_t>(pos - ids.begin());
        }
      }
      if (bind == n || bind > evict) {
        ++unbound;
        continue;
      }
      w.bind_offset = offset(bind);
    }
    w.evict_after = offset(evict);
    w.evict_function = function(evict);
    w.trigger = proto::kNoOffset;
    if (e.trigger != policy::kNoLaunch && e.trigger < n) {
      w.trigger = offset(e.trigger);
      w.trigger_function = function(e.trigger);
    }
    w.back_access = proto::kNoOffset;
    if (e.back_access != policy::kNoLaunch && e.back_access < n) {
      w.back_access = offset(e.back_access);
      w.back_lead = back_lead(std::max(e.back_access, first_usable));
    }
    p.entries.push_back(w);
    entry_of.push_back(k);
  }
  if (cut)
    log_->warn(
        "pid {}: {} of {} plan entries left out: the client's plan area holds {}; the library "
        "evicts on demand where they would have",
        c.pid(), cut, plan.entries.size(), c.plan_capacity());
  c.current_plan() = plan;
  c.entry_of_published() = std::move(entry_of);
  c.set_planner(planner);
  if (p.entries.empty()) {
    // Nothing to move: everything fits. Follow no plan; a budget change brings one back, and so
    // does the library swapping all the same (tick).
    PublishedPlan passive;
    c.publish(c.budget(), passive);
    c.arm_idle_watch(now_ms());
    return unbound;
  }
  c.publish(c.budget(), std::move(p));
  return unbound;
}

// Capuchin's rule: every late swap-in starts 5% of its swap time earlier next iteration, where
// the simulator says that costs nothing (policy::apply_feedback_checked, on the planner thread).
void Server::apply_feedback(Client& c) {
  if (c.published().mode != proto::PlanMode::kGuided || c.planning() || c.feedback_pending())
    return;
  const std::vector<EntryLateness>& late = c.lateness();
  const std::vector<std::size_t>& entry_of = c.entry_of_published();
  std::vector<double> lateness_us(c.current_plan().entries.size(), 0);
  bool any = false;
  for (std::size_t i = 0; i < late.size() && i < entry_of.size(); ++i) {
    if (!late[i].late_ns || late[i].settled) continue;
    lateness_us[entry_of[i]] = static_cast<double>(late[i].late_ns) / 1e3;
    any = true;
  }
  if (!any) return;
  PlannerThread::Job job = planner_job(c);
  job.time_budget_ms = kFeedbackCheckMs;
  job.kind = PlannerThread::Kind::kFeedback;
  job.plan = c.current_plan();
  job.lateness_us = std::move(lateness_us);
  job.plan_generation = c.plan_generation();
  if (planner_->submit(std::move(job))) c.set_feedback_pending(true);
}

void Server::take_feedback(Client& c, const PlannerThread::Result& r) {
  c.set_feedback_pending(false);
  if (c.planned_from().token != r.token || r.budget != plan_budget(c) ||
      c.plan_generation() != r.plan_generation || c.planning())
    return;  // the plan changed meanwhile: the lateness was for another one
  if (r.checked.moved) {
    log_->debug("pid {}: feedback moved {} triggers earlier ({} left where they are)", c.pid(),
                r.checked.moved, r.checked.refused);
    publish_guided(c, r.checked.plan, c.planner());
    return;
  }
  std::vector<EntryLateness>& late = c.lateness();
  const std::vector<std::size_t>& entry_of = c.entry_of_published();
  for (std::size_t i = 0; i < late.size() && i < entry_of.size(); ++i)
    if (entry_of[i] < r.checked.refused_entry.size() && r.checked.refused_entry[entry_of[i]])
      late[i].settled = true;
}

// Submits the next refinement step while search time is left: a search of the plan's iteration
// that goes on from the best plan found so far, with the next seed.
void Server::refine(Client& c) {
  Client::Refinement& f = c.refinement();
  if (f.left_ms <= 0 || f.pending) return;
  PlannerThread::Job job = planner_job(c);
  job.kind = PlannerThread::Kind::kRefine;
  job.plan = f.best;
  job.seed = f.seed++;
  job.seeds = f.seeds_left;
  job.refinement = f.serial;
  job.time_budget_ms = std::min(policy::kRefineStepMs, f.left_ms);
  f.pending = planner_->submit(std::move(job));
}

// A refinement step's best plan is kept when it fits and is faster than the best so far, and
// published when policy::refined_plan_replaces the plan followed; then the next step.
void Server::take_refinement(Client& c, const PlannerThread::Result& r) {
  Client::Refinement& f = c.refinement();
  if (r.refinement != f.serial || !f.pending) return;  // a step of a plan replaced since
  f.pending = false;
  if (c.planning() || r.budget != plan_budget(c)) return;  // a new plan is coming
  f.left_ms -= r.plan_ms;
  ++f.steps;
  f.evaluations += r.search.evaluations;
  f.spent_ms += r.plan_ms;
  f.seeds_left = r.search.seeds_left;
  const policy::Plan& plan = r.search.plan;
  if (plan.feasible && plan.fits && r.search.sim.step_time_us > 0 &&
      r.search.sim.step_time_us < f.best_us) {
    f.best = plan;
    f.best_us = r.search.sim.step_time_us;
  }
  if (policy::refined_plan_replaces(f.best_us, f.published_us, f.left_ms <= 0)) {
    const std::string planner = fmt::format(
        "{}, refined ({} plans simulated in {} steps, {:.0f} ms): simulated step {:.1f}% "
        "shorter than the search's",
        f.planner, f.evaluations, f.steps, f.spent_ms, 100 * (1 - f.best_us / f.searched_us));
    f.published_us = f.best_us;
    publish_guided(c, f.best, planner);
    log_->info("pid {}: {} entries, {}", c.pid(), c.plan().size(), c.planner());
  }
  refine(c);
}

void Server::start_control(int fd, pid_t pid) {
  proto::HelloReply r{};
  r.magic = proto::kReplyMagic;
  r.version = proto::kProtocolVersion;
  std::strncpy(r.message, "control", sizeof r.message - 1);
  if (send(fd, &r, sizeof r, MSG_NOSIGNAL | MSG_DONTWAIT) != sizeof r) {
    close(fd);
    return;
  }
  if (controls_.size() >= kMaxControls) {
    close(controls_.front().exchange.fd());
    controls_.erase(controls_.begin());
    // One line a second at most, as for connections that never say hello: a flood must not
    // fill the log.
    ++controls_closed_;
    const std::int64_t now = now_ms();
    if (now - controls_closed_logged_ms_ >= 1000) {
      log_->warn("{} control exchanges under way: closed the oldest ({} since the last line)",
                 kMaxControls, controls_closed_);
      controls_closed_ = 0;
      controls_closed_logged_ms_ = now;
    }
  }
  controls_.push_back({ControlExchange(fd), pid, now_ms() + kControlTimeoutMs});
}

bool Server::serve_control(ControlPeer& c) {
  ControlExchange& x = c.exchange;
  std::string error;
  if (x.state() == ControlExchange::State::kReading) {
    x.read(&error);
    if (x.request_ready()) x.respond(answer(x.request()), &error);
  } else if (x.state() == ControlExchange::State::kWriting) {
    x.write(&error);
  }
  if (x.state() == ControlExchange::State::kFailed) {
    log_->warn("pid {}: control request dropped: {}", c.pid, error);
    return false;
  }
  return x.state() != ControlExchange::State::kDone;
}

// The response to one control request. Text from clients is made printable when received;
// dumping with `replace` is the second line of defence, and a request that fails anyway is
// answered with its error: one gswapctl command never takes the daemon, and every client with
// it, down.
std::string Server::answer(const std::string& body) {
  constexpr auto kReplace = nlohmann::json::error_handler_t::replace;
  try {
    nlohmann::json request = nlohmann::json::parse(body, nullptr, false);
    nlohmann::json response =
        request.is_discarded() || !request.is_object()
            ? nlohmann::json{{"ok", false}, {"error", "request is not a JSON object"}}
            : handle_request(request);
    return response.dump(-1, ' ', false, kReplace);
  } catch (const std::exception& e) {
    log_->error("control request failed: {}", e.what());
    return nlohmann::json{{"ok", false}, {"error", fmt::format("gswapd: {}", e.what())}}.dump(
        -1, ' ', false, kReplace);
  }
}

namespace {
const char* mode_name(std::uint64_t mode) {
  switch (static_cast<proto::PlanMode>(mode)) {
    case proto::PlanMode::kMeasure:
      return "measured";
    case proto::PlanMode::kGuided:
      return "guided";
    default:
      return "passive";
  }
}
}  // namespace

namespace {
// Iterations the client ran since it connected: its marks, else launches over the period.
std::uint64_t iterations_seen(const Client& c) {
  if (c.iteration().source == "marks") return c.counters().iteration_marks;
  return c.iteration().length ? c.counters().launches_seen / c.iteration().length : 0;
}

// Device time of the iteration plans are made from (first kernel start to last kernel end), 0
// before one was measured.
double measured_iteration_us(const Client& c) {
  const policy::Trace& t = c.planned_from().trace;
  double first = 0, last = 0;
  bool any = false;
  for (const policy::Launch& l : t.launches) {
    if (l.dur_us <= 0) continue;
    first = any ? std::min(first, l.start_us) : l.start_us;
    last = std::max(last, l.start_us + l.dur_us);
    any = true;
  }
  return any ? last - first : 0;
}

// The refinement of the plan followed: the steps run so far, and how much shorter the best plan
// found is than the search's in simulation.
nlohmann::json refinement_json(const Client::Refinement& f) {
  return {{"steps", f.steps},
          {"plans_simulated", f.evaluations},
          {"ms", f.spent_ms},
          {"left_ms", std::max(0.0, f.left_ms)},
          {"best_gain", f.searched_us > 0 ? 1 - f.best_us / f.searched_us : 0.0},
          {"published_gain", f.searched_us > 0 ? 1 - f.published_us / f.searched_us : 0.0},
          {"seeds_left", f.seeds_left}};
}
}  // namespace

nlohmann::json Server::client_json(const Client& c) const {
  const ClientCounters& k = c.counters();
  return {
      {"pid", c.pid()},
      {"exe", c.exe()},
      {"uid", c.uid()},
      {"connected_at", c.connected_at()},
      {"weight", config_.weight_for(c.exe())},
      {"budget_bytes", c.budget()},
      {"requested_budget_bytes", c.requested_budget()},
      {"effective_budget_bytes", effective_budget(c)},
      {"plan_budget_bytes", plan_budget(c)},
      {"fixed_bytes", k.status.fixed_bytes},
      {"applied_budget_bytes", k.status.applied_budget},
      {"resident_bytes", k.status.resident},
      {"peak_bytes", k.status.peak_resident},
      {"swapped_out_bytes", k.status.swapped_out},
      {"swapped_in_bytes", k.status.swapped_in},
      {"pinned_bytes", k.status.pinned},
      {"stalls", k.status.stalls},
      {"stall_ns", k.status.stall_ns},
      {"device_stall_ns", k.status.device_stall_ns},
      {"regions", k.status.regions},
      {"launches", k.status.launches},
      {"dropped_events", k.status.dropped_events},
      {"events", k.events},
      {"evictions", k.evictions},
      {"restores", k.restores},
      {"planned_evictions", k.status.planned_evictions},
      {"prefetches", k.status.prefetches},
      {"late_restores", k.status.late_restores},
      {"divergences", k.status.divergences},
      {"guided_iterations", k.status.guided_iterations},
      {"planned_drops", k.status.planned_drops},
      {"recomputes", k.status.recomputes},
      {"recomputed_bytes", k.status.recomputed_bytes},
      {"recompute_ns", k.status.recompute_ns},
      {"recompute_failures", k.status.recompute_failures},
      {"timing_skips", k.status.timing_skips},
      {"timing", k.status.timing_source == static_cast<std::uint64_t>(proto::TimingSource::kCupti)
                     ? "cupti"
                     : "events"},
      {"h2d_bytes_per_s", k.status.h2d_bytes_per_s},
      {"d2h_bytes_per_s", k.status.d2h_bytes_per_s},
      {"iteration_length", c.iteration().length},
      {"iteration_source", c.iteration().source},
      {"iterations", iterations_seen(c)},
      {"iteration_us", measured_iteration_us(c)},
      {"mode", mode_name(k.status.mode)},
      {"plan_generation", c.plan_generation()},
      {"planner", c.planner()},
      {"refinement", refinement_json(c.refinement())},
      // While measuring: why no iteration was planned yet (empty otherwise).
      {"measure_wait",
       c.published().mode == proto::PlanMode::kMeasure ? c.measure_wait() : std::string()},
  };
}

nlohmann::json Server::status_json() const {
  nlohmann::json clients = nlohmann::json::array();
  for (const auto& c : clients_) clients.push_back(client_json(*c));
  return {
      {"ok", true},
      {"gpu",
       {{"ordinal", gpu_.ordinal}, {"uuid", gpu_.uuid_text}, {"total_bytes", gpu_.total_bytes}}},
      {"daemon",
       {{"pid", getpid()},
        {"protocol_version", proto::kProtocolVersion},
        {"started_at", started_at_},
        {"socket", socket_path_},
        {"budget_bytes", config_.size("gpu_budget").resolve(gpu_.total_bytes)},
        {"share", config_.text("share")}}},
      {"clients", clients},
  };
}

nlohmann::json Server::policy_json(const Client& c) const {
  auto off = [](std::uint64_t o) {
    return o == proto::kNoOffset ? nlohmann::json(nullptr) : nlohmann::json(o);
  };
  nlohmann::json entries = nlohmann::json::array();
  const std::vector<proto::PlanEntry>& plan = c.plan();
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const proto::PlanEntry& e = plan[i];
    nlohmann::json j = {
        {"action",
         e.action == static_cast<std::uint16_t>(proto::PlanAction::kSwap) ? "swap" : "recompute"},
        {"evict_after", e.evict_after},
        {"evict_kernel", c.name_of_kernel(e.evict_function)},
        {"trigger", off(e.trigger)},
        {"trigger_kernel", e.trigger == proto::kNoOffset
                               ? nlohmann::json(nullptr)
                               : nlohmann::json(c.name_of_kernel(e.trigger_function))},
        {"back_access", off(e.back_access)}};
    if (e.back_access != proto::kNoOffset) j["back_lead"] = e.back_lead;
    if (e.region_id) {
      j["region"] = e.region_id;
      std::string name = c.name_of_region(e.region_id);
      if (!name.empty()) j["region_name"] = name;
    } else {
      j["bind_offset"] = e.bind_offset;
      j["bind_slot"] = e.bind_slot;
    }
    if (i < c.lateness().size() && c.lateness()[i].reports) {
      const EntryLateness& l = c.lateness()[i];
      j["lateness"] = {{"reports", l.reports},
                       {"late", l.late},
                       {"missed", l.missed},
                       {"max_late_us", static_cast<double>(l.late_ns) / 1e3},
                       {"trigger_kept", l.settled}};
    }
    entries.push_back(j);
  }
  const PublishedPlan& p = c.published();
  nlohmann::json signature = nlohmann::json::array();
  for (std::uint64_t f : p.signature) signature.push_back(c.name_of_kernel(f));
  return {{"pid", c.pid()},
          {"exe", c.exe()},
          {"generation", c.plan_generation()},
          {"budget_bytes", c.budget()},
          {"effective_budget_bytes", effective_budget(c)},
          {"mode", mode_name(static_cast<std::uint64_t>(p.mode))},
          {"iteration_length", p.iteration_length},
          {"iteration_first_seq", p.first_seq},
          {"seq_length", p.seq_length},
          {"signature", signature},
          {"measure_every", p.measure_every},
          {"planner", c.planner()},
          {"recomputes", c.counters().status.recomputes},
          {"recompute_ns", c.counters().status.recompute_ns},
          {"recompute_failures", c.counters().status.recompute_failures},
          {"entries", entries}};
}

nlohmann::json Server::handle_request(const nlohmann::json& request) {
  auto cmd_it = request.find("cmd");
  if (cmd_it == request.end() || !cmd_it->is_string())
    return {{"ok", false}, {"error", "request without a string 'cmd'"}};
  std::string cmd = cmd_it->get<std::string>();
  std::int64_t pid = 0;
  if (auto it = request.find("pid"); it != request.end()) {
    // A process id: 1 to the largest pid_t. (A larger number would wrap when read as one.)
    const bool is_pid = it->is_number_unsigned()
                            ? it->get<std::uint64_t>() - 1 <
                                  static_cast<std::uint64_t>(std::numeric_limits<pid_t>::max())
                            : it->is_number_integer() && it->get<std::int64_t>() > 0 &&
                                  it->get<std::int64_t>() <= std::numeric_limits<pid_t>::max();
    if (!is_pid)
      return {{"ok", false},
              {"error", fmt::format("'pid' must be a process id, 1 to {}",
                                    std::numeric_limits<pid_t>::max())}};
    pid = it->get<std::int64_t>();
  }
  if (cmd == "status") return status_json();
  if (cmd == "policy") {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& c : clients_)
      if (!pid || c->pid() == pid) out.push_back(policy_json(*c));
    if (pid && out.empty())
      return {{"ok", false}, {"error", fmt::format("no client with pid {}", pid)}};
    return {{"ok", true}, {"gpu", gpu_.uuid_text}, {"clients", out}};
  }
  if (cmd == "trace") {
    for (const auto& c : clients_) {
      if (c->pid() != pid) continue;
      if (!c->iteration().length)
        return {{"ok", false}, {"error", fmt::format("pid {} has no complete iteration yet", pid)}};
      // The iteration the plan was made from has measured durations; without one (nothing
      // measured yet), the last complete iteration.
      policy::Trace t = c->planned_from().trace.launches.empty()
                            ? c->last_iteration_trace(gpu_.total_bytes)
                            : c->planned_from().trace;
      // The link as measured now (the library keeps measuring it on its own copies).
      const proto::StatusPayload& st = c->counters().status;
      if (st.h2d_bytes_per_s) t.device.h2d_bytes_per_s = static_cast<double>(st.h2d_bytes_per_s);
      if (st.d2h_bytes_per_s) t.device.d2h_bytes_per_s = static_cast<double>(st.d2h_bytes_per_s);
      nlohmann::json out = {{"ok", true}, {"trace_json", policy::write_trace_json(t)}};
      // The plan the library follows, in that trace's positions: the entries published (the
      // ones it can name), as the feedback rule last moved them.
      if (c->published().mode == proto::PlanMode::kGuided &&
          !c->planned_from().trace.launches.empty()) {
        policy::Plan followed;
        followed.policy = c->planner();
        for (std::size_t k : c->entry_of_published())
          if (k < c->current_plan().entries.size())
            followed.entries.push_back(c->current_plan().entries[k]);
        out["plan_json"] = policy::write_plan_json(followed);
      }
      return out;
    }
    return {{"ok", false}, {"error", fmt::format("no client with pid {}", pid)}};
  }
  if (cmd == "timeline") {
    for (const auto& c : clients_)
      if (c->pid() == pid)
        return {{"ok", true}, {"timeline", policy::chrome::to_json(client_timeline(*c))}};
    return {{"ok", false}, {"error", fmt::format("no client with pid {}", pid)}};
  }
  return {{"ok", false}, {"error", fmt::format("unknown command '{}'", cmd)}};
}

}  // namespace gswap::daemon
