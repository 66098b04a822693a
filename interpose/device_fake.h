// device_fake.h: the device contract (device.h) on host memory, for residency_test.
//
// Physical memory is a byte vector per handle; mappings tie a reserved address range to a handle,
// so a copy from an unmapped range fails as a GPU fault would. Streams are FIFO queues of
// operations (copies, event records, waits). In automatic mode every queue runs as soon as
// something is enqueued; in manual mode nothing runs until run() (or step()), so tests can look
// at swap-outs and restores while they are in flight. Any operation can be made to fail on its
// Nth next call (fail()), with no side effect, like SIMCUDA_FAIL on the simulated driver.
//
// Thread-safe (one mutex), so a residency swapper thread may use it too.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/device.h"

namespace gswap::interpose {

class FakeDevice final : public Device {
 public:
  static constexpr std::uint64_t kVaBase = 0x100000000000ull;

  explicit FakeDevice(std::uint64_t granularity = 64 << 10) : gran_(granularity) {}

  // --- test controls -------------------------------------------------------------------------
  void set_manual(bool manual) {
    std::lock_guard<std::mutex> l(m_);
    manual_ = manual;
    if (!manual_) run_locked();
  }
  // Runs the queues until nothing more can run. Returns the number of operations executed.
  int run() {
    std::lock_guard<std::mutex> l(m_);
    return run_locked();
  }
  // The `nth` next call (1: the next) of `op` ("copy_d2h", "copy_h2d", "map", "unmap", "create",
  // "record", "wait", "host_alloc", "query") fails with `code`.
  void fail(const std::string& op, int nth, CUresult code = CUDA_ERROR_UNKNOWN) {
    std::lock_guard<std::mutex> l(m_);
    failures_[op] = {nth, code};
  }
  // Address reservations larger than this fail (the residency halves its request until one fits).
  void cap_reserve(std::uint64_t bytes) {
    std::lock_guard<std::mutex> l(m_);
    reserve_cap_ = bytes;
  }
  void set_capturing(Stream s, bool on) {
    std::lock_guard<std::mutex> l(m_);
    capturing_[s] = on;
  }
  // What unsafe_call() answers: a capture's refusal, or CUDA_SUCCESS (the default).
  void set_unsafe_answer(CUresult e) {
    std::lock_guard<std::mutex> l(m_);
    unsafe_answer_ = e;
  }
  // Bytes of the device at [va, va + n) through its mappings; false if any byte is unmapped.
  bool read(std::uint64_t va, void* out, std::uint64_t n) {
    std::lock_guard<std::mutex> l(m_);
    return access(va, n, [&](std::uint8_t* p, std::uint64_t off, std::uint64_t len) {
      std::memcpy(static_cast<std::uint8_t*>(out) + off, p, len);
    });
  }
  bool write(std::uint64_t va, const void* in, std::uint64_t n) {
    std::lock_guard<std::mutex> l(m_);
    return access(va, n, [&](std::uint8_t* p, std::uint64_t off, std::uint64_t len) {
      std::memcpy(p, static_cast<const std::uint8_t*>(in) + off, len);
    });
  }
  // A user stream the tests enqueue "kernels" on (here: nothing but event order).
  Stream user_stream() {
    Stream s = nullptr;
    stream_create(&s);
    return s;
  }
  // A long kernel enqueued on stream s now: s waits for an event of a new, held stream; it ends
  // with release_stream() of the stream returned.
  Stream long_kernel(Stream s) {
    Stream other = user_stream();
    hold(other);
    Event done = nullptr;
    event_create(&done, false);
    record(done, other);
    wait(s, done);
    return other;
  }
  // Holds stream s: nothing on it runs until release(s) (a long kernel).
  void hold(Stream s) {
    std::lock_guard<std::mutex> l(m_);
    held_[s] = true;
  }
  void release_stream(Stream s) {
    std::lock_guard<std::mutex> l(m_);
    held_[s] = false;
    if (!manual_) run_locked();
  }
  // Device addresses of the device-to-host copies run so far, in the order they ran.
  std::vector<std::uint64_t> d2h_run() {
    std::lock_guard<std::mutex> l(m_);
    return d2h_run_;
  }
  int count(const std::string& what) {
    std::lock_guard<std::mutex> l(m_);
    return counts_[what];
  }
  std::uint64_t handles_live() {
    std::lock_guard<std::mutex> l(m_);
    return handles_.size();
  }

