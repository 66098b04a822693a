// device.h: the narrow device contract residency is written against (mimalloc's prim.h is the
// model): the VMM, copy, event and stream operations that moving a region needs, and nothing else.
//
// One implementation runs over the real driver table (device_cuda.cpp); a fake on host memory
// (tests: device_fake.h) lets residency's state machine be unit-tested without any driver.
//
// Every operation returns a CUresult. The implementation over the driver logs each failure with
// the call, file, line and "-> code (NAME)" (NCCL's habit) before returning it, so the caller only
// decides what to do: roll the region back to a safe state, or stop with GSWAP_CHECK.
//
// Threads: every operation may be called from any thread that has pushed the device's context
// (ScopedContext in residency); implementations keep no per-call state of their own.
#pragma once

#include <cstdint>

#include "interpose/cuda_api.h"

namespace gswap::interpose {

class Device {
 public:
  using Handle = std::uint64_t;  // CUmemGenericAllocationHandle
  using Stream = CUstream;
  using Event = CUevent;

  virtual ~Device() = default;

  // --- contexts ------------------------------------------------------------------------------
  // Makes ctx current on this thread if it is not; *pushed says whether pop() must undo it.
  virtual CUresult push(CUcontext ctx, bool* pushed) = 0;
  virtual void pop() = 0;
  // The calling thread's current context (nullptr when it has none).
  virtual CUcontext current() = 0;
  // Lets this thread make calls a global-mode stream capture on another thread would otherwise
  // treat as unsafe (allocation, mapping, host waits on gswap's own events): gswap's own memory
  // work is never part of a graph. *previous receives the mode to restore.
  virtual void relax_capture_mode(unsigned* previous) = 0;
  virtual void restore_capture_mode(unsigned previous) = 0;
  // The ordinal of the current context's device, and its VMM granularity.
  virtual int ordinal() = 0;
  virtual CUresult granularity(std::uint64_t* bytes) = 0;
  // The host waits for all work of the current context (the last resort when a stream that used
  // a region cannot be named).
  virtual CUresult synchronize_context() = 0;

  // --- physical memory (VMM) -----------------------------------------------------------------
  // Reserves bytes of device address space aligned to `align`. Post: *va is the base.
  virtual CUresult reserve(std::uint64_t bytes, std::uint64_t align, std::uint64_t* va) = 0;
  // Pre: bytes is a multiple of the granularity. Post on success: a handle charged to the device.
  virtual CUresult create(std::uint64_t bytes, Handle* out) = 0;
  // Pre: h is not mapped anywhere gswap will touch again. Post: the handle is gone.
  virtual CUresult release(Handle h) = 0;
  // Maps h at [va, va + bytes) and makes it readable and writable by the device.
  // Pre: the range is reserved and unmapped. Post on failure: nothing is left mapped.
  virtual CUresult map(std::uint64_t va, std::uint64_t bytes, Handle h) = 0;
  // Pre: every stream that used the range has passed an event the caller waited for.
  // Post on success: the range is unmapped (touching it faults); the handle is still held.
  // Post on failure: the mapping is as it was.
  virtual CUresult unmap(std::uint64_t va, std::uint64_t bytes) = 0;

  // --- pinned host memory ----------------------------------------------------------------------
  virtual CUresult host_alloc(std::uint64_t bytes, void** out) = 0;
  virtual CUresult host_free(void* p) = 0;

  // --- streams and events ----------------------------------------------------------------------
  virtual CUresult stream_create(Stream* out) = 0;  // non-blocking: never waits for the NULL stream
  virtual CUresult event_create(Event* out, bool timing) = 0;
  virtual CUresult event_destroy(Event e) = 0;
  // Post: e completes once everything enqueued on s before this call has run.
  virtual CUresult record(Event e, Stream s) = 0;
  // Post: work enqueued on s after this call waits for e's current state.
  virtual CUresult wait(Stream s, Event e) = 0;
  // CUDA_SUCCESS when complete, CUDA_ERROR_NOT_READY when not yet, else an error.
  virtual CUresult query(Event e) = 0;
  // The host waits for e.
  virtual CUresult synchronize(Event e) = 0;
  // Milliseconds between two completed timing events.
  virtual CUresult elapsed(Event from, Event to, float* ms) = 0;
  // Whether s is capturing into a graph now (fact 8: never record on such a stream).
  virtual CUresult is_capturing(Stream s, bool* capturing) = 0;
  // Makes one potentially unsafe call of gswap's own (cuThreadExchangeStreamCaptureMode in
  // cuda.h: an allocation, then its free), so that the driver judges the calling thread by the
  // capture rules now: it refuses the call exactly when it would refuse the application's own
  // cuMemAlloc or cuMemFree, and does to the captures what it does then (invalidates them).
  // Returns that refusal (capture_refusal), else the free's result: the free waits for the
  // context's work as cuMemFree does. An allocation that fails otherwise (no memory even for one
  // byte) is logged and answers CUDA_SUCCESS, without that wait.
  virtual CUresult unsafe_call() = 0;
  // Whether addr lies in device memory the driver knows (an allocation gswap left to it): a query
  // whose failure is the answer, not logged.
  virtual bool is_device_memory(std::uint64_t addr) = 0;

  // --- copies (asynchronous, on s) -------------------------------------------------------------
  // Pre: the device range is mapped; host is pinned (or ordinary memory the copy may wait on).
  virtual CUresult copy_d2h(void* host, std::uint64_t dev, std::uint64_t bytes, Stream s) = 0;
  virtual CUresult copy_h2d(std::uint64_t dev, const void* host, std::uint64_t bytes, Stream s) = 0;
};

// A stream capture's refusal of a call (CUDA_ERROR_STREAM_CAPTURE_*, CUDA_ERROR_CAPTURED_EVENT).
inline bool capture_refusal(CUresult e) {
  return e >= CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED && e <= CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
}

// The special stream handles of cuda.h, named for residency's use.
inline CUstream legacy_stream() {
  return reinterpret_cast<CUstream>(0x1);  // CU_STREAM_LEGACY
}

}  // namespace gswap::interpose
