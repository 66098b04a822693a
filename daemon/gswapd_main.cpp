// gswapd_main.cpp: the gswapd command: one daemon per GPU.
//   gswapd [--gpu <ordinal|UUID>] [--config F] [--foreground] [--log-file F] [--log-level L]
// Without --gpu it serves the GPU the config names (GSWAP_GPU / "gpu"; default 0).
// Exit codes: 0 clean stop, 1 error, 3 another gswapd already serves this GPU.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "daemon/config.h"
#include "daemon/gpu_probe.h"
#include "daemon/server.h"
#include "policy/printable_text.h"

namespace {

std::atomic<bool> g_stop{false};
void on_signal(int) {
  g_stop.store(true);
}

spdlog::level::level_enum to_level(const std::string& s) {
  if (s == "off") return spdlog::level::off;
  if (s == "error") return spdlog::level::err;
  if (s == "warn") return spdlog::level::warn;
  if (s == "info") return spdlog::level::info;
  if (s == "debug") return spdlog::level::debug;
  return spdlog::level::trace;
}

// Detaches from the terminal: fork, setsid, fork. The original process waits on a pipe until the
// grandchild says it listens (or why it cannot), so `gswapd` returns only once it is usable.
// Returns the write end of that pipe in the grandchild; never returns in the original process.
int daemonize() {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    std::perror("gswapd: pipe");
    std::exit(1);
  }
  pid_t pid = fork();
  if (pid < 0) {
    std::perror("gswapd: fork");
    std::exit(1);
  }
  if (pid > 0) {
    close(pipefd[1]);
    char code = 1;
    if (read(pipefd[0], &code, 1) != 1) code = 1;
    char buf[512];
    ssize_t n = read(pipefd[0], buf, sizeof buf);
    if (n > 0) (void)!write(2, buf, static_cast<std::size_t>(n));
    std::_Exit(code);
  }
  close(pipefd[0]);
  setsid();
  if (fork() != 0) std::_Exit(0);
  // Let go of the caller's terminal and pipes entirely, or `$(gswapctl run ...)` would wait for
  // the daemon to exit; logs then go to a file (see main).
  int null = open("/dev/null", O_RDWR);
  if (null >= 0) {
    dup2(null, 0);
    dup2(null, 1);
    dup2(null, 2);
    if (null > 2) close(null);
  }
  return pipefd[1];
}

// The start-up's outcome: through the parent's pipe when detached, else the message (if any) on
// standard error.
void report_ready(int fd, char code, const std::string& message) {
  if (fd < 0) {
    std::cerr << message;
    return;
  }
  (void)!write(fd, &code, 1);
  if (!message.empty()) (void)!write(fd, message.data(), message.size());
  close(fd);
}

}  // namespace