  // --- Device --------------------------------------------------------------------------------
  CUresult push(CUcontext, bool* pushed) override {
    *pushed = false;
    return CUDA_SUCCESS;
  }
  void pop() override {}
  CUcontext current() override { return reinterpret_cast<CUcontext>(0xc0); }
  void relax_capture_mode(unsigned* previous) override { *previous = 0; }
  void restore_capture_mode(unsigned) override {}
  int ordinal() override { return 0; }
  CUresult granularity(std::uint64_t* bytes) override {
    *bytes = gran_;
    return CUDA_SUCCESS;
  }
  CUresult synchronize_context() override {
    std::lock_guard<std::mutex> l(m_);
    ++counts_["synchronize_context"];
    run_locked();
    return CUDA_SUCCESS;
  }
  CUresult reserve(std::uint64_t bytes, std::uint64_t, std::uint64_t* va) override {
    std::lock_guard<std::mutex> l(m_);
    if (bytes > reserve_cap_) return CUDA_ERROR_OUT_OF_MEMORY;
    *va = kVaBase;
    reserved_ = bytes;
    return CUDA_SUCCESS;
  }
  CUresult create(std::uint64_t bytes, Handle* out) override {
    std::lock_guard<std::mutex> l(m_);
    if (CUresult e = injected("create")) return e;
    if (capacity_ && used_ + bytes > capacity_) return CUDA_ERROR_OUT_OF_MEMORY;
    Handle h = next_handle_++;
    handles_[h].assign(bytes, 0xEE);  // not zero: a restore that forgets to copy shows
    used_ += bytes;
    ++counts_["create"];
    *out = h;
    return CUDA_SUCCESS;
  }
  CUresult release(Handle h) override {
    std::lock_guard<std::mutex> l(m_);
    auto it = handles_.find(h);
    if (it == handles_.end()) return CUDA_ERROR_INVALID_VALUE;
    used_ -= it->second.size();
    handles_.erase(it);
    return CUDA_SUCCESS;
  }
  CUresult map(std::uint64_t va, std::uint64_t bytes, Handle h) override {
    std::lock_guard<std::mutex> l(m_);
    if (CUresult e = injected("map")) return e;
    if (!handles_.count(h) || mappings_.count(va)) return CUDA_ERROR_INVALID_VALUE;
    mappings_[va] = {bytes, h};
    ++counts_["map"];
    return CUDA_SUCCESS;
  }
  CUresult unmap(std::uint64_t va, std::uint64_t bytes) override {
    std::lock_guard<std::mutex> l(m_);
    if (CUresult e = injected("unmap")) return e;
    auto it = mappings_.find(va);
    if (it == mappings_.end() || it->second.bytes != bytes) return CUDA_ERROR_INVALID_VALUE;
    mappings_.erase(it);
    ++counts_["unmap"];
    return CUDA_SUCCESS;
  }
  CUresult host_alloc(std::uint64_t bytes, void** out) override {
    std::lock_guard<std::mutex> l(m_);
    if (CUresult e = injected("host_alloc")) return e;
    *out = ::operator new(bytes);
    ++counts_["host_alloc"];
    return CUDA_SUCCESS;
  }
  CUresult host_free(void* p) override {
    std::lock_guard<std::mutex> l(m_);
    ::operator delete(p);
    ++counts_["host_free"];
    return CUDA_SUCCESS;
  }
  CUresult stream_create(Stream* out) override {
    std::lock_guard<std::mutex> l(m_);
    *out = reinterpret_cast<Stream>(next_stream_++);
    queues_[*out];
    return CUDA_SUCCESS;
  }
  CUresult event_create(Event* out, bool timing) override {
    std::lock_guard<std::mutex> l(m_);
    *out = reinterpret_cast<Event>(next_event_++);
    events_[*out].timing = timing;
    return CUDA_SUCCESS;
  }
  CUresult event_destroy(Event e) override {
    std::lock_guard<std::mutex> l(m_);
    events_.erase(e);
    return CUDA_SUCCESS;
  }
  CUresult record(Event e, Stream s) override {
    std::lock_guard<std::mutex> l(m_);
    if (CUresult err = injected("record")) return err;
    ++counts_["record"];
    if (s == legacy_stream()) ++counts_["record_legacy"];
    EventState& st = events_[e];
    ++st.recorded;
    enqueue(s, Op{Op::kRecord, e, st.recorded, 0, nullptr, 0});
    return CUDA_SUCCESS;
  }
  CUresult wait(Stream s, Event e) override {
    std::lock_guard<std::mutex> l(m_);
    if (CUresult err = injected("wait")) return err;
    enqueue(s, Op{Op::kWait, e, events_[e].recorded, 0, nullptr, 0});
    return CUDA_SUCCESS;
  }
  CUresult query(Event e) override {
    std::lock_guard<std::mutex> l(m_);
    if (CUresult err = injected("query")) return err;
    const EventState& st = events_[e];
    return st.completed >= st.recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  }
  CUresult synchronize(Event e) override {
    std::lock_guard<std::mutex> l(m_);
    run_locked();  // the host waits: everything that can run, runs
    const EventState& st = events_[e];
    return st.completed >= st.recorded ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
  }
  // Every timed interval lasts 1 ms; as CUDA, an event created without timing has none.
  CUresult elapsed(Event a, Event b, float* ms) override {
    std::lock_guard<std::mutex> l(m_);
    if (!events_[a].timing || !events_[b].timing) return CUDA_ERROR_INVALID_HANDLE;
    *ms = 1;
    return CUDA_SUCCESS;
  }
  CUresult is_capturing(Stream s, bool* capturing) override {
    std::lock_guard<std::mutex> l(m_);
    *capturing = capturing_[s];
    return CUDA_SUCCESS;
  }
  // Allowed, it waits for everything, as the driver's cuMemFree does.
  CUresult unsafe_call() override {
    std::lock_guard<std::mutex> l(m_);
    ++counts_["unsafe_call"];
    if (unsafe_answer_ == CUDA_SUCCESS) run_locked();
    return unsafe_answer_;
  }
  // Any address but 0 stands for memory the driver keeps (small allocations are not modelled).
  bool is_device_memory(std::uint64_t addr) override { return addr != 0; }
  CUresult copy_d2h(void* host, std::uint64_t dev, std::uint64_t bytes, Stream s) override {
    std::lock_guard<std::mutex> l(m_);
    if (CUresult e = injected("copy_d2h")) return e;
    ++counts_["copy_d2h"];
    enqueue(s, Op{Op::kD2H, nullptr, 0, dev, host, bytes});
    return CUDA_SUCCESS;
  }
  CUresult copy_h2d(std::uint64_t dev, const void* host, std::uint64_t bytes, Stream s) override {
    std::lock_guard<std::mutex> l(m_);
    if (CUresult e = injected("copy_h2d")) return e;
    ++counts_["copy_h2d"];
    enqueue(s, Op{Op::kH2D, nullptr, 0, dev, const_cast<void*>(host), bytes});
    return CUDA_SUCCESS;
  }

