// gswapctl_main.cpp: the gswap command line: status, policy and trace dumps (and timelines) from
// the daemons, a live view of the clients (top), config checks, running a command under gswap,
// the policy simulator and the memory plot.
// Errors are caught at the command boundary and printed as one line; the exit code says whether
// the command worked (1 on failure, the command's own code for `run`).
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <thread>
#include <fstream>
#include <sstream>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "daemon/config.h"
#include "daemon/control.h"
#include "daemon/gpu_probe.h"
#include "daemon/table.h"
#include "policy/printable_text.h"
#include "policy/write_file.h"
#include "proto/wire.h"
#ifdef GSWAP_HAVE_LIBRARY_CONFIG
#include "interpose/config.h"
#endif

#ifdef GSWAP_HAVE_SIMULATE
#include "policy/cli/plot_command.h"
#include "policy/cli/simulate_command.h"
#include "policy/trace_json.h"
#endif

namespace gswap::daemon {
namespace {

struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

Config load_config(const std::string& file) {
  Config config;
  std::vector<std::string> errors;
  std::string path = file;
  if (path.empty())
    if (const char* c = std::getenv("GSWAP_CONFIG")) path = c;
  if (!path.empty()) errors = config.merge_file(path);
  auto e = config.merge_env([](const char* name) { return std::getenv(name); });
  errors.insert(errors.end(), e.begin(), e.end());
  if (!errors.empty()) throw Failure("config: " + errors.front());
  return config;
}

// The JSON text of a value, never an exception: strings that are not UTF-8 (none should reach
// here: requests hold no user text, and responses parsed as JSON) are written with U+FFFD.
std::string json_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Sockets of every daemon in the runtime directory.
std::vector<std::string> daemon_sockets(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  // A directory that is there but cannot be listed is not the same as no daemon.
  if (!d && errno != ENOENT)
    throw Failure(fmt::format("cannot list the runtime dir {}: {}", dir, strerror(errno)));
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 5 && name.ends_with(".sock")) out.push_back(dir + "/" + name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

// Sends the request to every reachable daemon; throws when none answers.
std::vector<nlohmann::json> ask_all(const nlohmann::json& request) {
  Config config = load_config("");
  std::string dir = runtime_dir(config);
  std::vector<nlohmann::json> answers;
  std::string last_error;
  for (const std::string& path : daemon_sockets(dir)) {
    std::string body, error;
    if (!control_request(path, json_text(request), &body, &error)) {
      last_error = error;
      continue;
    }
    nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded()) {
      last_error = "the daemon sent a response that is not JSON";
      continue;
    }
    answers.push_back(std::move(j));
  }
  if (answers.empty())
    throw Failure(last_error.empty() ? fmt::format("no gswapd is running (runtime dir {})", dir)
                                     : fmt::format("no gswapd answered ({})", last_error));
  return answers;
}

std::string bytes_text(std::uint64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt::format("{} B", b) : fmt::format("{:.1f} {}", v, units[u]);
}

int cmd_status(bool json) {
  std::vector<nlohmann::json> answers = ask_all({{"cmd", "status"}});
  if (json) {
    nlohmann::json out = {{"gpus", answers}};
    for (auto& g : out["gpus"]) g.erase("ok");
    std::cout << json_text(out, 2) << "\n";
    return 0;
  }
  for (const auto& a : answers) {
    std::cout << fmt::format(
        "GPU {} {}  total {}  budget {} ({})  gswapd pid {}\n", a["gpu"]["ordinal"].get<int>(),
        a["gpu"]["uuid"].get<std::string>(), bytes_text(a["gpu"]["total_bytes"]),
        bytes_text(a["daemon"]["budget_bytes"]), a["daemon"]["share"].get<std::string>(),
        a["daemon"]["pid"].get<int>());
    Table t({"PID", "EXE", "BUDGET", "RESIDENT", "PEAK", "SWAPPED OUT", "RECOMPUTED", "STALLS",
             "DROPPED", "ITERATION", "MODE"});
    for (const auto& c : a["clients"])
      t.add({std::to_string(c["pid"].get<int>()), c["exe"].get<std::string>(),
             bytes_text(c["effective_budget_bytes"]), bytes_text(c["resident_bytes"]),
             bytes_text(c["peak_bytes"]), bytes_text(c["swapped_out_bytes"]),
             bytes_text(c["recomputed_bytes"]), std::to_string(c["stalls"].get<std::uint64_t>()),
             std::to_string(c["dropped_events"].get<std::uint64_t>()),
             std::to_string(c["iteration_length"].get<std::uint64_t>()),
             c["mode"].get<std::string>()});
    if (a["clients"].empty())
      std::cout << "  no clients\n";
    else
      std::cout << t.render("  ");
  }
  return 0;
}

int cmd_policy(std::optional<long> pid, bool json) {
  nlohmann::json req = {{"cmd", "policy"}};
  if (pid) req["pid"] = *pid;
  std::vector<nlohmann::json> answers = ask_all(req);
  nlohmann::json clients = nlohmann::json::array();
  std::string error;
  for (const auto& a : answers) {
    if (!a.value("ok", false)) {
      error = a.value("error", "error");
      continue;
    }
    for (const auto& c : a["clients"]) {
      nlohmann::json x = c;
      x["gpu"] = a["gpu"];
      clients.push_back(x);
    }
  }
  if (pid && clients.empty()) throw Failure(error.empty() ? "no such client" : error);
  if (json) {
    std::cout << json_text({{"clients", clients}}, 2) << "\n";
    return 0;
  }
  for (const auto& c : clients) {
    std::cout << fmt::format(
        "pid {} ({}) on {}: mode {}, budget {}, iteration {} launches, plan generation {}, planner "
        "{}\n",
        c["pid"].get<int>(), c["exe"].get<std::string>(), c["gpu"].get<std::string>(),
        c["mode"].get<std::string>(), bytes_text(c["budget_bytes"]),
        c["iteration_length"].get<std::uint64_t>(), c["generation"].get<std::uint64_t>(),
        c["planner"].get<std::string>());
    if (c["entries"].empty()) {
      std::cout << "  no planned swaps or recomputations\n";
      continue;
    }
    std::size_t swaps = 0, recomputes = 0;
    for (const auto& e : c["entries"]) (e["action"] == "swap" ? swaps : recomputes) += 1;
    std::cout << fmt::format(
        "  {} planned swaps, {} planned recomputations; {} recomputations run ({:.1f} ms of "
        "device time, {} failed)\n",
        swaps, recomputes, c["recomputes"].get<std::uint64_t>(),
        static_cast<double>(c["recompute_ns"].get<std::uint64_t>()) / 1e6,
        c["recompute_failures"].get<std::uint64_t>());
    auto pos = [](const nlohmann::json& v) {
      return v.is_null() ? std::string("-") : std::to_string(v.get<std::uint64_t>());
    };
    Table t({"REGION", "ACTION", "EVICT AFTER", "PREFETCH AT", "BACK AT", "LATE"});
    for (const auto& e : c["entries"]) {
      std::string region = e.contains("region")
                               ? std::to_string(e["region"].get<std::uint64_t>())
                               : fmt::format("new at {}#{}", e["bind_offset"].get<std::uint64_t>(),
                                             e["bind_slot"].get<std::uint64_t>());
      if (e.contains("region_name")) region += " " + e["region_name"].get<std::string>();
      std::string prefetch =
          e["trigger"].is_null() ? (e["action"] == "swap" ? "on demand" : "-") : pos(e["trigger"]);
      std::string late = "-";
      if (e.contains("lateness"))
        late = fmt::format("{}/{} late, max {:.0f} us", e["lateness"]["late"].get<std::uint64_t>(),
                           e["lateness"]["reports"].get<std::uint64_t>(),
                           e["lateness"]["max_late_us"].get<double>());
      if (e.contains("lateness") && e["lateness"].value("trigger_kept", false))
        late += ", kept: earlier costs more";
      t.add({region, e["action"].get<std::string>(), pos(e["evict_after"]), prefetch,
             pos(e["back_access"]), late});
    }
    std::cout << t.render("  ");
  }
  if (clients.empty()) std::cout << "no clients\n";
  return 0;
}

// The answer of the daemon that serves `pid` to a per-client request; throws its error (or "no
// client with pid P" when no daemon has it).
nlohmann::json ask_for_client(nlohmann::json request, long pid) {
  request["pid"] = pid;
  std::string error;
  for (auto& a : ask_all(request)) {
    if (a.value("ok", false)) return std::move(a);
    error = a.value("error", "error");
  }
  throw Failure(error.empty() ? fmt::format("no client with pid {}", pid) : error);
}

int cmd_trace(long pid, const std::string& out, const std::string& plan_out,
              const std::string& timeline) {
  if (out.empty() && timeline.empty())
    throw Failure(
        "trace dump: give --out FILE (the gswap-trace), --timeline FILE (a Chrome "
        "trace for ui.perfetto.dev), or both");
  if (!plan_out.empty() && out.empty())
    throw Failure("trace dump: --plan-out needs --out (the plan's positions are that trace's)");
  if (!out.empty()) {
    nlohmann::json a = ask_for_client({{"cmd", "trace"}}, pid);
    // Checked before anything is written: a plan asked for and not there is an error.
    if (!plan_out.empty() && !a.contains("plan_json"))
      throw Failure(
          fmt::format("pid {} follows no plan (not guided): nothing for --plan-out", pid));
    gswap::policy::write_file(out, a["trace_json"].get<std::string>());
    std::cout << fmt::format("wrote the last iteration of pid {} to {}\n", pid, out);
    if (!plan_out.empty()) {
      gswap::policy::write_file(plan_out, a["plan_json"].get<std::string>() + "\n");
      std::cout << fmt::format("wrote the plan pid {} follows to {}\n", pid, plan_out);
    }
  }
  if (!timeline.empty()) {
    nlohmann::json a = ask_for_client({{"cmd", "timeline"}}, pid);
    gswap::policy::write_file(timeline, json_text(a["timeline"]) + "\n");
    std::cout << fmt::format(
        "wrote the timeline of pid {} to {} (open it in ui.perfetto.dev or chrome://tracing)\n",
        pid, timeline);
  }
  return 0;
}

#ifdef GSWAP_HAVE_SIMULATE
// `plot --pid`: the client's last measured iteration and the budget its plans are made for.
policy::cli::ProgramTrace program_trace(long pid) {
  nlohmann::json a = ask_for_client({{"cmd", "trace"}}, pid);
  policy::cli::ProgramTrace p;
  std::string error;
  if (!policy::parse_trace_json(a["trace_json"].get<std::string>(), &p.trace, &error))
    throw Failure(fmt::format("gswapd sent a trace of pid {} that does not parse: {}", pid, error));
  p.name = fmt::format("pid {}", pid);
  for (const auto& g : ask_all({{"cmd", "status"}}))
    for (const auto& c : g.value("clients", nlohmann::json::array()))
      if (c.value("pid", 0L) == pid) {
        p.plan_budget = c.value("plan_budget_bytes", std::uint64_t{0});
        p.name = fmt::format("{} (pid {})", c.value("exe", std::string("?")), pid);
      }
  return p;
}
#endif

// One `top` sample: every client of every daemon, keyed by GPU and pid.
struct TopSample {
  double t = 0;                         // seconds, monotonic
  std::vector<nlohmann::json> clients;  // status --json's client objects, with "gpu" added
};

TopSample top_sample() {
  TopSample s;
  for (auto& a : ask_all({{"cmd", "status"}})) {
    for (auto& c : a["clients"]) {
      nlohmann::json x = c;
      x["gpu"] = a["gpu"]["uuid"];
      s.clients.push_back(std::move(x));
    }
  }
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  s.t = static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
  return s;
}

// A client's rates between two samples (null where it was not in the earlier one).
nlohmann::json top_rates(const nlohmann::json& now, const TopSample& before, double now_t) {
  const nlohmann::json* old = nullptr;
  for (const auto& c : before.clients)
    if (c["pid"] == now["pid"] && c["gpu"] == now["gpu"] &&
        c["connected_at"] == now["connected_at"])
      old = &c;
  const double dt = now_t - before.t;
  auto delta = [&](const char* key) {
    return static_cast<double>(now[key].get<std::uint64_t>()) -
           static_cast<double>((*old)[key].get<std::uint64_t>());
  };
  nlohmann::json r = {{"interval_s", dt}};
  if (!old || dt <= 0) {
    for (const char* k : {"swap_out_bytes_per_s", "swap_in_bytes_per_s", "iterations_per_s",
                          "stalls_per_s", "late_restores_per_s"})
      r[k] = nullptr;
    return r;
  }
  r["swap_out_bytes_per_s"] = delta("swapped_out_bytes") / dt;
  r["swap_in_bytes_per_s"] = delta("swapped_in_bytes") / dt;
  r["iterations_per_s"] = delta("iterations") / dt;
  r["stalls_per_s"] = delta("stalls") / dt;
  r["late_restores_per_s"] = delta("late_restores") / dt;
  return r;
}

std::string top_table(const TopSample& now, const TopSample* before) {
  Table t({"GPU", "PID", "NAME", "MODE", "ITERS", "ITER TIME", "RESIDENT / BUDGET", "OUT MB/s",
           "IN MB/s", "STALLS", "LATE"});
  for (const auto& c : now.clients) {
    nlohmann::json r = before ? top_rates(c, *before, now.t) : nlohmann::json::object();
    auto rate = [&](const char* k, double scale) {
      return r.contains(k) && !r[k].is_null() ? fmt::format("{:.1f}", r[k].get<double>() / scale)
                                              : std::string("-");
    };
    // The iteration time: from the iterations run between the samples, else as measured.
    std::string iter = "-";
    if (r.contains("iterations_per_s") && !r["iterations_per_s"].is_null() &&
        r["iterations_per_s"].get<double>() > 0)
      iter = fmt::format("{:.1f} ms", 1e3 / r["iterations_per_s"].get<double>());
    else if (c.value("iteration_us", 0.0) > 0)
      iter = fmt::format("{:.1f} ms", c["iteration_us"].get<double>() / 1e3);
    const std::uint64_t budget = c["effective_budget_bytes"], resident = c["resident_bytes"];
    std::string mem = fmt::format("{} / {}", bytes_text(resident), bytes_text(budget));
    if (budget) mem += fmt::format(" ({:.0f}%)", 100.0 * resident / budget);
    std::string gpu = c["gpu"].get<std::string>();
    t.add({gpu.substr(0, std::min<std::size_t>(gpu.size(), 12)),
           std::to_string(c["pid"].get<long>()), c["exe"].get<std::string>(),
           c["mode"].get<std::string>(), std::to_string(c.value("iterations", std::uint64_t{0})),
           iter, mem, rate("swap_out_bytes_per_s", 1e6), rate("swap_in_bytes_per_s", 1e6),
           std::to_string(c["stalls"].get<std::uint64_t>()),
           std::to_string(c["late_restores"].get<std::uint64_t>())});
  }
  return now.clients.empty() ? std::string("no clients\n") : t.render("");
}

// `top --interval`'s bounds: shorter would ask the daemons without pause (a duration under a
// nanosecond sleeps not at all), longer is no live view; infinity and NaN are no durations.
constexpr double kMinTopInterval = 0.01, kMaxTopInterval = 3600;

int cmd_top(bool json, double interval, long count) {
  if (!std::isfinite(interval) || interval < kMinTopInterval || interval > kMaxTopInterval)
    throw Failure(fmt::format("top: --interval must be from {:g} to {:g} seconds, not {}",
                              kMinTopInterval, kMaxTopInterval, interval));
  if (count < 0) throw Failure("top: --count must not be negative");
  auto sleep = [&] { std::this_thread::sleep_for(std::chrono::duration<double>(interval)); };
  if (json) {
    // One sample, with its rates over one interval.
    TopSample before = top_sample();
    sleep();
    TopSample now = top_sample();
    nlohmann::json clients = nlohmann::json::array();
    for (const auto& c : now.clients) {
      nlohmann::json x = c;
      x["rates"] = top_rates(c, before, now.t);
      clients.push_back(std::move(x));
    }
    std::cout << json_text({{"interval_s", now.t - before.t}, {"clients", clients}}, 2) << "\n";
    return 0;
  }
  const bool tty = isatty(STDOUT_FILENO);
  std::optional<TopSample> before;
  for (long n = 0; count == 0 || n < count; ++n) {
    if (n) sleep();
    TopSample now = top_sample();
    std::time_t wall = std::time(nullptr);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%H:%M:%S", std::localtime(&wall));
    // On a terminal the table is redrawn in place, like top; into a pipe, tables follow each other.
    std::cout << (tty ? "\x1b[H\x1b[2J" : (n ? "\n" : ""))
              << fmt::format("gswapctl top  {}  every {:g} s  (Ctrl-C to quit)\n", stamp, interval)
              << top_table(now, before ? &*before : nullptr) << std::flush;
    before = std::move(now);
  }
  return 0;
}

// Why the library could not open `path` for writing (its cuInit opens GSWAP_LOG_FILE so, creating
// it); empty when it could. Nothing is created or opened: a file that is not there is writable
// where its directory is, and a FIFO is not opened (closing it would end its reader; whether one
// reads is the library's to find out).
std::string unwritable(const std::string& path) {
  if (path.empty()) return "";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return std::strerror(EISDIR);
    return ::access(path.c_str(), W_OK) == 0 ? "" : std::strerror(errno);
  }
  if (errno != ENOENT) return std::strerror(errno);
  // Not there: created where it is named, or where a dangling link named so points (a link to a
  // missing directory is as unwritable as the directory).
  std::filesystem::path named(path);
  for (int links = 0; links < 40; ++links) {
    std::error_code ec;
    const std::filesystem::path to = std::filesystem::read_symlink(named, ec);
    if (ec) break;
    named = to.is_absolute() ? to : named.parent_path() / to;
  }
  const std::filesystem::path dir = named.parent_path();
  const std::string d = dir.empty() ? "." : dir.string();
  if (::stat(d.c_str(), &st) != 0) return std::strerror(errno);
  if (!S_ISDIR(st.st_mode)) return std::strerror(ENOTDIR);
  return ::access(d.c_str(), W_OK | X_OK) == 0 ? "" : std::strerror(errno);
}

// The library's own checks (interpose/config.cpp) of the settings it reads, as `gswapctl run`
// would hand them over (environment variables): the parsers accept what the library may still
// refuse (staging_bytes under 64KiB, a percentage where it wants bytes), and every cuInit would
// then fail. Empty when the library would start, else its one-line reason.
std::string library_refusal(const Config& config) {
#ifdef GSWAP_HAVE_LIBRARY_CONFIG
  static std::map<std::string, std::string, std::less<>> env;
  env.clear();
  for (const settings::Declaration& d : settings::kDeclarations)
    if (*d.env && std::string_view(d.scope) != "daemon") env[d.env] = config.text(d.ident);
  interpose::Config lib;
  char err[512] = {};
  if (!interpose::load_config(
          [](const char* name) -> const char* {
            auto it = env.find(std::string_view(name));
            return it == env.end() ? nullptr : it->second.c_str();
          },
          &lib, err, sizeof err))
    return err;
#else
  (void)config;
#endif
  // And, as its cuInit does, that its log file can be written.
  const std::string log_file = config.text("log_file");
  if (std::string why = unwritable(log_file); !why.empty())
    return fmt::format("GSWAP_LOG_FILE=\"{}\" cannot be written ({})",
                       gswap::policy::printable_text(log_file), why);
  return "";
}

int cmd_config_check(const std::string& file) {
  Config config;
  std::string text, why;
  if (!read_config_file(file, &text, &why)) {
    std::cout << file << ": " << why << "\n";
    return 1;
  }
  std::vector<std::string> errors = config.merge_json(text);
  if (errors.empty())
    if (std::string refusal = library_refusal(config); !refusal.empty())
      errors.push_back("the library would refuse it: " + refusal);
  if (errors.empty()) {
    std::cout << file << ": ok\n";
    return 0;
  }
  for (const auto& e : errors) std::cout << file << ": " << e << "\n";
  return 1;
}

std::string self_dir() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) throw Failure("cannot find gswapctl's own path");
  std::string p(buf, static_cast<std::size_t>(n));
  return p.substr(0, p.rfind('/'));
}