int main(int argc, char** argv) {
  // A daemon started by the library inherits the application's descriptors (pipes to its parent,
  // sockets); holding them would keep a `$(...)` or a pipeline around the application waiting
  // forever. gswapd needs none of them.
  close_range(3, ~0u, 0);
  CLI::App app{"gswapd: the gswap daemon for one GPU"};
  std::string gpu, config_file, log_file, log_level;
  bool foreground = false;
  app.add_option("--gpu", gpu, "GPU ordinal or UUID (GPU-...); default: GSWAP_GPU, else 0");
  app.add_option("--config", config_file, "JSON config file (default: $GSWAP_CONFIG)");
  app.add_flag("--foreground", foreground, "stay attached to the terminal");
  app.add_option("--log-file", log_file, "log to this file instead of standard error");
  app.add_option("--log-level", log_level, "off|error|warn|info|debug|trace");
  CLI11_PARSE(app, argc, argv);

  // Detached, the parent waits on this pipe for a status and the reason of a failure: every
  // failure after daemonize() reports there, standard error being /dev/null by then.
  int ready_fd = -1;
  try {
    gswap::daemon::Config config;
    std::vector<std::string> errors;
    if (config_file.empty())
      if (const char* c = std::getenv("GSWAP_CONFIG")) config_file = c;
    if (!config_file.empty()) errors = config.merge_file(config_file);
    auto env_errors = config.merge_env([](const char* name) { return std::getenv(name); });
    errors.insert(errors.end(), env_errors.begin(), env_errors.end());
    for (std::string& e : errors) e = "config: " + e;
    // The options are set as they are given, not through JSON: a path need not be UTF-8. Each
    // is checked as its environment variable is; --gpu before the log file's path is made of it.
    if (!log_file.empty()) config.merge_value("log_file", log_file, "--log-file");  // any path
    if (!log_level.empty())
      if (std::string why = config.merge_value("log_level", log_level, "--log-level"); !why.empty())
        errors.push_back("--log-level: " + why);
    if (app.count("--gpu"))
      if (std::string why = config.merge_value("gpu", gpu, "--gpu"); !why.empty())
        errors.push_back("--gpu: " + why);
    if (!errors.empty()) {
      for (const auto& e : errors) std::cerr << "gswapd: " << e << "\n";
      return 1;
    }
    gpu = config.text("gpu");

    ready_fd = foreground ? -1 : daemonize();
    std::shared_ptr<spdlog::logger> log;
    std::string file = config.text("log_file");
    if (file.empty() && !foreground) {
      // Detached with no log file: standard error is gone, so log next to the socket, in the
      // runtime directory made as the server makes it (its mode, its parents).
      bool existed = false;
      std::string why;
      if (!gswap::daemon::make_runtime_dir(config, &existed, &why)) throw std::runtime_error(why);
      file = gswap::daemon::runtime_dir(config) + "/gswapd-" + gpu + ".log";
    }
    if (!file.empty()) {
      // The log names clients' pids, programs and uids: a file gswapd makes is its user's alone.
      // Opened here first, so that a path that cannot be opened (a missing directory) is refused
      // with the reason, as the library refuses GSWAP_LOG_FILE (spdlog would make the missing
      // directories); non-blocking, so that a FIFO nobody reads is refused (ENXIO) rather than
      // waited on for ever; held open until spdlog has opened the file, so that a FIFO's reader
      // does not see its only writer go.
      const int fd =
          ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_NONBLOCK | O_CLOEXEC, 0600);
      if (fd < 0)
        throw std::runtime_error(fmt::format("cannot open the log file {}: {}",
                                             gswap::policy::printable_text(file),
                                             std::strerror(errno)));
      try {
        log = spdlog::basic_logger_mt("gswapd", file);
      } catch (...) {
        ::close(fd);
        throw;
      }
      ::close(fd);
    } else
      log = spdlog::stderr_color_mt("gswapd");
    log->set_level(to_level(config.text("log_level")));
    log->flush_on(spdlog::level::info);
    log->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [gswapd %P] [%l] %v");

    gswap::daemon::GpuIdentity identity;
    std::string error;
    if (!gswap::daemon::probe_gpu(gpu, &identity, &error)) {
      report_ready(ready_fd, 1, "gswapd: " + error + "\n");
      log->error("{}", error);
      return 1;
    }
    gswap::daemon::Server server(config, identity, log);
    bool already = false;
    if (!server.open(&error, &already)) {
      report_ready(ready_fd, already ? 3 : 1, "gswapd: " + error + "\n");
      return already ? 3 : 1;
    }
    signal(SIGPIPE, SIG_IGN);
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    report_ready(ready_fd, 0, "");
    ready_fd = -1;  // reported: a later failure goes to the log only
    server.run(g_stop);
    return 0;
  } catch (const std::exception& e) {
    // A log file that cannot be opened, for one (spdlog throws).
    report_ready(ready_fd, 1, std::string("gswapd: ") + e.what() + "\n");
    return 1;
  }
}
