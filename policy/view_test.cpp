// view_test.cpp: the timeline writer (chrome_trace.h), the simulated timeline and memory curves
// (sim_timeline.h) and the memory plot (memory_plot.h) against the simulator's own figures.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <random>
#include <set>
#include <stdexcept>

#include "policy/capuchin.h"
#include "policy/chrome_trace.h"
#include "policy/memory_plot.h"
#include "policy/reference_traces.h"
#include "policy/search.h"
#include "policy/sim_timeline.h"
#include "policy/test_traces.h"

namespace gswap::policy {
namespace {

struct Planned {
  Trace trace;
  Analysis a;
  Plan plan;
  SimResult sim;
  SimEvents ev;
  std::uint64_t budget = 0;
};

std::unique_ptr<Planned> plan_at(Trace t, double fraction) {
  auto p = std::make_unique<Planned>();
  p->trace = std::move(t);
  p->a = analyze(p->trace);
  p->budget = static_cast<std::uint64_t>(fraction * static_cast<double>(p->a.peak_bytes));
  p->plan = plan_capuchin(p->a, p->budget);
  p->sim = simulate(p->a, p->plan, p->budget, &p->ev);
  return p;
}

// Track name of every (pid, tid), from the metadata events.
std::map<std::pair<int, std::uint64_t>, std::string> track_names(const nlohmann::json& doc) {
  std::map<std::pair<int, std::uint64_t>, std::string> names;
  for (const auto& e : doc["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name")
      names[{e["pid"].get<int>(), e["tid"].get<std::uint64_t>()}] = e["args"]["name"];
  return names;
}

TEST(ChromeTraceTest, EveryTrackIsNamedAndInTimeOrder) {
  chrome::Timeline t;
  t.producer = "test";
  // Streams 100000 and 2^32 - 1 too: any stream number a trace gives has a track of its own.
  t.kernels = {{3, "b", 2, 50, 10},
               {3, "a", 1, 10, 5},
               {0, "c", 3, 20, 1},
               {100000, "d", 4, 90, 1},
               {4294967295u, "e", 5, 91, 1}};
  t.copies = {{false, 7, "", 1 << 20, 30, 40, true, std::nullopt},
              {true, 7, "w", 1 << 20, 60, 70, true, true}};
  t.host_waits = {{1234, "budget", 35, 2}};
  t.device_waits = {{"region 7", 7, "b", 45, 5}};
  t.recomputes = {{9, "", 4096, 80, 81, false}};
  t.counters = {{5, 10, 20, 30}, {1, 11, 20, 0}};
  nlohmann::json doc = chrome::to_json(t);
  EXPECT_EQ(doc["otherData"]["producer"], "test");
  auto names = track_names(doc);
  EXPECT_EQ(names[std::make_pair(1, std::uint64_t{3})], "stream 3");
  EXPECT_EQ(names[std::make_pair(1, std::uint64_t{0})], "stream 0");
  EXPECT_EQ(names[std::make_pair(1, std::uint64_t{chrome::kD2HTrack})], "D2H (swap-outs)");
  EXPECT_EQ(names[std::make_pair(1, std::uint64_t{chrome::kH2DTrack})], "H2D (restores)");
  EXPECT_EQ(names[std::make_pair(1, std::uint64_t{chrome::kWaitTrack})],
            "streams waiting for restores");
  EXPECT_EQ(names[std::make_pair(1, std::uint64_t{chrome::kRecomputeTrack})], "recomputations");
  EXPECT_EQ(names[std::make_pair(2, std::uint64_t{1234})], "thread 1234");
  EXPECT_EQ(names[std::make_pair(1, std::uint64_t{100000})], "stream 100000");
  EXPECT_EQ(names[std::make_pair(1, std::uint64_t{4294967295u})], "stream 4294967295");
  std::map<std::pair<int, std::uint64_t>, int> named;  // each track named once
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      EXPECT_EQ(++named[std::make_pair(e["pid"].get<int>(), e["tid"].get<std::uint64_t>())], 1)
          << e;
    }
  }
  std::map<std::pair<int, std::uint64_t>, double> last;
  int copies = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M") continue;
    for (const char* k : {"name", "ph", "ts", "pid", "tid"}) EXPECT_TRUE(e.contains(k)) << e;
    if (e["ph"] == "X") {
      EXPECT_GE(e["dur"].get<double>(), 0) << e;
    }
    auto key = std::make_pair(e["pid"].get<int>(), e["tid"].get<std::uint64_t>());
    if (last.count(key)) {
      EXPECT_LE(last[key], e["ts"].get<double>()) << e;
    }
    last[key] = e["ts"].get<double>();
    if (e.value("cat", "") == "restore") {
      ++copies;
      EXPECT_EQ(e["name"], "restore w");
      EXPECT_EQ(e["args"]["late"], true);
    }
    if (e.value("cat", "") == "swap_out") {
      ++copies;
      EXPECT_EQ(e["name"], "swap-out region 7");
      EXPECT_FALSE(e["args"].contains("late"));
    }
  }
  EXPECT_EQ(copies, 2);
  // Written one event at a time, it is the same document, byte for byte, names that are not
  // UTF-8 replaced as dump's error handler does.
  t.kernels[0].name = "b\xff";
  t.iterations = {12.5};
  t.other["trace"] = "t\xfe.json";
  std::ostringstream streamed;
  chrome::write_json(t, streamed);
  EXPECT_EQ(
      streamed.str(),
      chrome::to_json(t).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

TEST(SimTimelineTest, HoldsWhatTheSimulatorCounts) {
  for (const char* name : {"resnet50", "gpt2-medium"}) {
    auto p = plan_at(*reference_trace(name), 0.5);
    ASSERT_TRUE(p->sim.feasible) << name << ": " << p->sim.reason;
    chrome::Timeline t = simulated_timeline(p->a, p->plan, p->ev, p->budget);
    std::uint64_t out = 0, in = 0;
    for (const chrome::Copy& c : t.copies) (c.to_device ? in : out) += c.bytes;
    EXPECT_EQ(out, p->sim.swapped_out_bytes) << name;
    EXPECT_EQ(in, p->sim.swapped_in_bytes) << name;
    EXPECT_EQ(t.kernels.size(), p->a.n);
    double stall = 0;
    for (const chrome::DeviceWait& w : t.device_waits) stall += w.dur_us;
    EXPECT_NEAR(stall, p->sim.stall_us, 1e-6 * p->sim.stall_us + 1e-6) << name;
    std::uint64_t peak = 0;
    for (const chrome::Counters& c : t.counters) {
      EXPECT_LE(c.resident, p->budget) << name << " at " << c.ts_us;
      EXPECT_EQ(c.budget, p->budget);
      peak = std::max(peak, c.resident);
    }
    EXPECT_EQ(peak, p->sim.peak_resident_bytes) << name;

    MemoryCurves m = memory_curves(p->a, p->ev, p->sim.step_time_us);
    EXPECT_EQ(m.peak_live, p->a.peak_bytes);
    EXPECT_EQ(m.peak_resident, p->sim.peak_resident_bytes);
    SwapTraffic s = swap_traffic(p->a, p->ev, p->sim.step_time_us, 40);
    double so = 0, si = 0;
    for (double v : s.out_bytes) so += v;
    for (double v : s.in_bytes) si += v;
    EXPECT_NEAR(so, static_cast<double>(p->sim.swapped_out_bytes), 1 + 1e-9 * so) << name;
    EXPECT_NEAR(si, static_cast<double>(p->sim.swapped_in_bytes), 1 + 1e-9 * si) << name;
  }
}

// The searched plans of random traces (prefetches deferred, donors, demand evictions): the memory
// curve, replayed in time order, stays within the budget.
TEST(SimTimelineTest, TheMemoryCurveOfSearchedPlansStaysWithinTheBudget) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 150; ++i) {
    Trace t = testing::random_trace(rng);
    Analysis a = analyze(t);
    for (double f : {0.5, 0.7}) {
      const auto budget = static_cast<std::uint64_t>(static_cast<double>(a.peak_bytes) * f);
      SearchOptions o;
      o.max_evaluations = 100;
      o.seed = static_cast<std::uint64_t>(i);
      SearchResult r = search_plan(a, budget, o);
      SimEvents ev;
      SimResult s = simulate(a, r.plan, budget, &ev);
      if (!s.feasible) continue;
      MemoryCurves m = memory_curves(a, ev, s.step_time_us);
      EXPECT_LE(m.peak_resident, budget) << "trace " << i << " at " << f;
    }
  }
}

