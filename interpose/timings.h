// timings.h: what gswap measures on the device with events: kernel durations while gswapd asks
// for them, how long a stream waited for a restore (device-side stall, and the lateness of a
// planned restore), and the bandwidth of gswap's own copies.
//
// Application threads take timing events from a pool and push what they recorded into bounded
// lock-free queues; nothing on their side blocks, allocates or locks (an empty pool or a full
// queue skips the measurement and counts it). The swapper thread creates the events, collects
// completed measurements (cuEventElapsedTime) and hands the results to telemetry. Kernel
// durations can come from another source instead (ExternalTimings below: CUPTI,
// cupti_timing.h); they are put on the same device-time axis.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "interpose/command_queue.h"
#include "interpose/device.h"
#include "interpose/region.h"

namespace gswap::interpose {

class Timings {
 public:
  static constexpr std::uint32_t kPoolSize = 8192;

  explicit Timings(Device& device) : dev_(device) {}
  Timings(const Timings&) = delete;
  Timings& operator=(const Timings&) = delete;

  // --- any thread (lock-free) ------------------------------------------------------------------
  Device::Event take();             // a timing event, or nullptr when the pool is empty
  void give_back(Device::Event e);  // an event that was taken and not used

  // A kernel's start and end events (recorded around its enqueue on its stream); `name` is kept
  // by the caller for the process's lifetime (the layout cache's copy).
  bool push_kernel(std::uint64_t seq, std::uint32_t stream, const char* name, Device::Event start,
                   Device::Event end);
  // A stream waited for r's restore after `back` (recorded on that stream just before the wait).
  // `tag` is r's plan tag at that moment (a planned restore's entry), 0 for a demand restore.
  bool push_wait(Region* r, std::uint64_t restores_issued, Device::Event back, std::uint64_t tag);
  // A recomputation of `region` (recompute.h) between two events on its stream (either may be
  // nullptr: reported untimed).
  bool push_recompute(std::uint64_t region, std::uint64_t bytes, bool failed, Device::Event start,
                      Device::Event end);
  // A measured access timed by another source (ExternalTimings): its stream and name, for the
  // timeline, kept in a slot per seq until the times come (a slot reused first loses them).
  void note_access(std::uint64_t seq, std::uint32_t stream, const char* name);
  void count_skips(std::uint64_t n) { skipped_.fetch_add(n, std::memory_order_relaxed); }

  // --- swapper thread ----------------------------------------------------------------------------
  // Tops the pool up (creates events) and collects completed measurements. Returns true when it
  // did something.
  // Device times are nanoseconds on one axis: from a base event the swapper records once on one of
  // gswap's streams (`stream`), plus an offset that keeps them positive.
  struct Sink {
    virtual ~Sink() = default;
    virtual void kernel(std::uint64_t seq, std::uint32_t stream, const char* name,
                        std::uint64_t start_ns, std::uint64_t dur_ns) = 0;
    // A stream waited late_ns for region's restore, which ended at end_ns (0: it had landed in
    // time).
    virtual void waited(std::uint64_t tag, std::uint64_t region, std::uint64_t late_ns,
                        std::uint64_t end_ns) = 0;
    // A recomputation's device time (start_ns == end_ns == 0: not measured).
    virtual void recomputed(std::uint64_t region, std::uint64_t bytes, std::uint64_t start_ns,
                            std::uint64_t end_ns, bool failed) = 0;
  };
  bool collect(Sink& sink, Device::Stream stream);
  // A completed swap copy of `bytes` between two timing events (swapper thread): counts toward
  // the link's bandwidth; *start_ns/*end_ns get its device times (false when not known).
  bool copy_done(bool to_device, std::uint64_t bytes, Device::Event start, Device::Event end,
                 std::uint64_t* start_ns, std::uint64_t* end_ns);
  // A measured access's host-clock (CLOCK_MONOTONIC) start and end from another source, to the
  // sink on the device axis (swapper thread).
  void external_access(Sink& sink, std::uint64_t seq, std::uint64_t start_host_ns,
                       std::uint64_t end_host_ns);
  void copy_done_ns(bool to_device, std::uint64_t bytes, std::uint64_t ns);

  // Records the base of the device-time axis on `stream` (one of gswap's own, idle) and waits
  // for it: once, at device set-up.
  void ensure_base(Device::Stream stream);
  // The base's pair of times (device axis ns, host CLOCK_MONOTONIC ns); false before the base.
  bool clock_pair(std::uint64_t* device_ns, std::uint64_t* host_ns) const;
  // A host time on the device axis (0 before the base).
  std::uint64_t host_to_device(std::uint64_t host_ns) const;

  std::uint64_t h2d_bytes_per_s() const { return h2d_bps_.load(std::memory_order_relaxed); }
  std::uint64_t d2h_bytes_per_s() const { return d2h_bps_.load(std::memory_order_relaxed); }
  std::uint64_t skipped() const { return skipped_.load(std::memory_order_relaxed); }

 private:
  struct Kernel {
    std::uint64_t seq;
    std::uint32_t stream;
    const char* name;
    Device::Event start, end;
  };
  bool axis(Device::Event e, std::uint64_t* ns);
  struct Wait {
    Region* region;
    std::uint64_t restores_issued;
    Device::Event back;
    std::uint64_t tag;
  };

  Device& dev_;
  // The pool: a bounded lock-free queue of ready events.
  CommandQueue<Device::Event, kPoolSize> pool_;
  std::atomic<std::uint32_t> pooled_{0};
  std::uint32_t created_ = 0;  // swapper
  CommandQueue<Kernel, 4096> kernels_;
  CommandQueue<Wait, 1024> waits_;
  struct Recomputed {
    std::uint64_t region, bytes;
    bool failed;
    Device::Event start, end;
  };
  CommandQueue<Recomputed, 1024> recomputes_;
  Recomputed pending_recomputes_[64];
  unsigned num_recomputes_ = 0;
  // Swapper-owned: measurements popped but not complete yet (streams complete out of order).
  static constexpr unsigned kPending = 512;
  Kernel pending_kernels_[kPending];
  unsigned num_kernels_ = 0;
  Wait pending_waits_[kPending];
  unsigned num_waits_ = 0;
  Device::Event base_ = nullptr;                // device times are counted from it (swapper thread)
  std::atomic<std::uint64_t> base_host_ns_{0};  // the host time at base_ (set once)
  std::atomic<std::uint64_t> h2d_bps_{0}, d2h_bps_{0};
  std::atomic<std::uint64_t> skipped_{0};
  // note_access's slots: written by launching threads, read by the swapper; `seq` is seq + 1 once
  // the other fields are written, 0 while a writer is in the slot.
  struct Noted {
    std::atomic<std::uint64_t> seq{0};
    std::atomic<std::uint32_t> stream{0};
    std::atomic<const char*> name{nullptr};
  };
  static constexpr std::size_t kNoted = 8192;
  Noted noted_[kNoted];
};

// Timings of measured accesses from a source other than events (cupti_timing.h), served by the
// swapper thread.
class ExternalTimings {
 public:
  virtual ~ExternalTimings() = default;
  // Once, on the swapper thread, with the context current: sets the source up (or decides not
  // to).
  virtual void start() = 0;
  // After every swapper step, without the residency mutex: hands completed measurements to
  // timings.external_access; true when it did something.
  virtual bool poll(Timings& timings, Timings::Sink& sink) = 0;
};

}  // namespace gswap::interpose