std::string find_first(const std::vector<std::string>& candidates) {
  for (const auto& c : candidates)
    if (access(c.c_str(), R_OK) == 0) return c;
  return "";
}

// Whether some process holds a flock on the file at `path`, read from /proc/locks rather than
// by trying the lock: even a shared lock held for an instant would make a gswapd starting at that
// moment believe another one serves its GPU, and exit.
bool flock_held(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return false;
  std::ifstream locks("/proc/locks");
  std::string line;
  while (std::getline(locks, line)) {
    // "1: FLOCK  ADVISORY  WRITE 1234 08:01:56789 0 EOF" (device numbers in hex, inode decimal);
    // a waiter's line starts "1: -> FLOCK ..." and holds nothing.
    std::istringstream in(line);
    std::string ordinal, type, mode, access, pid, dev;
    if (!(in >> ordinal >> type >> mode >> access >> pid >> dev) || type != "FLOCK") continue;
    unsigned maj = 0, min = 0;
    unsigned long long ino = 0;
    if (std::sscanf(dev.c_str(), "%x:%x:%llu", &maj, &min, &ino) == 3 && maj == major(st.st_dev) &&
        min == minor(st.st_dev) && ino == st.st_ino)
      return true;
  }
  return false;
}

// Whether a gswapd already serves the GPU `gpu` (an ordinal or a UUID) in `dir`: one of its
// sockets answers a status request for that GPU, or that GPU's lock is held (a daemon still
// starting, or too busy to answer). Then `gswapctl run` uses it rather than starting another.
bool daemon_serves(const std::string& dir, const std::string& gpu) {
  std::uint64_t ordinal = 0;
  bool by_ordinal = settings::parse_uint(gpu, &ordinal);
  std::uint8_t want[16];
  char text[48];
  std::string uuid;  // the GPU's UUID text, once known
  if (!by_ordinal && proto::parse_uuid(gpu.c_str(), want)) uuid = proto::format_uuid(want, text);
  for (const std::string& path : daemon_sockets(dir)) {
    std::string body, error;
    if (!control_request(path, json_text({{"cmd", "status"}}), &body, &error)) continue;
    nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_discarded() || !j.contains("gpu") || !j["gpu"].is_object()) continue;
    const nlohmann::json& g = j["gpu"];
    if (by_ordinal && g.value("ordinal", -1) == static_cast<long long>(ordinal)) return true;
    if (!uuid.empty() && g.value("uuid", "") == uuid) return true;
  }
  // No socket answered: a held lock file. Lock files are named by UUID, so an ordinal is turned
  // into one through the driver (as gswapd itself would), and only when some lock is held.
  DIR* d = opendir(dir.c_str());
  if (!d) return false;
  std::vector<std::string> held;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name.size() > 5 && name.ends_with(".lock") && flock_held(dir + "/" + name))
      held.push_back(name.substr(0, name.size() - 5));
  }
  closedir(d);
  if (held.empty()) return false;
  if (uuid.empty()) {
    GpuIdentity id;
    std::string error;
    if (!probe_gpu(gpu, &id, &error)) return false;  // gswapd will report the same problem
    uuid = id.uuid_text;
  }
  return std::find(held.begin(), held.end(), uuid) != held.end();
}

