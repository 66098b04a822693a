// trace_json.cpp: the JSON edge of policy/ — parses and writes the "gswap-trace" version 1 format.
//
// Every rejection names the JSON path of the offending field first ("launches[3].regions[1]: ..."),
// so a user can find the problem in a multi-megabyte trace without a debugger. Unknown fields are
// ignored on purpose: newer writers may add fields without breaking older readers.
#include "policy/trace_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/json_duplicates.h"

namespace gswap::policy {
namespace {

using nlohmann::json;

// Thrown inside the parser only; parse_trace_json turns it into (false, message).
struct PathError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A number for messages, in the shortest text that reads back as it ("1e+308", "0.5",
// "1000000100000"): a value just over a limit never prints as the limit.
std::string fmt_double(double d) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, r.ptr);
}

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw PathError(path + ": " + what);
}

const json& member(const json& obj, const std::string& path, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) fail(path.empty() ? key : path + "." + key, "missing");
  return *it;
}

std::string join(const std::string& path, const char* key) {
  return path.empty() ? key : path + "." + key;
}

std::uint64_t get_uint(const json& v, const std::string& path) {
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<std::int64_t>() >= 0)) {
    fail(path, "expected a non-negative integer");
  }
  return v.get<std::uint64_t>();
}

double get_nonneg_double(const json& v, const std::string& path) {
  if (!v.is_number()) fail(path, "expected a number");
  double d = v.get<double>();
  if (!std::isfinite(d) || d < 0) fail(path, "expected a finite non-negative number");
  return d;
}

// A time in microseconds: at most kMaxTraceTimeUs, so that sums of times over a trace (the ideal
// timeline, simulated steps) stay finite and the plot's time axis stays drawable.
double get_time_us(const json& v, const std::string& path) {
  double d = get_nonneg_double(v, path);
  if (d > kMaxTraceTimeUs)
    fail(path, fmt_double(d) + " us is longer than a trace time may be (1e12 us, about 11.6 days)");
  return d;
}

// A copy bandwidth: at least kMinBytesPerS, so that a copy of the largest region takes a finite
// time (2^50 bytes at 1 byte/s is about 3.6e7 years, still a finite number of microseconds).
double get_bandwidth(const json& v, const std::string& path) {
  double d = get_nonneg_double(v, path);
  if (d < kMinBytesPerS) fail(path, "must be at least 1 byte/s, got " + fmt_double(d));
  return d;
}

const json& get_array(const json& v, const std::string& path) {
  if (!v.is_array()) fail(path, "expected an array");
  return v;
}

const json& get_object(const json& v, const std::string& path) {
  if (!v.is_object()) fail(path, "expected an object");
  return v;
}

void parse_device(const json& j, DeviceInfo* d) {
  const std::string p = "device";
  get_object(j, p);
  d->capacity_bytes = get_uint(member(j, p, "capacity_bytes"), join(p, "capacity_bytes"));
  d->h2d_bytes_per_s = get_bandwidth(member(j, p, "h2d_bytes_per_s"), join(p, "h2d_bytes_per_s"));
  d->d2h_bytes_per_s = get_bandwidth(member(j, p, "d2h_bytes_per_s"), join(p, "d2h_bytes_per_s"));
  if (auto it = j.find("min_evictable_bytes"); it != j.end())
    d->min_evictable_bytes = get_uint(*it, join(p, "min_evictable_bytes"));
}

