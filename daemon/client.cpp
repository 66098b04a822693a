// client.cpp: one library client as gswapd sees it (see client.h for the threading rules).
#include "daemon/client.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <new>

#include <fmt/format.h>

#include "policy/iteration.h"
#include "proto/seqlock.h"

namespace gswap::daemon {

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
    : fd_(fd), pid_(pid), uid_(uid), exe_(std::move(exe)), limits_(limits) {
  connected_at_ = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
}

Client::~Client() {
  if (fd_ >= 0) close(fd_);
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
  if (proto::seqlock_read(&status_->seq, status_->words, words, proto::kStatusWords))
    std::memcpy(&counters_.status, words, sizeof words);
  maybe_detect_iteration();
  return true;
}

void Client::publish_plan(std::uint64_t budget, const std::vector<proto::PlanEntry>& entries) {
  budget_ = budget;
  plan_.assign(entries.begin(),
               entries.begin() + std::min<std::size_t>(entries.size(), limits_.plan_capacity));
  ++generation_;
  std::vector<std::uint64_t> words(proto::kPlanHeaderWords + plan_.size() * 4);
  proto::PlanHeader ph{};
  ph.generation = generation_;
  ph.budget_bytes = budget;
  ph.mode = static_cast<std::uint32_t>(iteration_.length ? proto::PlanMode::kMeasured
                                                         : proto::PlanMode::kPassive);
  ph.num_entries = static_cast<std::uint32_t>(plan_.size());
  ph.iteration_length = iteration_.length;
  ph.iteration_first_seq = iteration_.first_seq;
  std::memcpy(words.data(), &ph, sizeof ph);
  if (!plan_.empty())
    std::memcpy(words.data() + proto::kPlanHeaderWords, plan_.data(),
                plan_.size() * sizeof(proto::PlanEntry));
  auto* area = reinterpret_cast<std::atomic<std::uint64_t>*>(plan_block_ + 1);
  proto::seqlock_write(&plan_block_->seq, area, words.data(), words.size());
}

void Client::maybe_detect_iteration() {
  // Library iteration marks are authoritative when present.
  if (marks_.size() >= 2) {
    std::uint64_t first = marks_[marks_.size() - 2], next = marks_.back();
    std::uint64_t count = 0, last = first;
    for (const LaunchInfo& l : launches_)
      if (l.seq >= first && l.seq < next) ++count, last = l.seq;
    if (count > 0) iteration_ = {count, first, last, 1.0, "marks"};
    return;
  }
  // Detection costs about the window's length; running it after every window/8 new launches (at
  // least 256) keeps the cost per launch constant while short runs are still detected early.
  std::size_t every = std::max<std::size_t>(256, launches_.size() / 8);
  if (launches_since_detect_ < every || launches_.size() < 8) return;
  launches_since_detect_ = 0;
  std::vector<std::uint64_t> symbols;
  symbols.reserve(launches_.size());
  for (const LaunchInfo& l : launches_) symbols.push_back(l.function_id);
  policy::PeriodOptions opt;
  opt.max_period = std::max<std::size_t>(opt.min_period, symbols.size() / 2);
  std::optional<policy::PeriodResult> r = policy::detect_iteration_period(symbols, opt);
  if (!r || r->period == 0 || r->phase + r->period > launches_.size()) return;
  iteration_ = {r->period, launches_[r->phase].seq, launches_[r->phase + r->period - 1].seq,
                r->match, "detected"};
}

policy::Trace Client::last_iteration_trace(std::uint64_t device_bytes) const {
  policy::Trace t;
  t.device.capacity_bytes = device_bytes;
  // Not measured by the daemon yet: the PCIe Gen4 x16 pinned figure from the design brief.
  t.device.h2d_bytes_per_s = 25e9;
  t.device.d2h_bytes_per_s = 25e9;
  if (!iteration_.length) return t;
  std::unordered_map<std::uint64_t, bool> used;
  std::uint64_t t0 = 0;
  bool have_t0 = false;
  for (const LaunchInfo& l : launches_) {
    if (l.seq < iteration_.first_seq || l.seq > iteration_.last_seq) continue;
    policy::Launch pl;
    pl.seq = l.seq;
    pl.stream = l.stream;
    pl.kernel = fmt::format("{:016x}", l.function_id);
    if (l.duration_ns) {
      if (!have_t0) t0 = l.start_ns, have_t0 = true;
      pl.start_us = l.start_ns >= t0 ? static_cast<double>(l.start_ns - t0) / 1e3 : 0;
      pl.dur_us = static_cast<double>(l.duration_ns) / 1e3;
    }
    for (std::uint64_t id : l.regions) {
      if (!regions_.count(id)) continue;  // allocated before this daemon knew the client
      if (std::find(pl.regions.begin(), pl.regions.end(), id) == pl.regions.end())
        pl.regions.push_back(id);
      used[id] = true;
    }
    t.launches.push_back(std::move(pl));
  }
  for (const auto& [id, info] : regions_) {
    if (!used.count(id)) continue;
    policy::Region r;
    r.id = id;
    r.bytes = info.bytes;
    r.alloc_seq = info.alloc_seq;
    r.free_seq = info.free_seq;
    t.regions.push_back(r);
  }
  std::sort(t.regions.begin(), t.regions.end(),
            [](const policy::Region& a, const policy::Region& b) { return a.id < b.id; });
  if (!t.launches.empty()) t.iterations.push_back({t.launches.front().seq, t.launches.back().seq});
  return t;
}

void Client::on_alloc(std::uint64_t seq, std::uint32_t, std::uint64_t region, std::uint64_t base,
                      std::uint64_t bytes) {
  auto [it, inserted] = regions_.try_emplace(region);
  if (inserted || it->second.free_seq) ++live_;
  it->second = RegionInfo{base, bytes, seq, std::nullopt};
  if (live_ > limits_.max_regions)
    protocol_error_ = fmt::format("more than {} live regions", limits_.max_regions);
  if (regions_.size() > 2 * live_ + 4096) prune_freed();
}

void Client::on_free(std::uint64_t seq, std::uint64_t region) {
  auto it = regions_.find(region);
  if (it == regions_.end() || it->second.free_seq) return;  // unknown: allocated before we met
  it->second.free_seq = seq;
  --live_;
}

void Client::prune_freed() {
  std::uint64_t oldest = launches_.empty() ? ~0ull : launches_.front().seq;
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->second.free_seq && *it->second.free_seq < oldest)
      it = regions_.erase(it);
    else
      ++it;
  }
}