 private:
  struct Op {
    enum Type { kRecord, kWait, kD2H, kH2D } type;
    Event event;
    std::uint64_t event_gen;
    std::uint64_t dev;
    void* host;
    std::uint64_t bytes;
  };
  struct EventState {
    std::uint64_t recorded = 0, completed = 0;
    bool timing = false;
  };
  struct Mapping {
    std::uint64_t bytes;
    Handle handle;
  };
  struct Failure {
    int nth = 0;
    CUresult code = CUDA_SUCCESS;
  };

  CUresult injected(const std::string& op) {
    auto it = failures_.find(op);
    if (it == failures_.end() || it->second.nth <= 0) return CUDA_SUCCESS;
    if (--it->second.nth == 0) {
      ++counts_["failed_" + op];
      return it->second.code;
    }
    return CUDA_SUCCESS;
  }

  template <class Fn>
  bool access(std::uint64_t va, std::uint64_t n, Fn&& fn) {
    std::uint64_t done = 0;
    while (done < n) {
      auto it = mappings_.upper_bound(va + done);
      if (it == mappings_.begin()) return false;
      --it;
      std::uint64_t off = va + done - it->first;
      if (off >= it->second.bytes) return false;
      std::uint64_t len = std::min(n - done, it->second.bytes - off);
      fn(handles_[it->second.handle].data() + off, done, len);
      done += len;
    }
    return true;
  }

  void enqueue(Stream s, const Op& op) {
    queues_[s].push_back(op);
    if (!manual_) run_locked();
  }

  int run_locked() {
    int executed = 0;
    for (bool progress = true; progress;) {
      progress = false;
      for (auto& [s, q] : queues_) {
        while (!q.empty() && !held_[s]) {
          Op& op = q.front();
          if (op.type == Op::kWait && events_[op.event].completed < op.event_gen) break;
          if (op.type == Op::kRecord) {
            EventState& st = events_[op.event];
            st.completed = std::max(st.completed, op.event_gen);
          } else if (op.type == Op::kD2H) {
            d2h_run_.push_back(op.dev);
            if (!access(op.dev, op.bytes,
                        [&](std::uint8_t* p, std::uint64_t off, std::uint64_t len) {
                          std::memcpy(static_cast<std::uint8_t*>(op.host) + off, p, len);
                        }))
              ++counts_["fault"];
          } else if (op.type == Op::kH2D) {
            if (!access(op.dev, op.bytes,
                        [&](std::uint8_t* p, std::uint64_t off, std::uint64_t len) {
                          std::memcpy(p, static_cast<std::uint8_t*>(op.host) + off, len);
                        }))
              ++counts_["fault"];
          }
          q.pop_front();
          ++executed;
          progress = true;
        }
      }
    }
    return executed;
  }

  std::mutex m_;
  std::uint64_t gran_;
  bool manual_ = false;
  std::uint64_t reserved_ = 0;
  std::uint64_t reserve_cap_ = ~0ull;
  std::uint64_t capacity_ = 0;
  std::uint64_t used_ = 0;
  Handle next_handle_ = 1;
  std::uintptr_t next_stream_ = 0x5000;
  std::uintptr_t next_event_ = 0x9000;
  std::map<Handle, std::vector<std::uint8_t>> handles_;
  std::map<std::uint64_t, Mapping> mappings_;
  std::map<Stream, std::deque<Op>> queues_;
  std::map<Stream, bool> held_;
  std::map<Stream, bool> capturing_;
  CUresult unsafe_answer_ = CUDA_SUCCESS;
  std::map<Event, EventState> events_;
  std::map<std::string, Failure> failures_;
  std::map<std::string, int> counts_;
  std::vector<std::uint64_t> d2h_run_;
};

}  // namespace gswap::interpose