Trace parse(const json& root) {
  Trace t;
  get_object(root, "$");
  const json& format = member(root, "", "format");
  if (!format.is_string() || format.get<std::string>() != kTraceFormat) {
    fail("format", std::string("expected \"") + kTraceFormat + "\"");
  }
  const json& version = member(root, "", "version");
  if (!version.is_number_integer() || version.get<std::int64_t>() != kTraceVersion) {
    fail("version",
         "unsupported version (this reader understands " + std::to_string(kTraceVersion) + ")");
  }
  parse_device(member(root, "", "device"), &t.device);

  std::unordered_map<RegionId, std::size_t> index;  // id -> position in t.regions
  std::uint64_t total_bytes = 0;
  const json& regions = get_array(member(root, "", "regions"), "regions");
  t.regions.reserve(regions.size());
  for (std::size_t i = 0; i < regions.size(); ++i) {
    const std::string p = "regions[" + std::to_string(i) + "]";
    const json& r = get_object(regions[i], p);
    Region reg;
    reg.id = get_uint(member(r, p, "id"), join(p, "id"));
    if (!index.emplace(reg.id, i).second)
      fail(join(p, "id"), "duplicate region id " + std::to_string(reg.id));
    reg.bytes = get_uint(member(r, p, "bytes"), join(p, "bytes"));
    if (reg.bytes > kMaxRegionBytes)
      fail(join(p, "bytes"),
           std::to_string(reg.bytes) + " bytes is larger than a region may be (1 PiB, 2^50 bytes)");
    total_bytes += reg.bytes;  // cannot wrap: each term is at most 2^50, the sum stays <= 2^60
    if (total_bytes > kMaxTotalRegionBytes)
      fail(join(p, "bytes"), "the regions hold more than 1 EiB (2^60 bytes) together");
    reg.alloc_seq = get_uint(member(r, p, "alloc_seq"), join(p, "alloc_seq"));
    if (auto it = r.find("free_seq"); it != r.end() && !it->is_null()) {
      reg.free_seq = get_uint(*it, join(p, "free_seq"));
      if (*reg.free_seq < reg.alloc_seq) fail(join(p, "free_seq"), "before alloc_seq");
    }
    if (auto it = r.find("recompute"); it != r.end() && !it->is_null()) {
      const std::string rp = join(p, "recompute");
      get_object(*it, rp);
      Recompute rc;
      rc.cost_us = get_time_us(member(*it, rp, "cost_us"), join(rp, "cost_us"));
      const std::string sp = join(rp, "sources");
      const json& src = get_array(member(*it, rp, "sources"), sp);
      for (std::size_t k = 0; k < src.size(); ++k) {
        rc.sources.push_back(get_uint(src[k], sp + "[" + std::to_string(k) + "]"));
      }
      reg.recompute = std::move(rc);
    }
    t.regions.push_back(std::move(reg));
  }
  // Sources may name regions declared later, so they are checked once all ids are known.
  for (std::size_t i = 0; i < t.regions.size(); ++i) {
    if (!t.regions[i].recompute) continue;
    auto& src = t.regions[i].recompute->sources;
    for (std::size_t k = 0; k < src.size(); ++k) {
      if (!index.count(src[k]) || src[k] == t.regions[i].id) {
        fail("regions[" + std::to_string(i) + "].recompute.sources[" + std::to_string(k) + "]",
             src[k] == t.regions[i].id ? "a region cannot be its own source"
                                       : "unknown region " + std::to_string(src[k]));
      }
    }
    // A source named twice says nothing more: it is kept once, in the order first named. Every
    // pass over the sources (per launch, in the analysis and the lower bound) would otherwise pay
    // for each naming again (a million namings of one source: 48 s to simulate).
    std::unordered_set<RegionId> seen;
    src.erase(std::remove_if(src.begin(), src.end(),
                             [&](RegionId id) { return !seen.insert(id).second; }),
              src.end());
  }

  const json& launches = get_array(member(root, "", "launches"), "launches");
  t.launches.reserve(launches.size());
  for (std::size_t i = 0; i < launches.size(); ++i) {
    const std::string p = "launches[" + std::to_string(i) + "]";
    const json& l = get_object(launches[i], p);
    Launch la;
    la.seq = get_uint(member(l, p, "seq"), join(p, "seq"));
    if (i > 0 && la.seq <= t.launches.back().seq) fail(join(p, "seq"), "not increasing");
    la.start_us = get_time_us(member(l, p, "start_us"), join(p, "start_us"));
    la.dur_us = get_time_us(member(l, p, "dur_us"), join(p, "dur_us"));
    std::uint64_t stream = get_uint(member(l, p, "stream"), join(p, "stream"));
    if (stream > 0xffffffffu) fail(join(p, "stream"), "out of range");
    la.stream = static_cast<std::uint32_t>(stream);
    const std::string rp = join(p, "regions");
    const json& regs = get_array(member(l, p, "regions"), rp);
    for (std::size_t k = 0; k < regs.size(); ++k) {
      const std::string kp = rp + "[" + std::to_string(k) + "]";
      RegionId id = get_uint(regs[k], kp);
      auto it = index.find(id);
      if (it == index.end()) fail(kp, "unknown region " + std::to_string(id));
      // A launch touches a region only while it is allocated: alloc_seq <= seq < free_seq.
      const Region& reg = t.regions[it->second];
      if (la.seq < reg.alloc_seq)
        fail(kp, "region " + std::to_string(id) + " is used before it was allocated (alloc_seq " +
                     std::to_string(reg.alloc_seq) + ")");
      if (reg.free_seq && la.seq >= *reg.free_seq)
        fail(kp, "region " + std::to_string(id) + " is used after it was freed (free_seq " +
                     std::to_string(*reg.free_seq) + ")");
      la.regions.push_back(id);
    }
    const json& kernel = member(l, p, "kernel");
    if (!kernel.is_string()) fail(join(p, "kernel"), "expected a string");
    la.kernel = kernel.get<std::string>();
    if (auto it = l.find("link"); it != l.end() && !it->is_null()) {
      const std::string lp = join(p, "link");
      if (!it->is_string()) fail(lp, "expected \"h2d\" or \"d2h\"");
      const std::string v = it->get<std::string>();
      if (v == "h2d")
        la.link = CopyLink::kToDevice;
      else if (v == "d2h")
        la.link = CopyLink::kToHost;
      else
        fail(lp, "expected \"h2d\" or \"d2h\", got \"" + v + "\"");
    }
    t.launches.push_back(std::move(la));
  }

  if (auto it = root.find("iterations"); it != root.end() && !it->is_null()) {
    const json& its = get_array(*it, "iterations");
    for (std::size_t i = 0; i < its.size(); ++i) {
      const std::string p = "iterations[" + std::to_string(i) + "]";
      get_object(its[i], p);
      IterationMark m;
      m.first_seq = get_uint(member(its[i], p, "first_seq"), join(p, "first_seq"));
      m.last_seq = get_uint(member(its[i], p, "last_seq"), join(p, "last_seq"));
      if (m.last_seq < m.first_seq) fail(join(p, "last_seq"), "before first_seq");
      t.iterations.push_back(m);
    }
  }
  return t;
}

