// simulate_command.cpp: `simulate --trace F --budget B --policy P [--json] [--no-recompute]
// [--search-ms MS] [--seed N] [--search-threads N] [--require-fit] [--plan FILE]
// [--timeline FILE]`. Loads a trace (a
// file, or a built-in one with ref:NAME), plans it under the budget with one policy (capuchin: the
// greedy plan improved by the search, as gswapd plans first) or reads a plan made for it (--plan),
// simulates the plan and prints the prediction next to the lower bound;
// --timeline also writes the simulated iteration as a Chrome trace (chrome_trace.h). Errors are
// thrown as CLI::Error / std::runtime_error for the caller's command boundary to report.
#include "policy/cli/simulate_command.h"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <vector>
#include <stdexcept>
#include <limits>
#include <map>
#include <string>
#include <tuple>
#include <system_error>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "policy/iteration.h"
#include "policy/printable_text.h"
#include "policy/corpus.h"
#include "policy/planners.h"
#include "policy/reference_traces.h"
#include "policy/search.h"
#include "policy/sim_timeline.h"
#include "policy/trace_json.h"
#include "policy/write_file.h"
#include "proto/settings.h"

namespace gswap::policy::cli {
namespace {

struct Options {
  std::string trace, budget, policy = "capuchin", timeline, plan;
  bool json = false;
  bool no_recompute = false;
  bool require_fit = false;
  double search_ms = 200;
  std::uint64_t seed = 1;
  std::uint64_t search_threads = 4;
};

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

// CLI11 reads "nan" and "inf" as numbers; a time budget must be neither.
void check_search_ms(double ms) {
  if (!std::isfinite(ms) || ms < 0)
    throw CLI::ValidationError(
        "--search-ms",
        "expected a finite number of milliseconds, 0 or more, got " + fmt::format("{}", ms));
}

// x / y for the table, or "-" where it means nothing (an ideal step of 0 us: no launches, or
// launches that take no time).
std::string ratio(double x, double y) {
  const double r = x / y;
  return y > 0 && std::isfinite(r) ? fmt::format("{:.3f}", r) : "-";
}

}  // namespace

namespace {

// The most a trace or plan file may hold (a 200,000-launch iteration's trace is about 30 MiB): a
// pipe that never ends is refused when it passes this, not when memory runs out.
constexpr std::size_t kMaxFileBytes = std::size_t{1} << 30;

// The text of a trace or plan file. A directory reads as empty text and /dev/zero never ends: it
// is a regular file, or a pipe (`--trace <(...)`, `--trace /dev/stdin`).
std::string read_text(const std::string& path, const char* what) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::exists(st) && !std::filesystem::is_regular_file(st) &&
      !std::filesystem::is_fifo(st))
    throw std::runtime_error(
        printable_text(std::string(what) + " file '" + path + "' is not a regular file or a pipe"));
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw std::runtime_error(
        printable_text(std::string("cannot open ") + what + " file '" + path + "'"));
  std::string text;
  std::vector<char> chunk(1 << 20);
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    if (text.size() + static_cast<std::size_t>(in.gcount()) > kMaxFileBytes)
      throw std::runtime_error(
          printable_text(std::string(what) + " file '" + path + "' is larger than 1 GiB"));
    text.append(chunk.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad())
    throw std::runtime_error(
        printable_text(std::string("cannot read ") + what + " file '" + path + "'"));
  return text;
}

}  // namespace

Trace load_trace(const std::string& spec) {
  if (spec.rfind("ref:", 0) == 0) {
    auto t = reference_trace(spec.substr(4));
    if (!t) t = corpus_trace(spec.substr(4));
    if (!t) {
      std::string names;
      for (auto n : reference_trace_names())
        names += std::string(names.empty() ? "" : ", ") + "ref:" + std::string(n);
      for (auto n : corpus_trace_names()) names += ", ref:" + std::string(n);
      throw std::runtime_error("unknown reference trace '" + spec + "' (known: " + names + ")");
    }
    return std::move(*t);
  }
  const std::string text = read_text(spec, "trace");
  Trace t;
  std::string err;
  // The message may quote the trace's own text (a kernel name, a link value).
  if (!parse_trace_json(text, &t, &err))
    throw std::runtime_error(printable_text(spec + ": " + err));
  bool none_selects = false;
  Trace it = last_marked_iteration(t, &none_selects);
  // Marks that select nothing are most likely marks of other launches (another recording's
  // seq numbers): the whole trace is used, and the user is told.
  if (none_selects && t.launches.empty())
    fmt::print(stderr, "warning: {}: the trace has no launch; its iteration marks select nothing\n",
               printable_text(spec));
  else if (none_selects)
    fmt::print(stderr,
               "warning: {}: no iteration mark holds a launch (the launches' seq run from {} to "
               "{}); the whole trace is used\n",
               printable_text(spec), t.launches.front().seq, t.launches.back().seq);
  return it;
}