// Framework allocator settings that give gswap one device allocation per tensor (see the design
// brief): caching allocators hand out slices of big segments, which gswap can only move whole.
struct FrameworkSetting {
  const char* name;
  const char* value;
  const char* alternatives[2];  // variables that, when set, mean the user already chose
};
constexpr FrameworkSetting kFrameworkSettings[] = {
    // PYTORCH_ALLOC_CONF is the newer name of the same setting; PYTORCH_NO_CUDA_MEMORY_CACHING is
    // another per-tensor choice (plain cuMemAlloc) that the user made.
    {"PYTORCH_CUDA_ALLOC_CONF",
     "backend:cudaMallocAsync",
     {"PYTORCH_ALLOC_CONF", "PYTORCH_NO_CUDA_MEMORY_CACHING"}},
    {"XLA_PYTHON_CLIENT_ALLOCATOR", "platform", {}},
    {"XLA_PYTHON_CLIENT_PREALLOCATE", "false", {}},
    {"TF_GPU_ALLOCATOR", "cuda_malloc_async", {}},
};

// Sets every framework setting the user left unset, and says in one line what it did, so the
// command's output shows why PyTorch, JAX or TensorFlow allocate differently under gswap.
void set_framework_allocators() {
  auto is_set = [](const char* name) { return name && std::getenv(name) != nullptr; };
  std::string set, kept;
  for (const FrameworkSetting& s : kFrameworkSettings) {
    if (is_set(s.name) || is_set(s.alternatives[0]) || is_set(s.alternatives[1])) {
      kept += fmt::format("{}{}", kept.empty() ? "" : ", ", s.name);
      continue;
    }
    setenv(s.name, s.value, 1);
    set += fmt::format(" {}={}", s.name, s.value);
  }
  if (set.empty()) return;
  std::cerr << "gswapctl: one allocation per tensor:" << set
            << (kept.empty() ? "" : " (kept as set: " + kept + ")") << "\n";
}

