// capture_gate.h: keeps gswap's own work out of CUDA stream captures (fact 8).
//
// While a stream captures in global mode, an event recorded on a capturing stream joins gswap's
// streams to the capture, and synchronisation or allocation from any thread invalidates it. So:
//   - gswap touches a stream that is not its own (records an event on it, to order a swap-out or a
//     free after the application's work) only inside a ForeignStreams scope, which holds the gate
//     shared and is refused while any capture is on;
//   - cuStreamBeginCapture takes the gate exclusively and counts the capture *before* the real
//     call, so no foreign-stream operation is half done when a capture starts;
//   - cuStreamDestroy takes it exclusively too, so a stream handle never dies under a record.
// What gswap must still do during a capture (restore a region a captured call needs) runs on its
// own streams, in relaxed capture mode (Device::relax_capture_mode), with host waits.
//
// Lock order: the residency mutex may be held when taking the gate shared; the exclusive holders
// (capture begin, stream destroy) never take the residency mutex while holding it.
#pragma once

#include <atomic>
#include <mutex>
#include <shared_mutex>

namespace gswap::interpose {

class CaptureGate {
 public:
  explicit CaptureGate(std::atomic<int>& capturing) : capturing_(capturing) {}

  // cuStreamBeginCapture: call before the real call; end_capture() undoes it when that fails.
  void begin_capture() {
    std::unique_lock<std::shared_mutex> lock(gate_);
    capturing_.fetch_add(1, std::memory_order_seq_cst);
  }
  // Returns true when this was the last capture.
  bool end_capture() {
    int prev = capturing_.load(std::memory_order_relaxed);
    while (prev > 0 &&
           !capturing_.compare_exchange_weak(prev, prev - 1, std::memory_order_seq_cst)) {
    }
    return prev == 1;
  }
  bool capturing() const { return capturing_.load(std::memory_order_seq_cst) > 0; }

  // Exclusive section for cuStreamDestroy.
  std::unique_lock<std::shared_mutex> exclusive() {
    return std::unique_lock<std::shared_mutex>(gate_);
  }

  // A scope in which events may be recorded on application streams; ok() is false (and nothing
  // may be recorded) while a capture is on.
  class ForeignStreams {
   public:
    explicit ForeignStreams(CaptureGate& g) : lock_(g.gate_), ok_(!g.capturing()) {}
    // Never waits (the launch path): not ok() either while an exclusive holder has the gate.
    ForeignStreams(CaptureGate& g, std::try_to_lock_t)
        : lock_(g.gate_, std::try_to_lock), ok_(lock_.owns_lock() && !g.capturing()) {}
    bool ok() const { return ok_; }

   private:
    std::shared_lock<std::shared_mutex> lock_;
    bool ok_;
  };

 private:
  std::atomic<int>& capturing_;
  std::shared_mutex gate_;
};

}  // namespace gswap::interpose
