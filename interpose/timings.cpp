// timings.cpp: the timing event pool and the collection of measurements (see timings.h).
#include "interpose/timings.h"

#include <algorithm>

#include "interpose/clock.h"
#include "interpose/telemetry.h"
#include "interpose/timeline.h"

namespace gswap::interpose {
namespace {
// Kernel start times are sent as nanoseconds since the first timed kernel plus this offset, so
// a launch on another stream that started a little earlier still gets a positive number; gswapd
// only uses differences.
constexpr double kStartOffsetNs = 1e12;
}  // namespace

Device::Event Timings::take() {
  Device::Event e = nullptr;
  if (!pool_.pop(&e)) {
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  pooled_.fetch_sub(1, std::memory_order_relaxed);
  return e;
}

void Timings::give_back(Device::Event e) {
  if (!e) return;
  if (pool_.push(e)) {
    pooled_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  dev_.event_destroy(e);  // cannot happen: no more events exist than the pool holds
}

bool Timings::push_kernel(std::uint64_t seq, std::uint32_t stream, const char* name,
                          Device::Event start, Device::Event end) {
  if (kernels_.push(Kernel{seq, stream, name, start, end})) return true;
  skipped_.fetch_add(1, std::memory_order_relaxed);
  give_back(start);
  give_back(end);
  return false;
}

bool Timings::push_recompute(std::uint64_t region, std::uint64_t bytes, bool failed,
                             Device::Event start, Device::Event end) {
  if (recomputes_.push(Recomputed{region, bytes, failed, start, end})) return true;
  skipped_.fetch_add(1, std::memory_order_relaxed);
  give_back(start);
  give_back(end);
  return false;
}

bool Timings::push_wait(Region* r, std::uint64_t restores_issued, Device::Event back,
                        std::uint64_t tag) {
  if (waits_.push(Wait{r, restores_issued, back, tag})) return true;
  skipped_.fetch_add(1, std::memory_order_relaxed);
  give_back(back);
  return false;
}

void Timings::note_access(std::uint64_t seq, std::uint32_t stream, const char* name) {
  Noted& n = noted_[seq % kNoted];
  n.seq.store(0, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  n.stream.store(stream, std::memory_order_relaxed);
  n.name.store(name, std::memory_order_relaxed);
  n.seq.store(seq + 1, std::memory_order_release);
}

void Timings::external_access(Sink& sink, std::uint64_t seq, std::uint64_t start_host_ns,
                              std::uint64_t end_host_ns) {
  std::uint64_t start = host_to_device(start_host_ns);
  if (!start) {  // before the axis had its base: nothing to place it on
    skipped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  const Noted& n = noted_[seq % kNoted];
  std::uint32_t stream = 0;
  const char* name = nullptr;
  if (n.seq.load(std::memory_order_acquire) == seq + 1) {
    stream = n.stream.load(std::memory_order_relaxed);
    name = n.name.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (n.seq.load(std::memory_order_relaxed) != seq + 1) stream = 0, name = nullptr;
  }
  sink.kernel(seq, stream, name, start,
              end_host_ns > start_host_ns ? end_host_ns - start_host_ns : 1);
}

// The base of the device axis: an event recorded on one of gswap's own streams, which has nothing
// queued before it the first time, so it completes at once; the host time that corresponds to it
// goes to the timeline so host and device records share an axis.
void Timings::ensure_base(Device::Stream stream) {
  if (base_ || !stream) return;
  Device::Event e = nullptr;
  if (dev_.event_create(&e, true) != CUDA_SUCCESS) return;
  if (dev_.record(e, stream) != CUDA_SUCCESS || dev_.synchronize(e) != CUDA_SUCCESS) {
    dev_.event_destroy(e);
    return;
  }
  base_ = e;
  std::uint64_t host = monotonic_ns();
  base_host_ns_.store(host, std::memory_order_release);
  timeline::align(static_cast<std::uint64_t>(kStartOffsetNs), host);
  telemetry::clock(static_cast<std::uint64_t>(kStartOffsetNs), host);
}

bool Timings::clock_pair(std::uint64_t* device_ns, std::uint64_t* host_ns) const {
  std::uint64_t host = base_host_ns_.load(std::memory_order_acquire);
  if (!host) return false;
  *device_ns = static_cast<std::uint64_t>(kStartOffsetNs);
  *host_ns = host;
  return true;
}

std::uint64_t Timings::host_to_device(std::uint64_t host_ns) const {
  std::uint64_t host = base_host_ns_.load(std::memory_order_acquire);
  if (!host) return 0;
  return static_cast<std::uint64_t>(static_cast<std::int64_t>(host_ns) -
                                    static_cast<std::int64_t>(host) +
                                    static_cast<std::int64_t>(kStartOffsetNs));
}

bool Timings::axis(Device::Event e, std::uint64_t* ns) {
  float ms = 0;
  if (!base_ || !e || dev_.elapsed(base_, e, &ms) != CUDA_SUCCESS) return false;
  *ns = static_cast<std::uint64_t>(std::max(0.0, kStartOffsetNs + static_cast<double>(ms) * 1e6));
  return true;
}

bool Timings::collect(Sink& sink, Device::Stream stream) {
  bool did = false;
  ensure_base(stream);
  // Keep about half the pool ready: launches in a measured iteration take two each.
  while (created_ < kPoolSize && pooled_.load(std::memory_order_relaxed) < kPoolSize / 2) {
    Device::Event e = nullptr;
    if (dev_.event_create(&e, true) != CUDA_SUCCESS) break;
    ++created_;
    give_back(e);
    did = true;
  }
  // Kernels.
  Kernel k;
  while (num_kernels_ < kPending && kernels_.pop(&k)) pending_kernels_[num_kernels_++] = k;
  for (unsigned i = 0; i < num_kernels_;) {
    Kernel& p = pending_kernels_[i];
    if (dev_.query(p.end) != CUDA_SUCCESS || dev_.query(p.start) != CUDA_SUCCESS) {
      ++i;
      continue;
    }
    float dur_ms = 0;
    std::uint64_t start_ns = 0;
    // At least 1 ns: a measured access shorter than the events' resolution is still measured
    // (gswapd takes a zero duration for one never timed).
    if (axis(p.start, &start_ns) && dev_.elapsed(p.start, p.end, &dur_ms) == CUDA_SUCCESS)
      sink.kernel(
          p.seq, p.stream, p.name, start_ns,
          std::max<std::uint64_t>(1, static_cast<std::uint64_t>(std::max(0.0f, dur_ms) * 1e6f)));
    give_back(p.start);
    give_back(p.end);
    pending_kernels_[i] = pending_kernels_[--num_kernels_];
    did = true;
  }
  // Recomputations.
  Recomputed rc;
  while (num_recomputes_ < 64 && recomputes_.pop(&rc)) pending_recomputes_[num_recomputes_++] = rc;
  for (unsigned i = 0; i < num_recomputes_;) {
    Recomputed& p = pending_recomputes_[i];
    bool timed = p.start && p.end;
    if (timed && (dev_.query(p.end) != CUDA_SUCCESS || dev_.query(p.start) != CUDA_SUCCESS)) {
      ++i;
      continue;
    }
    std::uint64_t s0 = 0, s1 = 0;
    if (!timed || !axis(p.start, &s0) || !axis(p.end, &s1) || s1 < s0) s0 = s1 = 0;
    sink.recomputed(p.region, p.bytes, s0, s1, p.failed);
    give_back(p.start);
    give_back(p.end);
    pending_recomputes_[i] = pending_recomputes_[--num_recomputes_];
    did = true;
  }
  // Waits for restores: late by how long the restore ended after the stream got there.
  Wait w;
  while (num_waits_ < kPending && waits_.pop(&w)) pending_waits_[num_waits_++] = w;
  for (unsigned i = 0; i < num_waits_;) {
    Wait& p = pending_waits_[i];
    bool stale = p.region->restores_issued != p.restores_issued;  // re-recorded since
    if (!stale && (dev_.query(p.back) != CUDA_SUCCESS ||
                   dev_.query(p.region->restore_event) != CUDA_SUCCESS)) {
      ++i;
      continue;
    }
    float ms = 0;
    std::uint64_t end_ns = 0;
    if (!stale && dev_.elapsed(p.back, p.region->restore_event, &ms) == CUDA_SUCCESS) {
      axis(p.region->restore_event, &end_ns);
      sink.waited(p.tag, p.region->id,
                  ms > 0 ? static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6) : 0, end_ns);
    }
    give_back(p.back);
    pending_waits_[i] = pending_waits_[--num_waits_];
    did = true;
  }
  return did;
}

bool Timings::copy_done(bool to_device, std::uint64_t bytes, Device::Event start, Device::Event end,
                        std::uint64_t* start_ns, std::uint64_t* end_ns) {
  float ms = 0;
  if (!start || !end || dev_.elapsed(start, end, &ms) != CUDA_SUCCESS || ms < 0) return false;
  copy_done_ns(to_device, bytes, static_cast<std::uint64_t>(static_cast<double>(ms) * 1e6));
  return axis(start, start_ns) && axis(end, end_ns);
}

void Timings::copy_done_ns(bool to_device, std::uint64_t bytes, std::uint64_t ns) {
  // Copies below 1 MiB say more about launch latency than about the link.
  if (ns == 0 || bytes < (1u << 20)) return;
  double bps = static_cast<double>(bytes) * 1e9 / static_cast<double>(ns);
  std::atomic<std::uint64_t>& v = to_device ? h2d_bps_ : d2h_bps_;
  double old = static_cast<double>(v.load(std::memory_order_relaxed));
  // A moving average: recent copies count most, one odd copy does not swing the figure.
  double next = old == 0 ? bps : 0.8 * old + 0.2 * bps;
  v.store(static_cast<std::uint64_t>(next), std::memory_order_relaxed);
}

}  // namespace gswap::interpose