// `no_recompute`: the trace's recomputation was set aside (--no-recompute), which a refusal of a
// recompute entry then says.
Plan load_plan(const std::string& path, const Trace& trace, bool no_recompute = false) {
  Plan plan;
  std::string err;
  if (!parse_plan_json(read_text(path, "plan"), trace, &plan, &err)) {
    if (no_recompute && err.find("is not recomputable") != std::string::npos)
      err += " (--no-recompute: the trace's recomputation is set aside)";
    throw std::runtime_error(printable_text(path + ": " + err));
  }
  return plan;
}

// Entries of a plan made by hand that parse but do nothing, or not what they say: each gets a
// warning naming it (a plan gswapd or a planner wrote has none). The plan is simulated as it is.
std::vector<std::string> plan_warnings(const Analysis& a, const Plan& plan) {
  const Trace& t = *a.trace;
  std::vector<std::string> out;
  std::map<std::tuple<RegionId, EvictKind, std::size_t, std::size_t, std::size_t, std::size_t>,
           std::size_t>
      seen;  // the entries so far, by every field that says what they do
  for (std::size_t k = 0; k < plan.entries.size(); ++k) {
    const PlanEntry& e = plan.entries[k];
    const std::string at = fmt::format("entries[{}] (region {})", k, e.region);
    const auto it = a.index.find(e.region);
    if (it == a.index.end()) continue;  // the parser refuses those
    const std::size_t r = it->second;
    if (t.regions[r].bytes < t.device.min_evictable_bytes) {
      out.push_back(fmt::format(
          "{}: ignored: the region is {} bytes, below the trace's min_evictable_bytes ({})", at,
          t.regions[r].bytes, t.device.min_evictable_bytes));
      continue;
    }
    const auto [dup, fresh] = seen.emplace(
        std::tuple{e.region, e.kind, e.evict_after, e.evict_at, e.trigger, e.back_access}, k);
    if (!fresh) {
      out.push_back(
          fmt::format("{}: repeats entries[{}], and evicts nothing more", at, dup->second));
      continue;
    }
    const auto& acc = a.accesses[r];
    if (e.back_access != kNoLaunch && !std::binary_search(acc.begin(), acc.end(), e.back_access))
      out.push_back(
          fmt::format("{}: back_access {} is not an access of the region", at, e.back_access));
    else if (e.kind == EvictKind::kSwap && !is_wrap(e) && e.trigger != kNoLaunch &&
             e.back_access != kNoLaunch && e.trigger > e.back_access)
      out.push_back(fmt::format(
          "{}: trigger {} comes after back_access {}: the access restores the region on demand", at,
          e.trigger, e.back_access));
  }
  return out;
}

std::uint64_t parse_budget(const std::string& text, std::uint64_t peak, const std::string& option) {
  settings::Size size;
  if (!settings::parse_size(text, &size))
    throw CLI::ValidationError(option,
                               "expected bytes with a unit (6GiB) or a percentage "
                               "of the trace's peak above 0 and at most 100% (50%), got '" +
                                   text + "'");
  return size.resolve(peak);
}

int checked_stdout(const char* program, int rc) {
  errno = 0;
  std::cout.flush();
  const bool failed = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!failed) return rc;
  const int e = errno;
  std::cerr << program << ": cannot write standard output"
            << (e ? std::string(": ") + std::strerror(e) : std::string()) << "\n";
  return rc ? rc : 1;
}