TEST(SimTimelineTest, RecordingChangesNothing) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 50; ++i) {
    Trace t = testing::random_trace(rng);
    Analysis a = analyze(t);
    const std::uint64_t budget = a.peak_bytes * 6 / 10;
    Plan plan = plan_capuchin(a, budget);
    SimEvents ev;
    SimResult with = simulate(a, plan, budget, &ev), without = simulate(a, plan, budget);
    EXPECT_EQ(with.step_time_us, without.step_time_us);
    EXPECT_EQ(with.peak_resident_bytes, without.peak_resident_bytes);
    EXPECT_EQ(with.swapped_out_bytes, without.swapped_out_bytes);
    if (!with.feasible) continue;
    MemoryCurves m = memory_curves(a, ev, with.step_time_us);
    EXPECT_EQ(m.peak_resident, with.peak_resident_bytes) << "trace " << i;
  }
}

TEST(MemoryPlotTest, TicksAreRoundAndLabelled) {
  EXPECT_EQ(nice_step(10, 5), 2);
  EXPECT_EQ(nice_step(7.3, 6), 2);
  EXPECT_EQ(nice_step(0.9, 3), 0.5);
  EXPECT_EQ(bytes_label(3 << 20, 1 << 20, "MiB"), "3 MiB");
  EXPECT_EQ(bytes_label(1.5 * (1 << 30), 1 << 30, "GiB"), "1.5 GiB");
  auto p = plan_at(*reference_trace("resnet50"), 0.5);
  MemoryPlot plot;
  plot.title = "resnet50 <at> 50%";
  plot.budget = p->budget;
  plot.curves = memory_curves(p->a, p->ev, p->sim.step_time_us);
  plot.traffic = swap_traffic(p->a, p->ev, p->sim.step_time_us, 60);
  std::string svg = render_memory_plot_svg(plot);
  EXPECT_NE(svg.find("<polyline id=\"live\""), std::string::npos);
  EXPECT_NE(svg.find("<polyline id=\"resident\""), std::string::npos);
  EXPECT_NE(svg.find("<line id=\"budget\""), std::string::npos);
  EXPECT_NE(svg.find("resnet50 &lt;at&gt; 50%"), std::string::npos);
  EXPECT_NE(svg.find(" GiB</text>"), std::string::npos);
  EXPECT_NE(svg.find(" ms</text>"), std::string::npos);
}

