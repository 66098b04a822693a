// chrome_trace.cpp: the Chrome trace writer (see chrome_trace.h for the tracks).
//
// Complete events ("ph": "X") for kernels, copies, waits and recomputations, counter events
// ("ph": "C") for memory, instant events ("ph": "i") for iteration starts, and metadata events
// ("ph": "M") naming processes and tracks. Events are sorted by track, then time, so every track
// reads in order whatever order the measurements arrived in.
#include "policy/chrome_trace.h"

#include <algorithm>
#include <set>
#include <tuple>

#include <fmt/format.h>

namespace gswap::policy::chrome {
namespace {

struct Item {
  int pid;
  std::uint64_t tid;
  double ts;
  nlohmann::json event;
};

nlohmann::json meta(int pid, std::uint64_t tid, const char* what, const std::string& name) {
  return {{"ph", "M"}, {"pid", pid}, {"tid", tid}, {"name", what}, {"args", {{"name", name}}}};
}

nlohmann::json span(const std::string& cat, const std::string& name, int pid, std::uint64_t tid,
                    double ts, double dur, nlohmann::json args) {
  nlohmann::json e = {{"ph", "X"},
                      {"cat", cat},
                      {"name", name},
                      {"pid", pid},
                      {"tid", tid},
                      {"ts", ts},
                      {"dur", std::max(0.0, dur)}};
  if (!args.is_null()) e["args"] = std::move(args);
  return e;
}

std::string region_label(std::uint64_t id, const std::string& name) {
  return name.empty() ? fmt::format("region {}", id) : name;
}

}  // namespace

nlohmann::json to_json(const Timeline& t) {
  std::vector<Item> items;
  items.reserve(t.kernels.size() + t.copies.size() + t.device_waits.size() + t.host_waits.size() +
                t.recomputes.size() + t.counters.size());
  std::set<std::uint32_t> streams(t.streams.begin(), t.streams.end());
  std::set<std::uint64_t> threads;
  for (const Kernel& k : t.kernels) {
    streams.insert(k.stream);
    items.push_back({kDevicePid, k.stream, k.start_us,
                     span("kernel", k.name.empty() ? "kernel" : k.name, kDevicePid, k.stream,
                          k.start_us, k.dur_us, {{"seq", k.seq}})});
  }
  for (const Copy& c : t.copies) {
    nlohmann::json args = {{"region", c.region}, {"bytes", c.bytes}, {"planned", c.planned}};
    if (!c.region_name.empty()) args["region_name"] = c.region_name;
    if (c.late) args["late"] = *c.late;
    const std::uint64_t track = c.to_device ? kH2DTrack : kD2HTrack;
    std::string name = fmt::format("{} {}", c.to_device ? "restore" : "swap-out",
                                   region_label(c.region, c.region_name));
    items.push_back({kDevicePid, track, c.start_us,
                     span(c.to_device ? "restore" : "swap_out", name, kDevicePid, track, c.start_us,
                          c.end_us - c.start_us, std::move(args))});
  }
  for (const DeviceWait& w : t.device_waits) {
    nlohmann::json args = {{"late_us", w.dur_us}};
    if (w.region) args["region"] = *w.region;
    if (!w.kernel.empty()) args["kernel"] = w.kernel;
    items.push_back({kDevicePid, kWaitTrack, w.start_us,
                     span("device_stall", "waited for " + w.what, kDevicePid, kWaitTrack,
                          w.start_us, w.dur_us, std::move(args))});
  }
  for (const HostWait& w : t.host_waits) {
    threads.insert(w.thread);
    items.push_back({kHostPid, w.thread, w.start_us,
                     span("host_stall", "waited: " + (w.why.empty() ? "gswap" : w.why), kHostPid,
                          w.thread, w.start_us, w.dur_us, nullptr)});
  }
  for (const Recompute& r : t.recomputes) {
    items.push_back({kDevicePid, kRecomputeTrack, r.start_us,
                     span("recompute", "recompute " + region_label(r.region, r.region_name),
                          kDevicePid, kRecomputeTrack, r.start_us, r.end_us - r.start_us,
                          {{"region", r.region}, {"bytes", r.bytes}, {"failed", r.failed}})});
  }
  for (const Counters& c : t.counters) {
    items.push_back({kDevicePid,
                     0,
                     c.ts_us,
                     {{"ph", "C"},
                      {"name", kCounterName},
                      {"pid", kDevicePid},
                      {"tid", 0},
                      {"ts", c.ts_us},
                      {"args",
                       {{"resident_bytes", c.resident},
                        {"budget_bytes", c.budget},
                        {"pinned_host_bytes", c.pinned}}}}});
  }
  for (double ts : t.iterations)
    items.push_back({kDevicePid,
                     0,
                     ts,
                     {{"ph", "i"},
                      {"s", "g"},
                      {"cat", "iteration"},
                      {"name", "iteration"},
                      {"pid", kDevicePid},
                      {"tid", 0},
                      {"ts", ts}}});
  std::stable_sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
    return std::tie(x.pid, x.tid, x.ts) < std::tie(y.pid, y.tid, y.ts);
  });

  nlohmann::json events = nlohmann::json::array();
  events.push_back(meta(kDevicePid, 0, "process_name", "device"));
  events.push_back(meta(kHostPid, 0, "process_name", "host"));
  const std::pair<std::uint64_t, const char*> fixed[] = {{kD2HTrack, kD2HName},
                                                         {kH2DTrack, kH2DName},
                                                         {kWaitTrack, kWaitName},
                                                         {kRecomputeTrack, kRecomputeName}};
  for (const auto& [tid, name] : fixed)
    events.push_back(meta(kDevicePid, tid, "thread_name", name));
  for (std::uint32_t s : streams)
    events.push_back(meta(kDevicePid, s, "thread_name", fmt::format("stream {}", s)));
  for (std::uint64_t th : threads)
    events.push_back(meta(kHostPid, th, "thread_name", fmt::format("thread {}", th)));
  for (Item& it : items) events.push_back(std::move(it.event));
  nlohmann::json other = t.other.is_object() ? t.other : nlohmann::json::object();
  other["producer"] = t.producer;
  return {{"displayTimeUnit", "ms"}, {"otherData", other}, {"traceEvents", std::move(events)}};
}

}  // namespace gswap::policy::chrome