int cmd_run(const std::string& budget, const std::string& config_file,
            std::vector<std::string> command) {
  if (command.empty())
    throw Failure("run: no command given after -- (gswapctl run [--budget B] -- CMD...)");
  Config config = load_config(config_file);
  // Every bad value is refused before anything starts (a daemon included): --budget is checked
  // as GSWAP_BUDGET is, then with the rest by the library's own rules.
  if (!budget.empty())
    if (std::string why = config.merge_value("budget", budget, "--budget"); !why.empty())
      throw Failure("--budget: " + why);
  if (std::string refusal = library_refusal(config); !refusal.empty())
    throw Failure("config: the library would refuse it: " + refusal);
  std::string dir = self_dir();
  std::string lib = find_first(
      {dir + "/../interpose/libgswap.so", dir + "/../lib/libgswap.so", dir + "/libgswap.so"});
  if (lib.empty()) throw Failure(fmt::format("libgswap.so not found next to {}", dir));
  char real[4096];
  if (realpath(lib.c_str(), real)) lib = real;

  // Start the GPU's daemon unless the library will not talk to one or one already serves the GPU
  // (the library then connects to it). A daemon that fails to start only costs the shared view:
  // training goes on.
  if (config.text("daemon") != "off" && !daemon_serves(runtime_dir(config), config.text("gpu"))) {
    std::string gswapd = find_first({dir + "/gswapd"});
    if (gswapd.empty()) {
      std::cerr << "gswapctl: gswapd not found next to gswapctl; running without a daemon\n";
    } else {
      pid_t pid = fork();
      if (pid == 0) {
        unsetenv("LD_PRELOAD");
        std::vector<std::string> args = {gswapd, "--gpu", config.text("gpu")};
        if (!config_file.empty()) args.insert(args.end(), {"--config", config_file});
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        execv(gswapd.c_str(), argv.data());
        _exit(127);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
      if (code != 0 && code != 3)
        std::cerr << "gswapctl: gswapd did not start; running without a daemon\n";
    }
  }

  // Settings reach the library as environment variables; variables already set win over the file.
  if (!config_file.empty()) setenv("GSWAP_CONFIG", config_file.c_str(), 1);
  for (const settings::Declaration& d : settings::kDeclarations) {
    if (!*d.env || std::string_view(d.scope) == "daemon") continue;
    if (config.origin(d.ident) == "default" || std::getenv(d.env)) continue;
    setenv(d.env, config.text(d.ident).c_str(), 1);
  }
  if (!budget.empty()) setenv("GSWAP_BUDGET", budget.c_str(), 1);
  set_framework_allocators();
  std::string preload = lib;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;
  setenv("LD_PRELOAD", preload.c_str(), 1);
  std::vector<char*> argv;
  for (auto& a : command) argv.push_back(a.data());
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  throw Failure(fmt::format("cannot run {}: {}", command[0], strerror(errno)));
}

}  // namespace
}  // namespace gswap::daemon

