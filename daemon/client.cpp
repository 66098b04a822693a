// client.cpp: one library client as gswapd sees it (see client.h for the threading rules).
#include "daemon/client.h"

#include <fcntl.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>
#include <new>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "daemon/untrusted_text.h"
#include "policy/iteration.h"
#include "policy/trace_json.h"
#include "proto/seqlock.h"

namespace gswap::daemon {

namespace {
// The longest GPU timing or recomputation cost believed: what a trace may say.
constexpr std::uint64_t kMaxTimeNs = static_cast<std::uint64_t>(policy::kMaxTraceTimeUs * 1e3);
// The launch window is in seq order: std::lower_bound with this finds the first launch at or
// after a seq.
bool seq_below(const LaunchInfo& l, std::uint64_t seq) {
  return l.seq < seq;
}
}  // namespace

ClientShm::~ClientShm() {
  if (base_) munmap(base_, bytes_);
  if (fd_ >= 0) close(fd_);
}

bool ClientShm::create(std::uint32_t ring_capacity, std::uint32_t plan_capacity,
                       std::string* error) {
  proto::Layout l = proto::make_layout(ring_capacity, plan_capacity);
  fd_ = memfd_create("gswap-client", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd_ < 0) return *error = fmt::format("memfd_create: {}", strerror(errno)), false;
  if (ftruncate(fd_, static_cast<off_t>(l.total_bytes)) != 0)
    return *error = fmt::format("ftruncate: {}", strerror(errno)), false;
  // Sealed against resizing: a client that shrank the file would make our reads fault (SIGBUS).
  if (fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    return *error = fmt::format("sealing the memfd: {}", strerror(errno)), false;
  void* p = mmap(nullptr, l.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
  if (p == MAP_FAILED) return *error = fmt::format("mmap: {}", strerror(errno)), false;
  base_ = static_cast<unsigned char*>(p);
  bytes_ = l.total_bytes;
  // The memfd starts zeroed, which is the initial state of every atomic and seqlock in it.
  proto::ShmHeader h{};
  h.magic = proto::kShmMagic;
  h.version = proto::kProtocolVersion;
  h.header_bytes = sizeof(proto::ShmHeader);
  h.total_bytes = l.total_bytes;
  h.ring_control_offset = l.ring_control_offset;
  h.ring_offset = l.ring_offset;
  h.ring_capacity = l.ring_capacity;
  h.record_bytes = sizeof(proto::EventRecord);
  h.status_offset = l.status_offset;
  h.status_bytes = sizeof(proto::StatusBlock);
  h.plan_offset = l.plan_offset;
  h.plan_bytes = l.plan_bytes;
  h.plan_capacity = l.plan_capacity;
  std::memcpy(base_, &h, sizeof h);
  return true;
}

Client::Client(int fd, pid_t pid, uid_t uid, std::string exe, const ClientLimits& limits)
    : fd_(fd), pid_(pid), uid_(uid), exe_(printable_text(exe)), limits_(limits) {
  connected_at_ = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
}

Client::~Client() {
  if (fd_ >= 0) close(fd_);
}

// A client may have held hundreds of MiB in small blocks (regions, launches, names). glibc keeps
// freed blocks below the top of its heaps for reuse; a daemon that runs for weeks should give
// them back once the client is gone.
Client::ReturnMemory::~ReturnMemory() {
#ifdef __GLIBC__
  malloc_trim(0);
#endif
}

// One line per client and kind: a hostile or broken client would otherwise fill the log. gswapd
// registers its logger as "gswapd" (gswapd_main.cpp); tests keep the lines in warnings().
void Client::warn_once(Warning kind, std::string text) {
  if (warned_ & kind) return;
  warned_ |= kind;
  if (auto log = spdlog::get("gswapd")) log->warn("pid {} ({}): {}", pid_, exe_, text);
  warnings_.push_back(std::move(text));
}

bool Client::init_shm(std::string* error) {
  if (!shm_.create(limits_.ring_capacity, limits_.plan_capacity, error)) return false;
  const proto::ShmHeader& h = shm_.header();
  unsigned char* b = shm_.base();
  auto* rc = reinterpret_cast<proto::RingControl*>(b + h.ring_control_offset);
  ring_ = proto::RingConsumer(&rc->head, &rc->tail,
                              reinterpret_cast<proto::EventRecord*>(b + h.ring_offset),
                              h.ring_capacity);
  status_ = reinterpret_cast<proto::StatusBlock*>(b + h.status_offset);
  plan_block_ = reinterpret_cast<proto::PlanBlock*>(b + h.plan_offset);
  scratch_.resize(h.ring_capacity);
  return true;
}

bool Client::poll(std::string* error) {
  // Bounded work per tick: at most one ring's worth.
  reorder_moves_ = 0;
  std::int64_t n = ring_.peek(scratch_.data(), scratch_.size());
  if (n < 0) return *error = "ring head out of range", false;
  if (n > 0) {
    proto::DecodeResult r = proto::decode_events(scratch_.data(), static_cast<std::size_t>(n),
                                                 /*complete=*/true, *this);
    if (!r.ok) {
      *error = fmt::format("bad ring record {}: {}", r.error_index, r.error);
      return false;
    }
    if (!protocol_error_.empty()) return *error = protocol_error_, false;
    ring_.commit(r.consumed);
    counters_.events += r.consumed;
  }
  std::uint64_t words[proto::kStatusWords];
  if (proto::seqlock_read(&status_->seq, status_->words, words, proto::kStatusWords)) {
    std::memcpy(&counters_.status, words, sizeof words);
    ignore_impossible_link(&counters_.status);
    if (counters_.status.guided_iterations != guided_seen_) {
      guided_seen_ = counters_.status.guided_iterations;
      launches_at_guided_ = counters_.launches_seen;
    }
    sample_counters();
    if (counters_.status.fixed_bytes > fixed_most_) {
      fixed_most_ = counters_.status.fixed_bytes;
      fixed_most_rose_ = true;
    }
  }
  maybe_detect_iteration();
  return true;
}

// A link measured slower than kMinLinkBytesPerS is a broken measurement (or a hostile client):
// taken as unmeasured, so that traces and plans carry the default figure and every swap time in
// them stays within what a trace may say.
void Client::ignore_impossible_link(proto::StatusPayload* st) {
  for (std::uint64_t* bytes_per_s : {&st->h2d_bytes_per_s, &st->d2h_bytes_per_s}) {
    if (*bytes_per_s == 0 || *bytes_per_s >= kMinLinkBytesPerS) continue;
    warn_once(kWarnLink, fmt::format("a link measured at {} bytes/s is ignored (less than {})",
                                     *bytes_per_s, kMinLinkBytesPerS));
    *bytes_per_s = 0;
  }
}

// One sample per change (a tick is 10 ms): an idle client costs nothing, a busy one at most
// timeline_records samples.
void Client::sample_counters() {
  const proto::StatusPayload& st = counters_.status;
  if (limits_.timeline_records == 0) return;
  if (!counter_samples_.empty()) {
    const CounterSample& last = counter_samples_.back();
    if (last.resident == st.resident && last.budget == st.applied_budget &&
        last.pinned == st.pinned)
      return;
  }
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  if (counter_samples_.size() >= limits_.timeline_records) counter_samples_.pop_front();
  const std::uint64_t now = static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ull +
                            static_cast<std::uint64_t>(ts.tv_nsec);
  counter_samples_.push_back(CounterSample{now, st.resident, st.applied_budget, st.pinned});
}

std::int64_t Client::off_plan_ms(std::int64_t now_ms) {
  if (guided_seen_ != off_plan_guided_ || generation_ != off_plan_generation_) {
    off_plan_guided_ = guided_seen_;
    off_plan_generation_ = generation_;
    off_plan_since_ms_ = now_ms;
  }
  return now_ms - off_plan_since_ms_;
}

void Client::arm_idle_watch(std::int64_t now_ms) {
  idle_armed_ = true;
  idle_since_ms_ = now_ms;
  idle_swapped_out_ = counters_.status.swapped_out;
}

std::uint64_t Client::swapped_while_idle(std::int64_t now_ms, std::int64_t grace_ms) {
  const std::uint64_t out = counters_.status.swapped_out;
  if (!idle_armed_) return 0;
  if (now_ms - idle_since_ms_ < grace_ms) {
    idle_swapped_out_ = out;
    return 0;
  }
  return out > idle_swapped_out_ ? out - idle_swapped_out_ : 0;
}

void Client::publish(std::uint64_t budget, PublishedPlan plan) {
  budget_ = budget;
  idle_armed_ = false;
  if (plan.entries.size() > limits_.plan_capacity) plan.entries.resize(limits_.plan_capacity);
  if (plan.signature.size() > proto::kSignatureLength)
    plan.signature.resize(proto::kSignatureLength);
  published_ = std::move(plan);
  ++generation_;
  lateness_.assign(published_.entries.size(), EntryLateness{});
  divergences_since_plan_ = 0;
  launches_at_guided_ = counters_.launches_seen;
  std::vector<std::uint64_t> words(proto::kPlanHeaderWords +
                                   published_.entries.size() * proto::kPlanEntryWords);
  proto::PlanHeader ph{};
  ph.generation = generation_;
  ph.budget_bytes = budget;
  ph.mode = static_cast<std::uint32_t>(published_.mode);
  ph.num_entries = static_cast<std::uint32_t>(published_.entries.size());
  ph.iteration_length = published_.iteration_length;
  ph.iteration_first_seq = published_.first_seq;
  ph.seq_length = published_.seq_length;
  ph.signature_length = static_cast<std::uint32_t>(published_.signature.size());
  ph.measure_every = published_.measure_every;
  std::copy(published_.signature.begin(), published_.signature.end(), ph.signature);
  std::memcpy(words.data(), &ph, sizeof ph);
  if (!published_.entries.empty())
    std::memcpy(words.data() + proto::kPlanHeaderWords, published_.entries.data(),
                published_.entries.size() * sizeof(proto::PlanEntry));
  auto* area = reinterpret_cast<std::atomic<std::uint64_t>*>(plan_block_ + 1);
  proto::seqlock_write(&plan_block_->seq, area, words.data(), words.size());
}

void Client::forget_launches() {
  ++window_changes_;
  launches_.clear();
  marks_.clear();
  launches_since_detect_ = 0;
  iteration_ = IterationInfo{};
  prune_freed();  // no launch uses a freed region now
}

std::string Client::name_of_kernel(std::uint64_t id) const {
  if (id == proto::kCopyFunction) return "memcpy";
  if (id == proto::kMemsetFunction) return "memset";
  if (id == proto::kMemOpFunction) return "memops";
  auto it = kernel_names_.find(id);
  if (it != kernel_names_.end() && !it->second.empty()) return it->second;
  return fmt::format("{:016x}", id);
}

std::string Client::name_of_region(std::uint64_t id) const {
  auto it = region_names_.find(id);
  return it == region_names_.end() ? std::string() : it->second;
}

void Client::maybe_detect_iteration() {
  // Library iteration marks are authoritative when present. A mark takes the seq of the call
  // after it, which may be an allocation, a free or a copy: the iteration starts at the first
  // launch at or after the mark, where the library finds it and a plan counts from. What the
  // iteration allocates before that launch is still its own: its trace has it allocated before
  // its first launch, live from there.
  if (marks_.size() >= 2) {
    // The window is in seq order: two binary searches, not a pass over it at every tick.
    const std::uint64_t mark = marks_[marks_.size() - 2], next = marks_.back();
    // Once the window has let go of launches after the older mark, the span taken from the
    // window's front would be cut short, and shorter at every tick as the window slides. The
    // iteration found before stays: this span itself, taken whole while the window held it (an
    // iteration longer than half the window), or an earlier one, or none where the iteration is
    // longer than the window holds, which is said once (take_measured says its start left).
    if (dropped_before_seq_ > mark) {
      const bool taken = iteration_.source == "marks" && iteration_.first_seq >= mark;
      if (!taken)
        warn_once(kWarnIterationLength,
                  fmt::format("an iteration between two marks is longer than the {} launches "
                              "the window holds (trace_launches): it is not planned",
                              limits_.trace_launches));
      if (!taken && iteration_.source != "marks") iteration_ = IterationInfo{};
      return;
    }
    const auto from = std::lower_bound(launches_.begin(), launches_.end(), mark, seq_below);
    const auto to = std::lower_bound(from, launches_.end(), next, seq_below);
    if (from != to)
      iteration_ = {static_cast<std::uint64_t>(to - from), from->seq, std::prev(to)->seq, 1.0,
                    "marks"};
    return;  // marks and launches bump window_changes_ as they come
  }
  // Detection costs about the window's length; running it after every window/8 new launches (at
  // least 256) keeps the cost per launch constant while short runs are still detected early.
  std::size_t every = std::max<std::size_t>(64, launches_.size() / 8);
  if (launches_since_detect_ < every || launches_.size() < 8) return;
  launches_since_detect_ = 0;
  std::vector<std::uint64_t> symbols;
  symbols.reserve(launches_.size());
  for (const LaunchInfo& l : launches_) symbols.push_back(l.function_id);
  policy::PeriodOptions opt;
  opt.max_period = std::max<std::size_t>(opt.min_period, symbols.size() / 2);
  std::optional<policy::PeriodResult> r = policy::detect_iteration_period(symbols, opt);
  if (!r || r->period == 0 || r->phase + r->period > launches_.size()) return;
  std::size_t phase = recognisable_phase(symbols, r->phase, r->period);
  iteration_ = {r->period, launches_[phase].seq, launches_[phase + r->period - 1].seq, r->match,
                "detected"};
  ++window_changes_;
}

namespace {

// The shortest prefix of at most proto::kSignatureLength functions that the library's matcher
// completes only where an iteration starts (signature_found_at_start); 0 when none is.
std::size_t found_signature_length(const std::vector<std::uint64_t>& f) {
  const std::size_t most = std::min<std::size_t>(f.size(), proto::kSignatureLength);
  for (std::size_t len = 1; len <= most; ++len)
    if (signature_found_at_start(f, len)) return len;
  return 0;
}

}  // namespace

// Detection may start the period anywhere (after gswapd forgets a client's launches, wherever
// the window now begins). A plan finds the iteration's start by a short prefix the library's
// matcher finds only there; in a stretch that repeats (one block of kernels per layer) there may
// be none, and the library would take another layer's block for the start. Such a phase moves
// forward to the first launch whose function occurs once per period (a loss, an upload, an
// optimizer step), which alone is such a prefix; where there is none, to the start of a window
// found nowhere else in the period.
std::size_t recognisable_phase(const std::vector<std::uint64_t>& symbols, std::size_t phase,
                               std::size_t period) {
  const std::vector<std::uint64_t> f(symbols.begin() + static_cast<std::ptrdiff_t>(phase),
                                     symbols.begin() + static_cast<std::ptrdiff_t>(phase + period));
  if (found_signature_length(f)) return phase;
  // A complete period starts at launch i, or at the one a period before it.
  auto complete = [&](std::size_t i) -> std::optional<std::size_t> {
    if (i + period <= symbols.size()) return i;
    if (i >= period) return i - period;
    return std::nullopt;
  };
  std::unordered_map<std::uint64_t, std::size_t> count;
  for (std::uint64_t fn : f) ++count[fn];
  for (std::size_t j = 0; j < period; ++j)
    if (count[f[j]] == 1) return complete(phase + j).value_or(phase);
  // Every function recurs within the period: windows of the signature's length, hashed around
  // the period (a window may run past its end into its start), those found once tried in order
  // with the matcher itself (which can miss a window it starts over inside). The tries are
  // bounded: each runs the matcher over two periods.
  const std::size_t len = std::min<std::size_t>(period, proto::kSignatureLength);
  auto window = [&](std::size_t j) {
    std::uint64_t h = 1469598103934665603ull;
    for (std::size_t k = 0; k < len; ++k) h = (h ^ f[(j + k) % period]) * 1099511628211ull;
    return h;
  };
  std::vector<std::uint64_t> hashes(period);
  std::unordered_map<std::uint64_t, std::size_t> seen;
  for (std::size_t j = 0; j < period; ++j) ++seen[hashes[j] = window(j)];
  constexpr int kTries = 32;
  std::vector<std::uint64_t> rotated(period);
  int tries = 0;
  for (std::size_t j = 0; j < period && tries < kTries; ++j) {
    if (seen[hashes[j]] != 1) continue;
    ++tries;
    for (std::size_t k = 0; k < period; ++k) rotated[k] = f[(j + k) % period];
    if (found_signature_length(rotated)) return complete(phase + j).value_or(phase);
  }
  return phase;
}

namespace {
// The measured pinned bandwidth the library reports, else the PCIe Gen4 x16 figure of the design
// brief (before any swap copy of 1 MiB or more was timed).
double bandwidth(std::uint64_t measured) {
  return measured ? static_cast<double>(measured) : 25e9;
}
}  // namespace

policy::Trace Client::last_iteration_trace(std::uint64_t device_bytes) const {
  policy::Trace t;
  t.device.capacity_bytes = device_bytes;
  t.device.h2d_bytes_per_s = bandwidth(counters_.status.h2d_bytes_per_s);
  t.device.d2h_bytes_per_s = bandwidth(counters_.status.d2h_bytes_per_s);
  t.device.min_evictable_bytes = 0;  // the library reports only regions it can move
  if (!iteration_.length) return t;
  std::size_t first = launches_.size(), last = 0;
  for (std::size_t i = 0; i < launches_.size(); ++i) {
    if (launches_[i].seq < iteration_.first_seq || launches_[i].seq > iteration_.last_seq) continue;
    first = std::min(first, i);
    last = i;
  }
  if (first > last) return t;
  MeasuredIteration m;
  build_iteration(first, last + 1, device_bytes, &m);
  return std::move(m.trace);
}

// Launches [begin, end) of the window as one iteration.
void Client::build_iteration(std::size_t begin, std::size_t end, std::uint64_t device_bytes,
                             MeasuredIteration* m) const {
  policy::Trace& t = m->trace;
  t.device.capacity_bytes = device_bytes;
  t.device.h2d_bytes_per_s = bandwidth(counters_.status.h2d_bytes_per_s);
  t.device.d2h_bytes_per_s = bandwidth(counters_.status.d2h_bytes_per_s);
  t.device.min_evictable_bytes = 0;  // the library reports only regions it can move
  m->h2d_measured = counters_.status.h2d_bytes_per_s != 0;
  m->d2h_measured = counters_.status.d2h_bytes_per_s != 0;
  // Each region of the trace, with the seqs of its first and last use here (none for a source of
  // a recomputation that no launch here uses).
  struct Use {
    std::uint64_t first = ~0ull, last = 0;
  };
  std::unordered_map<std::uint64_t, Use> used;
  std::uint64_t t0 = ~0ull;
  std::size_t timed = 0;
  for (std::size_t i = begin; i < end; ++i)
    if (launches_[i].duration_ns) t0 = std::min(t0, launches_[i].start_ns);
  for (std::size_t i = begin; i < end; ++i) {
    const LaunchInfo& l = launches_[i];
    policy::Launch pl;
    pl.seq = l.seq;
    pl.stream = l.stream;
    pl.kernel = name_of_kernel(l.function_id);
    pl.link = l.link == proto::kCopyLinkToDevice ? policy::CopyLink::kToDevice
              : l.link == proto::kCopyLinkToHost ? policy::CopyLink::kToHost
                                                 : policy::CopyLink::kNone;
    if (l.duration_ns) {
      ++timed;
      // Each timing is within what a trace may say (on_gpu_timing), but a device clock that
      // jumps, or a hostile client, may set an iteration's starts further apart.
      pl.start_us = std::min(static_cast<double>(l.start_ns - t0) / 1e3, policy::kMaxTraceTimeUs);
      pl.dur_us = static_cast<double>(l.duration_ns) / 1e3;
    }
    for (std::uint64_t id : l.regions) {
      if (!regions_.count(id)) continue;  // allocated before this daemon knew the client
      if (std::find(pl.regions.begin(), pl.regions.end(), id) == pl.regions.end())
        pl.regions.push_back(id);
      Use& u = used[id];
      u.first = std::min(u.first, l.seq);
      u.last = std::max(u.last, l.seq);
    }
    t.launches.push_back(std::move(pl));
    m->functions.push_back(l.function_id);
    m->regions.push_back(l.regions);
  }
  // Recomputable regions: their sources belong to the trace too (the planner makes them
  // resident for the recomputation). Without a cost hint, the cost is the last measured
  // recomputation of the region, else the device time of the launch that first wrote it in this
  // iteration (its producer, measured).
  std::unordered_map<std::uint64_t, double> producer_us;
  for (const policy::Launch& l : t.launches)
    for (std::uint64_t id : l.regions) producer_us.try_emplace(id, l.dur_us);
  // And theirs, to the end of every chain: a source may itself be recomputed from others (a
  // trace names only regions it holds, so a source's sources are in it too).
  std::vector<std::uint64_t> unvisited;
  unvisited.reserve(used.size());
  for (const auto& [id, use] : used) unvisited.push_back(id);
  while (!unvisited.empty()) {
    const auto it = regions_.find(unvisited.back());
    unvisited.pop_back();
    if (it == regions_.end() || !it->second.recompute) continue;
    for (std::uint64_t s : it->second.recompute->sources)
      if (regions_.count(s) && used.try_emplace(s).second) unvisited.push_back(s);
  }
  for (const auto& [id, info] : regions_) {
    auto u = used.find(id);
    if (u == used.end()) continue;
    policy::Region r;
    r.id = id;
    r.bytes = info.bytes;
    r.alloc_seq = info.alloc_seq;
    r.free_seq = info.free_seq;
    // A launch uses a region only while it is allocated. The library's events say so; a garbled
    // client's may not, and a trace must (gswapctl simulate reads every trace dumped): its
    // lifetime is stretched over its uses.
    if (u->second.first != ~0ull) {
      r.alloc_seq = std::min(r.alloc_seq, u->second.first);
      if (r.free_seq && *r.free_seq <= u->second.last) r.free_seq = u->second.last + 1;
    }
    if (const auto& rc = info.recompute) {
      policy::Recompute p;
      if (rc->cost_ns)
        p.cost_us = static_cast<double>(rc->cost_ns) / 1e3;
      else if (rc->measured_ns)
        p.cost_us = static_cast<double>(rc->measured_ns) / 1e3;
      else if (auto it = producer_us.find(id); it != producer_us.end())
        p.cost_us = it->second;
      // Each source once (the library sends each once; a garbled client may not, and each
      // naming costs every pass over the sources).
      for (std::uint64_t s : rc->sources)
        if (used.count(s) && s != id &&
            std::find(p.sources.begin(), p.sources.end(), s) == p.sources.end())
          p.sources.push_back(s);
      // An unmeasured cost would make recomputation look free: leave such a region to swaps.
      if (p.cost_us > 0) r.recompute = std::move(p);
    }
    t.regions.push_back(r);
  }
  std::sort(t.regions.begin(), t.regions.end(),
            [](const policy::Region& a, const policy::Region& b) { return a.id < b.id; });
  if (!t.launches.empty()) {
    t.iterations.push_back({t.launches.front().seq, t.launches.back().seq});
    m->first_seq = t.launches.front().seq;
    m->seq_length = end < launches_.size() ? launches_[end].seq - m->first_seq
                                           : t.launches.back().seq - m->first_seq + 1;
  }
  m->timed_fraction =
      end > begin ? static_cast<double>(timed) / static_cast<double>(end - begin) : 0;
}

// A launch whose timing did not arrive (up to a tenth of a measured iteration) would look free
// to the planner and shift every drift comparison. It takes the duration of the same launch in
// the newest earlier iteration of the window that timed it, else in the iteration planned from,
// else the median of its function's timed launches in the window; else it stays 0.
void Client::estimate_untimed(std::size_t begin, MeasuredIteration* m) const {
  const std::size_t len = m->trace.launches.size();
  const MeasuredIteration& old = planned_from_;
  const bool same_shape = old.functions == m->functions;
  std::unordered_map<std::uint64_t, std::vector<std::uint64_t>> by_function;
  for (std::size_t i = 0; i < len; ++i) {
    policy::Launch& l = m->trace.launches[i];
    if (launches_[begin + i].duration_ns) continue;
    std::uint64_t ns = 0;
    for (std::size_t s = begin; s >= len && !ns;) {
      s -= len;
      const LaunchInfo& e = launches_[s + i];
      if (e.function_id != m->functions[i]) break;  // the window's iterations differ there
      ns = e.duration_ns;
    }
    if (!ns && same_shape) ns = static_cast<std::uint64_t>(old.trace.launches[i].dur_us * 1e3);
    if (!ns) {
      if (by_function.empty())
        for (const LaunchInfo& w : launches_)
          if (w.duration_ns) by_function[w.function_id].push_back(w.duration_ns);
      if (auto it = by_function.find(m->functions[i]); it != by_function.end()) {
        std::vector<std::uint64_t>& d = it->second;
        auto mid = d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2);
        std::nth_element(d.begin(), mid, d.end());
        ns = *mid;
      }
    }
    l.dur_us = static_cast<double>(ns) / 1e3;
  }
}

bool signature_found_at_start(const std::vector<std::uint64_t>& f, std::size_t length) {
  const std::size_t n = f.size();
  if (n == 0 || length == 0 || length > n) return false;
  // Two periods and a signature, from just after a start: every match must begin at a start, and
  // the second period's start must be found.
  std::uint32_t matched = 0;
  std::size_t begun = 0;
  bool found = false;
  for (std::size_t i = 1; i < 2 * n + length; ++i) {
    if (proto::match_signature(f.data(), &matched, f[i % n])) begun = i;
    if (matched == length) {
      matched = 0;
      if (begun % n != 0) return false;
      found = true;
    }
  }
  return found;
}

std::size_t signature_length(const std::vector<std::uint64_t>& f) {
  const std::size_t found = found_signature_length(f);
  return found ? found : std::min<std::size_t>(f.size(), proto::kSignatureLength);
}

// Whether the period of `length` launches at `begin` starts the way the period after it does (or,
// while that one is still arriving, the period before it), give or take a few launches: the
// library finds iterations by the period's signature. A window that begins with one-off work,
// such as the uploads of the initial weights before the first iteration, repeats in its length
// but not at its start.
bool Client::start_recurs(std::size_t begin, std::size_t length) const {
  std::vector<std::uint64_t> f(length);
  for (std::size_t i = 0; i < length; ++i) f[i] = launches_[begin + i].function_id;
  const std::size_t sig = signature_length(f);
  const std::size_t slack = std::max<std::size_t>(2, length / 16);
  auto starts_near = [&](std::size_t at) {
    for (std::size_t d = at > slack ? at - slack : 0; d <= at + slack; ++d) {
      if (d + sig > launches_.size()) break;
      std::size_t k = 0;
      while (k < sig && launches_[d + k].function_id == f[k]) ++k;
      if (k == sig && d != begin) return true;
    }
    return false;
  };
  if (begin + length + slack + sig <= launches_.size()) return starts_near(begin + length);
  return begin >= length && starts_near(begin - length);
}

std::optional<MeasuredIteration> Client::take_measured(std::uint64_t device_bytes) {
  if (window_changes_ == scanned_changes_) return std::nullopt;  // as at the last scan
  scanned_changes_ = window_changes_;
  ++measure_scans_;
  if (!iteration_.length || launches_.empty()) {
    measure_wait_ = fmt::format("no iteration found yet ({} launches seen)", launches_.size());
    return std::nullopt;
  }
  std::size_t len = iteration_.length;
  // The window is in seq order: found by binary search, not a pass at every scan.
  const auto at =
      std::lower_bound(launches_.begin(), launches_.end(), iteration_.first_seq, seq_below);
  std::size_t start = launches_.size();
  if (at != launches_.end() && at->seq == iteration_.first_seq)
    start = static_cast<std::size_t>(at - launches_.begin());
  if (start == launches_.size()) {
    measure_wait_ = fmt::format("iteration of {} launches: its start left the window", len);
    return std::nullopt;
  }
  measure_wait_ = fmt::format(
      "iteration of {} launches ({}): no complete period after the last "
      "one measured yet",
      len, iteration_.source);
  bool described = false;
  // The newest complete period with (nearly) every launch timed: while a plan is followed only
  // one iteration in measure_every is, and timings arrive a little after their launches.
  // The launch after the period must have arrived too: the period's length in seq numbers counts
  // up to it (allocations and frees after its last launch belong to it), and without it a region
  // freed at the very end of the iteration would look alive across it, persistent. Periods up to
  // the last one measured are not taken again, and a scan looks at kMaxMeasureCandidates periods
  // at most: with every new record a scan runs, and a window of short periods none of which is
  // timed would otherwise cost a pass over the whole window at every tick.
  std::size_t candidates = 0;
  for (std::size_t s = start + len;; s -= len) {
    if (s < launches_.size() && measured_first_seq_ != ~0ull &&
        launches_[s].seq <= measured_first_seq_)
      break;
    if (s + len < launches_.size()) {
      if (++candidates > kMaxMeasureCandidates) break;
      std::size_t timed = 0;
      for (std::size_t i = s; i < s + len; ++i) timed += launches_[i].duration_ns != 0;
      const bool timed_enough = timed * 10 >= len * 9;
      if (timed_enough && start_recurs(s, len)) {
        MeasuredIteration m;
        build_iteration(s, s + len, device_bytes, &m);
        estimate_untimed(s, &m);
        m.token = ++measured_token_;
        measured_first_seq_ = launches_[s].seq;
        measure_wait_.clear();
        return m;
      }
      // Why the newest candidate is not taken (`gswapctl status`, gswapd's log).
      if (!described) {
        described = true;
        measure_wait_ =
            !timed_enough ? fmt::format(
                                "iteration of {} launches ({}): the newest complete period has {} "
                                "of them timed, 90% needed",
                                len, iteration_.source, timed)
                          : fmt::format(
                                "iteration of {} launches ({}): the newest complete period does "
                                "not start the way the next one does",
                                len, iteration_.source);
      }
    }
    if (s < len) break;
  }
  return std::nullopt;
}

void Client::on_alloc(std::uint64_t seq, std::uint32_t, std::uint64_t region, std::uint64_t base,
                      std::uint64_t bytes) {
  if (bytes > kMaxRegionBytes) {  // no GPU holds it: a trace could not say it
    ++counters_.regions_refused;
    warn_once(kWarnRegionBytes, fmt::format("regions of more than {} bytes are ignored ({} bytes)",
                                            kMaxRegionBytes, bytes));
    return;
  }
  auto [it, inserted] = regions_.try_emplace(region);
  if (inserted || it->second.free_seq) ++live_;
  it->second = RegionInfo{base, bytes, seq, std::nullopt, std::nullopt};
  if (live_ > limits_.max_regions)
    protocol_error_ = fmt::format("more than {} live regions", limits_.max_regions);
}

void Client::on_free(std::uint64_t seq, std::uint64_t region) {
  auto it = regions_.find(region);
  if (it == regions_.end() || it->second.free_seq) return;  // unknown: allocated before we met
  --live_;
  // No launch came since it was allocated: none of the window uses it, no trace needs it.
  if (launches_.empty() || launches_.back().seq < it->second.alloc_seq) {
    erase_region(it);
    return;
  }
  it->second.free_seq = seq;
  freed_.emplace_back(seq, region);
  prune_freed();
}

// The oldest freed regions go once no launch of the window can use them (freed before the oldest
// launch kept), or when more than kFreedPerLaunch per launch the window holds are kept: then
// older launches lose them in traces, the daemon nothing. Each freed region is looked at once
// here, so the cost per record stays constant whatever the window holds.
void Client::prune_freed() {
  const std::uint64_t oldest = launches_.empty() ? ~0ull : launches_.front().seq;
  const std::size_t most = kFreedPerLaunch * limits_.trace_launches;
  while (!freed_.empty()) {
    const auto [seq, id] = freed_.front();
    const bool unused = seq < oldest;
    if (!unused && freed_.size() <= most) break;
    freed_.pop_front();
    ++prune_visits_;
    auto it = regions_.find(id);
    if (it == regions_.end() || it->second.free_seq != seq) continue;  // dropped or reallocated
    if (!unused) {
      ++counters_.freed_regions_dropped;
      warn_once(kWarnFreedRegions,
                fmt::format("more than {} freed regions used by the launch window: the oldest are "
                            "dropped, and traces of older launches lose them",
                            most));
    }
    erase_region(it);
  }
}

void Client::erase_region(RegionMap::iterator it) {
  forget_name(region_names_, it->first);
  regions_.erase(it);
}

void Client::on_launch(std::uint64_t seq, std::uint32_t stream, std::uint64_t function_id,
                       const std::uint64_t* regions, std::uint32_t num_regions, bool truncated) {
  ++window_changes_;
  LaunchInfo l;
  l.seq = seq;
  l.stream = stream;
  l.function_id = function_id;
  l.regions.assign(regions, regions + num_regions);
  l.truncated = truncated;
  if (function_id == proto::kCopyFunction && seq == copy_seq_)
    l.link = static_cast<std::uint8_t>(copy_link_);
  if (!early_timings_.empty()) {
    auto t = early_timings_.find(seq);
    if (t != early_timings_.end()) {
      l.start_ns = t->second.first;
      l.duration_ns = t->second.second;
      early_timings_.erase(t);
    }
  }
  // The library sends each thread's records in order, but the threads' records interleave as
  // its channel drains them: a launch may come after one with a higher seq. The window stays in
  // seq order, which is the order of the calls. A launch is put back among the last
  // kMaxReorder at most (a drain's worth and more): a client whose seqs run backwards cannot make
  // each record cost a window's worth of moves.
  // A seq the window holds already, or one older than the last kMaxReorder launches, cannot be
  // put in order: the library numbers every call once and sends none that late; such a launch
  // is left out (with one warning), so that every trace the window makes has increasing seqs.
  if (launches_.empty() || launches_.back().seq < seq) {
    launches_.push_back(std::move(l));
  } else {
    const std::size_t back = std::min(launches_.size(), kMaxReorder);
    const auto first = launches_.end() - static_cast<std::ptrdiff_t>(back);
    auto at = std::upper_bound(first, launches_.end(), seq,
                               [](std::uint64_t s, const LaunchInfo& x) { return s < x.seq; });
    const bool repeated = at != launches_.begin() && std::prev(at)->seq == seq;
    const bool too_late = at == first && first != launches_.begin() && std::prev(first)->seq > seq;
    // What the insertion moves (a deque moves the shorter side), bounded per drain: a client
    // whose every launch goes thousands back would otherwise cost tens of millions of moves a
    // drain, on the loop that drains every client. The library's launches come at most a few
    // hundred out of order.
    const std::size_t moves =
        static_cast<std::size_t>(std::min(at - launches_.begin(), launches_.end() - at));
    const bool too_costly = reorder_moves_ + moves > kMaxReorderMoves;
    if (repeated || too_late || too_costly) {
      warn_once(kWarnLaunchSeq,
                fmt::format("launches whose seq the window holds already, that come after {} "
                            "later ones, or that would move more than {} launches in one drain, "
                            "are ignored (seq {})",
                            kMaxReorder, kMaxReorderMoves, seq));
      return;
    }
    reorder_moves_ += moves;
    launches_.insert(at, std::move(l));
  }
  while (launches_.size() > limits_.trace_launches) {
    dropped_before_seq_ = std::max(dropped_before_seq_, launches_.front().seq + 1);
    launches_.pop_front();
  }
  ++counters_.launches_seen;
  ++launches_since_detect_;
}

void Client::on_copy(std::uint64_t seq, std::uint32_t, std::uint64_t, std::uint64_t, std::uint64_t,
                     std::uint32_t link) {
  copy_seq_ = seq;
  copy_link_ = link;
}

void Client::on_eviction(std::uint64_t, std::uint64_t, std::uint64_t) {
  ++counters_.evictions;
}

void Client::on_restore(std::uint64_t, std::uint64_t, std::uint64_t, bool late) {
  ++counters_.restores;
  if (late) ++counters_.late_restores;
}

void Client::on_stall(std::uint64_t, std::uint64_t ns) {
  ++counters_.stall_events;
  counters_.stall_ns_events += ns;
}

void Client::on_swap_done(std::uint64_t region, std::uint64_t bytes, std::uint64_t start_ns,
                          std::uint64_t end_ns, std::uint64_t flags) {
  if (limits_.timeline_records == 0) return;
  if (swaps_.size() >= limits_.timeline_records) swaps_.pop_front();
  swaps_.push_back(SwapRecord{region, bytes, start_ns, end_ns, (flags & proto::kSwapToDevice) != 0,
                              (flags & proto::kSwapPlanned) != 0});
}

void Client::on_recomputable(std::uint64_t region, std::uint64_t cost_ns,
                             const std::uint64_t* sources, std::uint32_t num_sources) {
  auto it = regions_.find(region);
  if (it == regions_.end() || it->second.free_seq) return;  // not live: nothing to plan
  if (cost_ns > kMaxTimeNs) {  // a trace could not say it: taken as unknown
    warn_once(kWarnRecomputeCost, fmt::format("recomputation costs above {} ns are ignored ({} ns)",
                                              kMaxTimeNs, cost_ns));
    cost_ns = 0;
  }
  RecomputeInfo& info = it->second.recompute.emplace();
  info.cost_ns = cost_ns;
  info.sources.assign(sources, sources + num_sources);
}

void Client::on_not_recomputable(std::uint64_t region) {
  if (auto it = regions_.find(region); it != regions_.end() && !it->second.free_seq)
    it->second.recompute.reset();
}

void Client::on_recomputed(std::uint64_t region, std::uint64_t bytes, std::uint64_t start_ns,
                           std::uint64_t end_ns, bool failed) {
  ++counters_.recomputations;
  if (failed) ++counters_.recompute_failures;
  if (auto it = regions_.find(region); it != regions_.end() && it->second.recompute &&
                                       end_ns > start_ns && end_ns - start_ns <= kMaxTimeNs)
    it->second.recompute->measured_ns = end_ns - start_ns;
  if (limits_.timeline_records == 0) return;
  if (recomputations_.size() >= limits_.timeline_records) recomputations_.pop_front();
  recomputations_.push_back(RecomputeRecord{region, bytes, start_ns, end_ns, failed});
}

void Client::on_clock(std::uint64_t device_ns, std::uint64_t host_ns) {
  has_clock_ = true;
  host_minus_device_ = static_cast<std::int64_t>(host_ns - device_ns);  // wraps: kept as given
}

void Client::on_host_wait(std::uint64_t seq, std::uint64_t start_ns, std::uint64_t ns,
                          std::uint64_t thread) {
  if (limits_.timeline_records == 0) return;
  if (host_waits_.size() >= limits_.timeline_records) host_waits_.pop_front();
  host_waits_.push_back(HostWait{seq, start_ns, ns, thread});
}

void Client::on_name(NameKind kind, std::uint64_t id, std::uint32_t chunk, const char* bytes32,
                     bool last) {
  bool kernel = kind == NameKind::kKernel;
  auto& names = kernel ? kernel_names_ : region_names_;
  auto& partial = kernel ? partial_kernel_names_ : partial_region_names_;
  // The library names a region once it has announced it: a name for a region gswapd does not
  // keep (never allocated, or dropped since) would never be used. A kernel is named before its
  // first launch, so its id cannot be checked.
  if (!kernel && !regions_.count(id)) return;
  if (chunk == 0) {
    if (partial.size() >= kMaxPartialNames && !partial.count(id)) partial.clear();
    partial[id].clear();
  }
  auto it = partial.find(id);
  if (it == partial.end()) return;  // chunks out of order: the last whole name stays
  std::string& n = it->second;
  if (n.size() != std::size_t{chunk} * 32) {
    partial.erase(it);
    return;
  }
  n.append(bytes32, strnlen(bytes32, 32));
  if (last) {
    keep_name(names, id, printable_text(n));
    partial.erase(it);
  } else if (n.size() != std::size_t{chunk + 1} * 32) {
    partial.erase(it);
  }
}

// Names are kept up to limits_.max_name_bytes in all; past that, new ones are ignored.
void Client::keep_name(NameMap& names, std::uint64_t id, std::string text) {
  auto it = names.find(id);
  const std::size_t old = it == names.end() ? 0 : it->second.size() + kNameOverhead;
  const std::size_t cost = text.size() + kNameOverhead;
  if (name_bytes_ - old + cost > limits_.max_name_bytes) {
    ++counters_.names_refused;
    warn_once(kWarnNames, fmt::format("names beyond {} bytes are ignored", limits_.max_name_bytes));
    return;
  }
  name_bytes_ = name_bytes_ - old + cost;
  if (it == names.end())
    names.emplace(id, std::move(text));
  else
    it->second = std::move(text);
}

void Client::forget_name(NameMap& names, std::uint64_t id) {
  auto it = names.find(id);
  if (it == names.end()) return;
  name_bytes_ -= it->second.size() + kNameOverhead;
  names.erase(it);
}

void Client::on_lateness(std::uint64_t generation, std::uint64_t entry, std::uint64_t late_ns,
                         bool missed) {
  ++counters_.lateness_reports;
  if (late_ns) ++counters_.late_reports;
  if (missed) ++counters_.missed_reports;
  // Reports for the generation before a republish still concern the same entries (the feedback
  // rule only moves triggers).
  std::uint64_t mine = generation_ & 0x3fffffffull;
  if (generation != mine && generation != ((generation_ - 1) & 0x3fffffffull)) return;
  if (entry >= lateness_.size()) return;
  EntryLateness& l = lateness_[entry];
  ++l.reports;
  if (late_ns) ++l.late;
  if (missed) ++l.missed;
  l.late_ns = std::max(l.late_ns, late_ns);
}

void Client::on_divergence(std::uint64_t generation, std::uint64_t, std::uint64_t, std::uint64_t) {
  ++counters_.divergences;
  if ((generation & 0x3fffffffull) == (generation_ & 0x3fffffffull)) ++divergences_since_plan_;
}

void Client::on_gpu_timing(std::uint64_t seq, std::uint64_t start_ns, std::uint64_t duration_ns) {
  if (duration_ns > kMaxTimeNs) {  // a trace could not say it (a broken clock, or hostile)
    ++counters_.timings_refused;
    warn_once(kWarnTimings, fmt::format("GPU timings longer than {} ns are ignored ({} ns)",
                                        kMaxTimeNs, duration_ns));
    return;
  }
  ++counters_.timings;
  // Launches are in seq order: a binary search finds the one timed.
  auto it = std::lower_bound(launches_.begin(), launches_.end(), seq, seq_below);
  if (it != launches_.end() && it->seq == seq) {
    it->start_ns = start_ns;
    it->duration_ns = duration_ns;
    ++window_changes_;
    return;
  }
  // The launch has not come yet: the library's threads drain into the channel one after another,
  // so the swapper's timing of a short kernel can overtake the launch record another thread
  // staged before it. It waits here for its launch (the oldest go first when too many wait).
  if (!launches_.empty() && seq < launches_.front().seq) return;  // left the window
  early_timings_[seq] = {start_ns, duration_ns};
  if (early_timings_.size() > kMaxEarlyTimings) early_timings_.erase(early_timings_.begin());
}

void Client::on_iteration_mark(std::uint64_t seq) {
  ++counters_.iteration_marks;
  ++window_changes_;
  marks_.push_back(seq);
  while (marks_.size() > 4) marks_.pop_front();
}

}  // namespace gswap::daemon