void refuse_writing_over(const std::string& out, const std::string& option,
                         const std::vector<std::pair<std::string, std::string>>& inputs) {
  for (const auto& [path, input_option] : inputs) {
    if (path.empty() || path.rfind("ref:", 0) == 0) continue;
    std::error_code ec;
    if (std::filesystem::equivalent(out, path, ec))
      throw std::runtime_error(printable_text(option + " " + out + " is the " + input_option +
                                              " file: writing it would destroy what is read"));
  }
}

// A file option given as "" (a script's unset variable) is refused, not taken as not given.
CLI::Validator non_empty_path() {
  return CLI::Validator(
      [](std::string& v) { return v.empty() ? std::string("expected a file path, got ''") : ""; },
      "PATH");
}

Evaluation plan_and_simulate(const Analysis& a, std::uint64_t budget, const PlanOptions& o,
                             std::size_t* evaluations) {
  auto kind = parse_policy(o.policy);
  if (!kind) throw CLI::ValidationError("--policy", "unknown policy '" + o.policy + "'");
  check_search_ms(o.search_ms);
  Evaluation ev;
  if (evaluations) *evaluations = 0;
  if (*kind == PolicyKind::kCapuchin && o.search_ms > 0) {
    // What gswapd runs first: the greedy plan improved by the search for the same time budget
    // (gswapd keeps only plans that fit, then refines its plan: daemon/README.md).
    SearchOptions so;
    so.time_budget_ms = o.search_ms;
    so.now_ms = now_ms;
    so.seed = o.seed;
    so.threads = usable_search_threads(o.search_threads);
    so.require_fit = o.require_fit;
    const double t0 = now_ms();
    SearchResult r = search_plan(a, budget, so);
    ev.plan_time_ms = now_ms() - t0;
    ev.plan = std::move(r.plan);
    ev.sim =
        r.sim.step_time_us > 0 || !r.sim.feasible ? std::move(r.sim) : simulate(a, ev.plan, budget);
    ev.bound = lower_bound(a, budget);
    if (evaluations) *evaluations = r.evaluations;
  } else {
    ev = evaluate(*kind, a, budget, now_ms);
  }
  return ev;
}

std::string infeasible_message(const Analysis& a, std::uint64_t budget, const std::string& policy,
                               const Evaluation& ev) {
  if (ev.plan.feasible && ev.sim.feasible) return "";
  const std::string reason = !ev.plan.feasible ? ev.plan.reason : ev.sim.reason;
  if (!impossible_budget_reason(a, budget).empty())
    return printable_text(fmt::format("budget of {} bytes is impossible: {}", budget, reason));
  // Every launch fits the budget, so some plan runs at it: this policy's does not (DELTA's
  // on-demand restores, or a recompute-only plan, can need more than the budget at a launch).
  const auto kind = parse_policy(policy);
  const bool capuchin = kind && *kind == PolicyKind::kCapuchin;
  return printable_text(fmt::format(
      "the {} plan cannot run at a budget of {} bytes: {} (the budget itself is possible{})",
      kind ? policy_name(*kind) : policy, budget, reason,
      capuchin ? "" : ": try --policy capuchin"));
}

namespace {

// The same for a plan made elsewhere (`--plan FILE`), named by its file.
std::string infeasible_plan_message(const Analysis& a, std::uint64_t budget,
                                    const std::string& label, const Evaluation& ev) {
  if (ev.plan.feasible && ev.sim.feasible) return "";
  if (!impossible_budget_reason(a, budget).empty()) return infeasible_message(a, budget, "", ev);
  return printable_text(
      fmt::format("{} cannot run at a budget of {} bytes: {} (the budget itself is possible: "
                  "try --policy capuchin)",
                  label, budget, !ev.plan.feasible ? ev.plan.reason : ev.sim.reason));
}

}  // namespace