int main(int argc, char** argv) {
  using namespace gswap::daemon;
  CLI::App app{"gswapctl: inspect and drive gswap"};
  app.require_subcommand(1);

  bool json = false;
  auto* status = app.add_subcommand("status", "daemons, clients, budgets and counters");
  status->add_flag("--json", json, "machine-readable output (see daemon/README.md)");

  auto* policy = app.add_subcommand("policy", "plans published by the daemons");
  policy->require_subcommand(1);
  auto* policy_dump = policy->add_subcommand("dump", "show the current plan of each client");
  long policy_pid = 0;
  policy_dump->add_option("--pid", policy_pid, "only this client");
  policy_dump->add_flag("--json", json, "machine-readable output");

  auto* trace = app.add_subcommand("trace", "access traces kept by the daemons");
  trace->require_subcommand(1);
  auto* trace_dump = trace->add_subcommand(
      "dump", "write a client's last complete iteration, or its timeline, or both");
  long trace_pid = 0;
  std::string trace_out, trace_plan_out, trace_timeline;
  trace_dump->add_option("--pid", trace_pid, "the client")->required();
  trace_dump->add_option("--out", trace_out, "output file (gswap-trace JSON)");
  trace_dump->add_option("--plan-out", trace_plan_out,
                         "with --out: also the plan the client follows, in that trace's positions "
                         "(gswap-plan JSON, for `simulate --plan`)");
  trace_dump->add_option("--timeline", trace_timeline,
                         "timeline file (Chrome trace event JSON for ui.perfetto.dev or "
                         "chrome://tracing): kernels, swaps, stalls, recomputations, memory");

  auto* top = app.add_subcommand("top", "a live table of the clients, refreshed until Ctrl-C");
  double top_interval = 1;
  long top_count = 0;
  top->add_flag("--json", json, "print one sample (rates over one interval) as JSON and exit");
  top->add_option("--interval", top_interval, "seconds between samples, from 0.01 to 3600")
      ->capture_default_str();
  top->add_option("--count", top_count, "stop after this many tables (0: until Ctrl-C)")
      ->capture_default_str();

  auto* config = app.add_subcommand("config", "configuration files");
  config->require_subcommand(1);
  auto* check = config->add_subcommand("check", "validate a config file");
  std::string check_file;
  check->add_option("file", check_file, "the JSON config file")->required();

  auto* run = app.add_subcommand("run", "run a command under gswap");
  std::string run_budget, run_config;
  std::vector<std::string> run_cmd;
  // An empty value (a script's unset variable) is refused, not taken as not given: the program
  // would run with no budget, or with whatever GSWAP_BUDGET the environment holds.
  auto not_empty = [](const char* what) {
    return CLI::Validator(
        [what](std::string& v) {
          return v.empty() ? std::string("expected ") + what + ", got ''" : "";
        },
        "");
  };
  run->add_option("--budget", run_budget, "memory budget (6GiB, 75%)")
      ->check(not_empty("a budget (6GiB, 75%)"));
  run->add_option("--config", run_config, "JSON config file")->check(not_empty("a file path"));
  run->footer("The command follows `--`: gswapctl run --budget 6GiB -- python train.py");

#ifdef GSWAP_HAVE_SIMULATE
  gswap::policy::cli::add_simulate_command(app);
  gswap::policy::cli::add_plot_command(app, program_trace);
#endif

  // `run`'s command is everything after the first `--`; CLI11 sees only what comes before it, so
  // the command's own flags are never parsed as ours.
  int parsed_argc = argc;
  if (argc > 1 && std::string_view(argv[1]) == "run") {
    for (int i = 2; i < argc; ++i) {
      if (std::string_view(argv[i]) == "--") {
        parsed_argc = i;
        run_cmd.assign(argv + i + 1, argv + argc);
        break;
      }
    }
  }
  // `simulate` runs inside parse (as a subcommand callback), so its errors are caught here too.
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const std::exception& e) {
    std::cerr << "gswapctl: " << e.what() << "\n";
    return 1;
  }
  int rc = 0;
  try {
    if (*status)
      rc = cmd_status(json);
    else if (*policy_dump)
      rc = cmd_policy(policy_dump->count("--pid") ? std::optional<long>(policy_pid) : std::nullopt,
                      json);
    else if (*trace_dump)
      rc = cmd_trace(trace_pid, trace_out, trace_plan_out, trace_timeline);
    else if (*top)
      rc = cmd_top(json, top_interval, top_count);
    else if (*check)
      rc = cmd_config_check(check_file);
    else if (*run)
      rc = cmd_run(run_budget, run_config, run_cmd);
  } catch (const std::exception& e) {
    std::cerr << "gswapctl: " << e.what() << "\n";
    return 1;
  }
#ifdef GSWAP_HAVE_SIMULATE
  return gswap::policy::cli::checked_stdout("gswapctl", rc);
#else
  return rc;
#endif
}