// A launch position of a plan entry: null for kNoLaunch, else a launch of the trace.
std::size_t get_position(const json& v, const std::string& path, std::size_t n) {
  if (v.is_null()) return kNoLaunch;
  const std::uint64_t x = get_uint(v, path);
  if (x >= n)
    fail(path, std::to_string(x) + " is past the trace's " + std::to_string(n) + " launches");
  return static_cast<std::size_t>(x);
}

Plan parse_plan(const json& root, const Trace& trace) {
  get_object(root, "$");
  const json& format = member(root, "", "format");
  if (!format.is_string() || format.get<std::string>() != kPlanFormat)
    fail("format", std::string("expected \"") + kPlanFormat + "\"");
  const json& version = member(root, "", "version");
  if (!version.is_number_integer() || version.get<std::int64_t>() != kPlanVersion)
    fail("version",
         "unsupported version (this reader understands " + std::to_string(kPlanVersion) + ")");
  Plan plan;
  if (auto it = root.find("policy"); it != root.end()) {
    if (!it->is_string()) fail("policy", "expected a string");
    plan.policy = it->get<std::string>();
  }
  std::unordered_map<RegionId, bool> recomputable;
  for (const Region& r : trace.regions) recomputable[r.id] = r.recompute.has_value();
  const std::size_t n = trace.launches.size();
  const json& entries = get_array(member(root, "", "entries"), "entries");
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string p = "entries[" + std::to_string(i) + "]";
    const json& e = get_object(entries[i], p);
    PlanEntry pe;
    pe.region = get_uint(member(e, p, "region"), join(p, "region"));
    auto rc = recomputable.find(pe.region);
    if (rc == recomputable.end())
      fail(join(p, "region"), "unknown region " + std::to_string(pe.region));
    const json& kind = member(e, p, "kind");
    if (kind == "swap")
      pe.kind = EvictKind::kSwap;
    else if (kind == "recompute")
      pe.kind = EvictKind::kRecompute;
    else
      fail(join(p, "kind"), "expected \"swap\" or \"recompute\"");
    if (pe.kind == EvictKind::kRecompute && !rc->second)
      fail(join(p, "kind"), "region " + std::to_string(pe.region) + " is not recomputable");
    pe.evict_after = get_position(member(e, p, "evict_after"), join(p, "evict_after"), n);
    if (pe.evict_after == kNoLaunch) fail(join(p, "evict_after"), "expected a launch position");
    if (auto it = e.find("evict_at"); it != e.end())
      pe.evict_at = get_position(*it, join(p, "evict_at"), n);
    pe.trigger = get_position(member(e, p, "trigger"), join(p, "trigger"), n);
    pe.back_access = get_position(member(e, p, "back_access"), join(p, "back_access"), n);
    // A copy's time, bytes over a link's speed: up to 2^50 bytes at 1 byte/s, past what a trace's
    // times may be (kMaxTraceTimeUs); any finite figure a planner writes reads back.
    if (auto it = e.find("swap_in_us"); it != e.end())
      pe.swap_in_us = get_nonneg_double(*it, join(p, "swap_in_us"));
    plan.entries.push_back(pe);
  }
  return plan;
}