namespace {

void run(const Options& o) {
  auto kind = parse_policy(o.policy);
  if (!kind) throw CLI::ValidationError("--policy", "unknown policy '" + o.policy + "'");
  check_search_ms(o.search_ms);
  if (!o.timeline.empty())
    refuse_writing_over(o.timeline, "--timeline", {{o.trace, "--trace"}, {o.plan, "--plan"}});
  Trace trace = load_trace(o.trace);
  if (o.no_recompute) trace = without_recompute(std::move(trace));
  const Analysis a = analyze(trace);
  const std::uint64_t budget = parse_budget(o.budget, a.peak_bytes, "--budget");
  std::size_t evaluations = 0;
  Evaluation ev;
  std::string label = policy_name(*kind);
  if (!o.plan.empty()) {
    // A plan made elsewhere (gswapd's, from `trace dump --plan-out`), simulated as it is.
    ev.plan = load_plan(o.plan, trace, o.no_recompute);
    const std::vector<std::string> warnings = plan_warnings(a, ev.plan);
    constexpr std::size_t kShownWarnings = 10;
    for (std::size_t k = 0; k < warnings.size() && k < kShownWarnings; ++k)
      fmt::print(stderr, "warning: {}: {}\n", printable_text(o.plan), warnings[k]);
    if (warnings.size() > kShownWarnings)
      fmt::print(stderr, "warning: {}: {} more entries like these\n", printable_text(o.plan),
                 warnings.size() - kShownWarnings);
    ev.sim = simulate(a, ev.plan, budget);
    // The planners never make such a plan; one made by hand can recompute a region from one
    // already freed, from itself (sources in a cycle), or through a chain the simulator does
    // not follow.
    if (ev.sim.feasible && ev.sim.too_deep_recomputations)
      throw std::runtime_error(printable_text(fmt::format(
          "{}: not a plan the simulator can follow: {} recomputation{} would need a chain of "
          "more than {} recomputed regions, longer than the simulator follows",
          o.plan, ev.sim.too_deep_recomputations, ev.sim.too_deep_recomputations == 1 ? "" : "s",
          kMaxRecomputeDepth)));
    if (ev.sim.feasible && ev.sim.access_violations)
      throw std::runtime_error(printable_text(fmt::format(
          "{}: not a valid plan for this trace: {} access{} would run without {} data (a "
          "recomputation from a region that is gone, or from itself through its sources)",
          o.plan, ev.sim.access_violations, ev.sim.access_violations == 1 ? "" : "es",
          ev.sim.access_violations == 1 ? "its" : "their")));
    ev.bound = lower_bound(a, budget);
    label = "plan " + printable_text(o.plan) +
            (ev.plan.policy.empty() ? "" : " (" + printable_text(ev.plan.policy) + ")");
  } else {
    ev = plan_and_simulate(
        a, budget, {o.policy, o.search_ms, o.seed, o.search_threads, o.require_fit}, &evaluations);
  }
  const SimResult& s = ev.sim;
  const bool feasible = ev.plan.feasible && s.feasible;
  const std::string reason = !ev.plan.feasible ? ev.plan.reason : s.reason;
  const std::string error = o.plan.empty() ? infeasible_message(a, budget, o.policy, ev)
                                           : infeasible_plan_message(a, budget, label, ev);
  // The parser bounds a trace's times and bandwidths (trace_json.h), so every time is finite; a
  // table or JSON with inf, nan or null in it would be a bug, and is refused as one.
  if (feasible)
    for (double us : {s.step_time_us, a.ideal_step_us, ev.bound.bound_us, s.stall_us,
                      s.recompute_us, s.h2d_busy_us, s.d2h_busy_us})
      if (!std::isfinite(us))
        throw std::runtime_error(fmt::format("{}:{}: the simulation of {} gave a time of {} us",
                                             __FILE__, __LINE__, printable_text(o.trace), us));
  // A plan fits when it runs as planned: the simulation is feasible and evicts nothing on demand.
  const bool plan_fits = ev.plan.fits && s.feasible && s.demand_evictions == 0;
  std::string fits_reason;
  if (!ev.plan.fits && !ev.plan.reason.empty())
    fits_reason = ev.plan.reason;
  else if (!s.feasible)
    fits_reason = s.reason;
  else if (s.demand_evictions > 0)
    fits_reason = fmt::format("the simulation made {} demand eviction{}", s.demand_evictions,
                              s.demand_evictions == 1 ? "" : "s");

  if (o.json) {
    const bool possible = impossible_budget_reason(a, budget).empty();
    nlohmann::json j = {
        {"policy", label},
        {"feasible", feasible},
        {"budget_bytes", budget},
        {"budget_possible", possible},
        {"trace_peak_bytes", a.peak_bytes},
        {"launches", a.n},
        {"step_time_us", s.step_time_us},
        {"ideal_step_time_us", a.ideal_step_us},
        // No plan runs at an impossible budget: it has no bound.
        {"lower_bound_us", possible ? nlohmann::json(ev.bound.bound_us) : nlohmann::json(nullptr)},
        {"peak_resident_bytes", s.peak_resident_bytes},
        {"stall_us", s.stall_us},
        {"recompute_us", s.recompute_us},
        {"swapped_out_bytes", s.swapped_out_bytes},
        {"swapped_in_bytes", s.swapped_in_bytes},
        {"recomputed_bytes", s.recomputed_bytes},
        {"h2d_busy_us", s.h2d_busy_us},
        {"d2h_busy_us", s.d2h_busy_us},
        {"demand_evictions", s.demand_evictions},
        {"donated_restores", s.donated_restores},
        {"plan_entries", ev.plan.entries.size()},
        {"plan_fits", plan_fits},
        {"plan_time_ms", ev.plan_time_ms},
        {"search_evaluations", evaluations},
        {"recompute", !o.no_recompute}};
    if (!feasible) j["error"] = reason;
    if (feasible && !plan_fits && !fits_reason.empty()) j["plan_fits_reason"] = fits_reason;
    // Kernel names in the reasons came from a trace: not UTF-8 is replaced, not thrown on.
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else if (feasible) {
    auto row = [](const std::string& k, const std::string& v) {
      std::cout << fmt::format("{:<22} {:>18}\n", k, v);
    };
    auto mib = [](std::uint64_t b) { return fmt::format("{:.1f} MiB", b / 1048576.0); };
    auto us = [](double x) { return fmt::format("{:.1f} us", x); };
    row("policy", label);
    row("launches", std::to_string(a.n));
    row("budget", mib(budget));
    row("trace peak", mib(a.peak_bytes));
    row("step time", us(s.step_time_us));
    row("ideal step time", us(a.ideal_step_us));
    row("lower bound", us(ev.bound.bound_us));
    row("step / ideal", ratio(s.step_time_us, a.ideal_step_us));
    row("step / lower bound", ratio(s.step_time_us, ev.bound.bound_us));
    row("peak resident", mib(s.peak_resident_bytes));
    row("stall", us(s.stall_us));
    row("recompute", us(s.recompute_us));
    row("swapped out", mib(s.swapped_out_bytes));
    row("recomputed", mib(s.recomputed_bytes));
    row("h2d busy", us(s.h2d_busy_us));
    row("d2h busy", us(s.d2h_busy_us));
    row("demand evictions", std::to_string(s.demand_evictions));
    row("donated restores", std::to_string(s.donated_restores));
    row("plan entries", std::to_string(ev.plan.entries.size()));
    row("plan fits", plan_fits ? "yes" : "no");
    row("plan time", fmt::format("{:.2f} ms", ev.plan_time_ms));
    if (evaluations) row("plans simulated", std::to_string(evaluations));
    row("recompute", o.no_recompute ? "off (--no-recompute)" : "as registered");
    if (!plan_fits && !fits_reason.empty())
      std::cout << "the plan does not fit: " << printable_text(fits_reason) << "\n";
  }
  if (!feasible) throw std::runtime_error(error);
  if (!o.timeline.empty()) {
    // The simulation is deterministic: run again, recording its events.
    SimEvents events;
    simulate(a, ev.plan, budget, &events);
    chrome::Timeline t = simulated_timeline(a, ev.plan, events, budget);
    t.other["trace"] = o.trace;
    // Written as it is made (a long iteration's timeline as one JSON tree took 14 times the
    // memory of the simulation). The trace's path may hold any bytes: what is not UTF-8 is
    // replaced.
    write_file(o.timeline, [&](std::ostream& f) { chrome::write_json(t, f); });
    if (!o.json)
      std::cout << fmt::format("wrote the simulated timeline to {} (open it in ui.perfetto.dev)\n",
                               printable_text(o.timeline));
  }
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "simulate", "Predict a policy's step time under a memory budget from a trace (no daemon)");
  sub->add_option("--trace", o->trace,
                  "trace file (gswap-trace JSON) or a built-in trace: ref:resnet50, "
                  "ref:bert-large, ref:gpt2-medium, ref:vgg16, ref:vit-b16, ref:unet, "
                  "ref:optimizer-heavy, ref:two-stream-bert, ref:random:SEED")
      ->required();
  sub->add_option("--budget", o->budget,
                  "device memory budget: bytes with a unit (6GiB, 512MiB) or a percentage of the "
                  "trace's peak live bytes (50%)")
      ->required();
  CLI::Option* policy =
      sub->add_option("--policy", o->policy,
                      "capuchin (hybrid swap/recompute planner), delta (online), lru (passive, on "
                      "demand), vdnn (swap after forward, prefetch one step ahead), recompute "
                      "(recompute-only)")
          ->capture_default_str();
  sub->add_flag("--json", o->json, "print one JSON object instead of a table");
  sub->add_flag("--no-recompute", o->no_recompute,
                "plan as for a program that registers no recompute callback: no region of the "
                "trace is recomputable (swap-only plans)");
  CLI::Option* search = sub->add_option("--search-ms", o->search_ms,
                                        "capuchin: time the search may spend improving the "
                                        "greedy plan, as gswapd does (0: the greedy plan alone)")
                            ->capture_default_str();
  // CLI11 reads "-1" and 2^64 into an unsigned integer without a word (wrapped or clamped), and
  // "010" as octal: a seed is what makes a search repeatable, and a number of threads is read as
  // gswapd reads plan_search_threads, so only a plain decimal in range is taken.
  auto decimal = [](std::string what, std::uint64_t lo, std::uint64_t hi) {
    return CLI::Validator(
        [=](std::string& text) -> std::string {
          std::uint64_t v = 0;
          const char* end = text.data() + text.size();
          const auto [ptr, ec] = std::from_chars(text.data(), end, v);
          if (text.empty() || ec != std::errc{} || ptr != end || v < lo || v > hi)
            return fmt::format("{} is a whole number from {} to {}, not '{}'", what, lo, hi, text);
          text = std::to_string(v);  // "010" is ten, not CLI11's octal eight
          return {};
        },
        "UINT");
  };
  CLI::Option* seed =
      sub->add_option("--seed", o->seed, "capuchin: the search's seed")
          ->transform(decimal("a seed", 0, std::numeric_limits<std::uint64_t>::max()))
          ->capture_default_str();
  CLI::Option* threads =
      sub->add_option("--search-threads", o->search_threads,
                      "capuchin: walks the search runs side by side after its seeds, each on a "
                      "thread of its own, as gswapd's plan_search_threads (no more than the "
                      "machine's hardware threads)")
          ->transform(decimal("a number of search threads", 1, 64))
          ->capture_default_str();
  CLI::Option* require_fit =
      sub->add_flag("--require-fit", o->require_fit,
                    "capuchin: keep to plans that run with no demand eviction where the search "
                    "finds one, as gswapd does (without it a faster plan that evicts on demand "
                    "wins, and the table says it does not fit)");
  sub->add_option("--plan", o->plan,
                  "simulate this plan (gswap-plan JSON, such as `gswapctl trace dump --plan-out` "
                  "writes: the plan gswapd follows) instead of planning")
      ->check(non_empty_path())
      ->excludes(policy)
      ->excludes(search)
      ->excludes(seed)
      ->excludes(threads)
      ->excludes(require_fit);
  sub->add_option("--timeline", o->timeline,
                  "also write the simulated iteration as a timeline (Chrome trace event JSON for "
                  "ui.perfetto.dev or chrome://tracing)")
      ->check(non_empty_path());
  // The search's options mean nothing to the other policies: refused there, not ignored.
  sub->callback([o, search, seed, threads, require_fit] {
    if (o->plan.empty() && parse_policy(o->policy) != PolicyKind::kCapuchin)
      for (CLI::Option* opt : {search, seed, threads, require_fit})
        if (opt->count() && parse_policy(o->policy))
          throw CLI::ValidationError(opt->get_name(), "applies to --policy capuchin only, not " +
                                                          printable_text(o->policy));
    run(*o);
  });
}

}  // namespace gswap::policy::cli