// Every loop of the plot ends, whatever the times: a duration that is not finite is refused, a huge
// one draws a bounded number of ticks, and a copy running far past the end lands in the last
// bucket instead of walking the buckets up to it.
TEST(MemoryPlotTest, LoopsEndWhateverTheTimes) {
  EXPECT_EQ(nice_step(std::numeric_limits<double>::infinity(), 10), 1);
  MemoryPlot plot;
  plot.budget = 1 << 20;
  plot.traffic.bucket_us = 1;
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
    plot.curves.duration_us = bad;
    EXPECT_THROW(render_memory_plot_svg(plot), std::invalid_argument) << bad;
  }
  auto p = plan_at(*reference_trace("resnet50"), 0.5);
  ASSERT_FALSE(p->ev.copies.empty());
  SimEvents ev = p->ev;
  ev.copies.resize(1);
  ev.copies[0].start_us = 10;
  ev.copies[0].end_us = 1e300;
  const SwapTraffic tr = swap_traffic(p->a, ev, 100, 10);
  ASSERT_EQ(tr.out_bytes.size() + tr.in_bytes.size(), 20u);
  double total = 0;
  for (double v : tr.out_bytes) total += v;
  for (double v : tr.in_bytes) total += v;
  EXPECT_DOUBLE_EQ(total, static_cast<double>(p->trace.regions[ev.copies[0].region].bytes));
  plot.curves.duration_us = 1e300;
  plot.traffic = swap_traffic(p->a, ev, 1e300, 60);
  const std::string svg = render_memory_plot_svg(plot);
  std::size_t ticks = 0;
  for (std::size_t at = svg.find("<text class=\"xtick\""); at != std::string::npos;
       at = svg.find("<text class=\"xtick\"", at + 1))
    ++ticks;
  EXPECT_GE(ticks, 2u);
  EXPECT_LE(ticks, 65u);
}

}  // namespace
}  // namespace gswap::policy
