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

// An event to write: its place (process, track, time) and what it is (kind, index into the
// timeline's vector of that kind). The JSON of an event is made only as it is written, so a
// timeline of millions of events never exists as one JSON tree.
enum class Kind : std::uint8_t {
  kKernel,
  kCopy,
  kDeviceWait,
  kHostWait,
  kRecompute,
  kCounter,
  kIteration
};
struct Item {
  int pid;
  std::uint64_t tid;
  double ts;
  Kind kind;
  std::size_t index;
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

nlohmann::json event_of(const Timeline& t, const Item& it) {
  switch (it.kind) {
    case Kind::kKernel: {
      const Kernel& k = t.kernels[it.index];
      return span("kernel", k.name.empty() ? "kernel" : k.name, kDevicePid, k.stream, k.start_us,
                  k.dur_us, {{"seq", k.seq}});
    }
    case Kind::kCopy: {
      const Copy& c = t.copies[it.index];
      nlohmann::json args = {{"region", c.region}, {"bytes", c.bytes}, {"planned", c.planned}};
      if (!c.region_name.empty()) args["region_name"] = c.region_name;
      if (c.late) args["late"] = *c.late;
      std::string name = fmt::format("{} {}", c.to_device ? "restore" : "swap-out",
                                     region_label(c.region, c.region_name));
      return span(c.to_device ? "restore" : "swap_out", name, kDevicePid, it.tid, c.start_us,
                  c.end_us - c.start_us, std::move(args));
    }
    case Kind::kDeviceWait: {
      const DeviceWait& w = t.device_waits[it.index];
      nlohmann::json args = {{"late_us", w.dur_us}};
      if (w.region) args["region"] = *w.region;
      if (!w.kernel.empty()) args["kernel"] = w.kernel;
      return span("device_stall", "waited for " + w.what, kDevicePid, kWaitTrack, w.start_us,
                  w.dur_us, std::move(args));
    }
    case Kind::kHostWait: {
      const HostWait& w = t.host_waits[it.index];
      return span("host_stall", "waited: " + (w.why.empty() ? "gswap" : w.why), kHostPid, w.thread,
                  w.start_us, w.dur_us, nullptr);
    }
    case Kind::kRecompute: {
      const Recompute& r = t.recomputes[it.index];
      return span("recompute", "recompute " + region_label(r.region, r.region_name), kDevicePid,
                  kRecomputeTrack, r.start_us, r.end_us - r.start_us,
                  {{"region", r.region}, {"bytes", r.bytes}, {"failed", r.failed}});
    }
    case Kind::kCounter: {
      const Counters& c = t.counters[it.index];
      return {{"ph", "C"},
              {"name", kCounterName},
              {"pid", kDevicePid},
              {"tid", 0},
              {"ts", c.ts_us},
              {"args",
               {{"resident_bytes", c.resident},
                {"budget_bytes", c.budget},
                {"pinned_host_bytes", c.pinned}}}};
    }
    case Kind::kIteration:
      return {{"ph", "i"},         {"s", "g"}, {"cat", "iteration"}, {"name", "iteration"},
              {"pid", kDevicePid}, {"tid", 0}, {"ts", it.ts}};
  }
  return nullptr;
}

// Every event of the trace, in the order written (metadata first, then by track and time), to
// `sink`.
template <class Sink>
void for_each_event(const Timeline& t, Sink sink) {
  std::vector<Item> items;
  items.reserve(t.kernels.size() + t.copies.size() + t.device_waits.size() + t.host_waits.size() +
                t.recomputes.size() + t.counters.size() + t.iterations.size());
  std::set<std::uint32_t> streams(t.streams.begin(), t.streams.end());
  std::set<std::uint64_t> threads;
  for (std::size_t i = 0; i < t.kernels.size(); ++i) {
    streams.insert(t.kernels[i].stream);
    items.push_back({kDevicePid, t.kernels[i].stream, t.kernels[i].start_us, Kind::kKernel, i});
  }
  for (std::size_t i = 0; i < t.copies.size(); ++i)
    items.push_back({kDevicePid, t.copies[i].to_device ? kH2DTrack : kD2HTrack,
                     t.copies[i].start_us, Kind::kCopy, i});
  for (std::size_t i = 0; i < t.device_waits.size(); ++i)
    items.push_back({kDevicePid, kWaitTrack, t.device_waits[i].start_us, Kind::kDeviceWait, i});
  for (std::size_t i = 0; i < t.host_waits.size(); ++i) {
    threads.insert(t.host_waits[i].thread);
    items.push_back(
        {kHostPid, t.host_waits[i].thread, t.host_waits[i].start_us, Kind::kHostWait, i});
  }
  for (std::size_t i = 0; i < t.recomputes.size(); ++i)
    items.push_back({kDevicePid, kRecomputeTrack, t.recomputes[i].start_us, Kind::kRecompute, i});
  for (std::size_t i = 0; i < t.counters.size(); ++i)
    items.push_back({kDevicePid, 0, t.counters[i].ts_us, Kind::kCounter, i});
  for (std::size_t i = 0; i < t.iterations.size(); ++i)
    items.push_back({kDevicePid, 0, t.iterations[i], Kind::kIteration, i});
  std::stable_sort(items.begin(), items.end(), [](const Item& x, const Item& y) {
    return std::tie(x.pid, x.tid, x.ts) < std::tie(y.pid, y.tid, y.ts);
  });

  sink(meta(kDevicePid, 0, "process_name", "device"));
  sink(meta(kHostPid, 0, "process_name", "host"));
  const std::pair<std::uint64_t, const char*> fixed[] = {{kD2HTrack, kD2HName},
                                                         {kH2DTrack, kH2DName},
                                                         {kWaitTrack, kWaitName},
                                                         {kRecomputeTrack, kRecomputeName}};
  for (const auto& [tid, name] : fixed) sink(meta(kDevicePid, tid, "thread_name", name));
  for (std::uint32_t s : streams)
    sink(meta(kDevicePid, s, "thread_name", fmt::format("stream {}", s)));
  for (std::uint64_t th : threads)
    sink(meta(kHostPid, th, "thread_name", fmt::format("thread {}", th)));
  for (const Item& it : items) sink(event_of(t, it));
}

nlohmann::json other_data(const Timeline& t) {
  nlohmann::json other = t.other.is_object() ? t.other : nlohmann::json::object();
  other["producer"] = t.producer;
  return other;
}

}  // namespace

nlohmann::json to_json(const Timeline& t) {
  nlohmann::json events = nlohmann::json::array();
  for_each_event(t, [&](nlohmann::json e) { events.push_back(std::move(e)); });
  return {
      {"displayTimeUnit", "ms"}, {"otherData", other_data(t)}, {"traceEvents", std::move(events)}};
}

void write_json(const Timeline& t, std::ostream& out) {
  // As to_json(t).dump() with bytes that are not UTF-8 replaced, one event at a time.
  auto dump = [](const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  };
  out << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << dump(other_data(t))
      << ",\"traceEvents\":[";
  bool first = true;
  for_each_event(t, [&](const nlohmann::json& e) {
    out << (first ? "" : ",") << dump(e);
    first = false;
  });
  out << "]}\n";
}

}  // namespace gswap::policy::chrome