// Parses text and runs parse_root on it; every exception becomes (false, message): nothing else
// leaves the public parsers.
template <class Parse>
bool guarded_parse(std::string_view text, std::string* error, Parse&& parse_root) {
  json root;
  // The JSON reader takes a NUL byte for the end of its input: what follows would go unread.
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    if (error) *error = "$: not valid JSON: a NUL byte at offset " + std::to_string(nul);
    return false;
  }
  JsonRead read;
  try {
    read = read_json(text, &root);
  } catch (const json::exception& e) {
    if (error) *error = std::string("$: not valid JSON: ") + e.what();
    return false;
  }
  if (!read.too_deep.empty()) {
    if (error)
      *error = read.too_deep + ": nested more than " + std::to_string(kMaxJsonDepth) + " deep";
    return false;
  }
  // A key given twice says two things about one field: neither is taken.
  if (!read.repeated.empty()) {
    if (error) *error = read.repeated.front() + ": given more than once";
    return false;
  }
  try {
    parse_root(root);
    return true;
  } catch (const PathError& e) {
    if (error) *error = e.what();
    return false;
  } catch (const json::exception& e) {
    if (error) *error = std::string("$: ") + e.what();
    return false;
  }
}

}  // namespace

bool parse_plan_json(std::string_view text, const Trace& trace, Plan* out, std::string* error) {
  return guarded_parse(text, error, [&](const json& root) { *out = parse_plan(root, trace); });
}

std::string write_plan_json(const Plan& plan) {
  auto position = [](std::size_t x) { return x == kNoLaunch ? json(nullptr) : json(x); };
  json entries = json::array();
  for (const PlanEntry& e : plan.entries)
    entries.push_back({{"region", e.region},
                       {"kind", e.kind == EvictKind::kSwap ? "swap" : "recompute"},
                       {"evict_after", e.evict_after},
                       {"evict_at", position(e.evict_at)},
                       {"trigger", position(e.trigger)},
                       {"back_access", position(e.back_access)},
                       {"swap_in_us", e.swap_in_us}});
  json root = {{"format", kPlanFormat},
               {"version", kPlanVersion},
               {"policy", plan.policy},
               {"entries", entries}};
  return root.dump(1, ' ', false, json::error_handler_t::replace);
}

bool parse_trace_json(std::string_view text, Trace* out, std::string* error) {
  // nlohmann throws even with allow_exceptions=false (out_of_range.406 for a number that
  // overflows a double, 1e400): guarded_parse reports every exception in the usual form.
  return guarded_parse(text, error, [&](const json& root) { *out = parse(root); });
}

std::string write_trace_json(const Trace& trace) {
  json root;
  root["format"] = kTraceFormat;
  root["version"] = kTraceVersion;
  root["device"] = {{"capacity_bytes", trace.device.capacity_bytes},
                    {"h2d_bytes_per_s", trace.device.h2d_bytes_per_s},
                    {"d2h_bytes_per_s", trace.device.d2h_bytes_per_s},
                    {"min_evictable_bytes", trace.device.min_evictable_bytes}};
  json regions = json::array();
  for (const Region& r : trace.regions) {
    json jr = {{"id", r.id}, {"bytes", r.bytes}, {"alloc_seq", r.alloc_seq}};
    jr["free_seq"] = r.free_seq ? json(*r.free_seq) : json(nullptr);
    if (r.recompute) {
      jr["recompute"] = {{"cost_us", r.recompute->cost_us}, {"sources", r.recompute->sources}};
    }
    regions.push_back(std::move(jr));
  }
  root["regions"] = std::move(regions);
  json launches = json::array();
  for (const Launch& l : trace.launches) {
    json jl = {{"seq", l.seq},       {"start_us", l.start_us}, {"dur_us", l.dur_us},
               {"stream", l.stream}, {"regions", l.regions},   {"kernel", l.kernel}};
    if (l.link != CopyLink::kNone) jl["link"] = l.link == CopyLink::kToDevice ? "h2d" : "d2h";
    launches.push_back(std::move(jl));
  }
  root["launches"] = std::move(launches);
  json its = json::array();
  for (const IterationMark& m : trace.iterations) {
    its.push_back({{"first_seq", m.first_seq}, {"last_seq", m.last_seq}});
  }
  root["iterations"] = std::move(its);
  // Kernel names come from programs; one that is not UTF-8 must not make the trace unwritable.
  return root.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gswap::policy