void Client::on_launch(std::uint64_t seq, std::uint32_t stream, std::uint64_t function_id,
                       const std::uint64_t* regions, std::uint32_t num_regions, bool truncated) {
  LaunchInfo l;
  l.seq = seq;
  l.stream = stream;
  l.function_id = function_id;
  l.regions.assign(regions, regions + num_regions);
  l.truncated = truncated;
  launches_.push_back(std::move(l));
  while (launches_.size() > limits_.trace_launches) launches_.pop_front();
  ++counters_.launches_seen;
  ++launches_since_detect_;
}

void Client::on_copy(std::uint64_t, std::uint32_t, std::uint64_t, std::uint64_t, std::uint64_t) {}

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

void Client::on_gpu_timing(std::uint64_t seq, std::uint64_t start_ns, std::uint64_t duration_ns) {
  // Timings arrive shortly after their launch: search the recent end of the window.
  std::size_t checked = 0;
  for (auto it = launches_.rbegin(); it != launches_.rend() && checked < 4096; ++it, ++checked) {
    if (it->seq == seq) {
      it->start_ns = start_ns;
      it->duration_ns = duration_ns;
      return;
    }
  }
}

void Client::on_iteration_mark(std::uint64_t seq) {
  ++counters_.iteration_marks;
  marks_.push_back(seq);
  while (marks_.size() > 4) marks_.pop_front();
}

}  // namespace gswap::daemon
