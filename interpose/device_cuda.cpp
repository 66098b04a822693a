// device_cuda.cpp: the device contract (device.h) over the real driver table.
//
// Every call goes through checked(), which logs a failure as "call -> code (NAME) at file:line"
// before returning it; CUDA_ERROR_NOT_READY from an event query is an answer, not a failure.
// No state of its own: safe from any thread.
#include "interpose/device_cuda.h"

#include "interpose/driver.h"
#include "interpose/log.h"

namespace gswap::interpose {

const char* driver_error_name(CUresult e) {
  const char* name = nullptr;
  if (real().cuGetErrorName && real().cuGetErrorName(e, &name) == CUDA_SUCCESS && name) return name;
  return "unknown error";
}

CUresult driver_checked(CUresult e, const char* call, const char* file, int line) {
  if (e != CUDA_SUCCESS)
    GSWAP_LOG(kError, "%s -> %d (%s) at %s:%d", call, static_cast<int>(e), driver_error_name(e),
              file, line);
  return e;
}

#define GSWAP_CU(call) GSWAP_DRIVER(call)

namespace {

class CudaDevice final : public Device {
 public:
  CUresult push(CUcontext ctx, bool* pushed) override {
    *pushed = false;
    if (!ctx) return CUDA_SUCCESS;
    CUcontext cur = nullptr;
    real().cuCtxGetCurrent(&cur);
    if (cur == ctx) return CUDA_SUCCESS;
    CUresult e = GSWAP_CU(real().cuCtxPushCurrent_v2(ctx));
    *pushed = e == CUDA_SUCCESS;
    return e;
  }
  void pop() override {
    CUcontext popped = nullptr;
    GSWAP_CU(real().cuCtxPopCurrent_v2(&popped));
  }
  CUcontext current() override {
    CUcontext cur = nullptr;
    if (real().cuCtxGetCurrent(&cur) != CUDA_SUCCESS) return nullptr;
    return cur;
  }
  void relax_capture_mode(unsigned* previous) override {
    CUstreamCaptureMode m = CU_STREAM_CAPTURE_MODE_RELAXED;
    if (real().cuThreadExchangeStreamCaptureMode &&
        real().cuThreadExchangeStreamCaptureMode(&m) == CUDA_SUCCESS) {
      *previous = static_cast<unsigned>(m);
      return;
    }
    *previous = ~0u;  // nothing to restore
  }
  void restore_capture_mode(unsigned previous) override {
    if (previous == ~0u || !real().cuThreadExchangeStreamCaptureMode) return;
    auto m = static_cast<CUstreamCaptureMode>(previous);
    real().cuThreadExchangeStreamCaptureMode(&m);
  }

  int ordinal() override {
    CUdevice dev = 0;
    real().cuCtxGetDevice(&dev);
    return dev;
  }
  CUresult granularity(std::uint64_t* bytes) override {
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = ordinal();
    size_t gran = 0;
    CUresult e = GSWAP_CU(
        real().cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    *bytes = gran;
    return e;
  }
  CUresult synchronize_context() override { return GSWAP_CU(real().cuCtxSynchronize()); }
  CUresult reserve(std::uint64_t bytes, std::uint64_t align, std::uint64_t* va) override {
    CUdeviceptr p = 0;
    // Failure is expected while the caller halves the size to find what fits: not logged.
    CUresult e = real().cuMemAddressReserve(&p, bytes, align, 0, 0);
    *va = e == CUDA_SUCCESS ? p : 0;
    return e;
  }

  CUresult create(std::uint64_t bytes, Handle* out) override {
    CUdevice dev = 0;
    CUresult e = GSWAP_CU(real().cuCtxGetDevice(&dev));
    if (e != CUDA_SUCCESS) return e;
    CUmemAllocationProp prop = {};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    CUmemGenericAllocationHandle h = 0;
    e = real().cuMemCreate(&h, bytes, &prop, 0);
    // Out of memory is an answer make_room handles (the device is full: behave as at the
    // budget); anything else is logged.
    if (e != CUDA_ERROR_OUT_OF_MEMORY)
      ::gswap::interpose::driver_checked(e, "real().cuMemCreate(&h, bytes, &prop, 0)", __FILE__,
                                         __LINE__);
    if (e == CUDA_SUCCESS) *out = h;
    return e;
  }
  CUresult release(Handle h) override { return GSWAP_CU(real().cuMemRelease(h)); }
  CUresult map(std::uint64_t va, std::uint64_t bytes, Handle h) override {
    CUdevice dev = 0;
    CUresult e = GSWAP_CU(real().cuCtxGetDevice(&dev));
    if (e != CUDA_SUCCESS) return e;
    e = GSWAP_CU(real().cuMemMap(va, bytes, 0, h, 0));
    if (e != CUDA_SUCCESS) return e;
    CUmemAccessDesc access = {};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = dev;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    e = GSWAP_CU(real().cuMemSetAccess(va, bytes, &access, 1));
    if (e != CUDA_SUCCESS) GSWAP_CU(real().cuMemUnmap(va, bytes));
    return e;
  }
  CUresult unmap(std::uint64_t va, std::uint64_t bytes) override {
    return GSWAP_CU(real().cuMemUnmap(va, bytes));
  }

  CUresult host_alloc(std::uint64_t bytes, void** out) override {
    return GSWAP_CU(real().cuMemAllocHost_v2(out, bytes));
  }
  CUresult host_free(void* p) override { return GSWAP_CU(real().cuMemFreeHost(p)); }

  CUresult stream_create(Stream* out) override {
    return GSWAP_CU(real().cuStreamCreate(out, CU_STREAM_NON_BLOCKING));
  }
  CUresult event_create(Event* out, bool timing) override {
    return GSWAP_CU(real().cuEventCreate(out, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
  }
  CUresult event_destroy(Event e) override { return GSWAP_CU(real().cuEventDestroy_v2(e)); }
  CUresult record(Event e, Stream s) override { return GSWAP_CU(real().cuEventRecord(e, s)); }
  CUresult wait(Stream s, Event e) override { return GSWAP_CU(real().cuStreamWaitEvent(s, e, 0)); }
  CUresult query(Event e) override {
    CUresult r = real().cuEventQuery(e);
    if (r != CUDA_ERROR_NOT_READY)
      ::gswap::interpose::driver_checked(r, "real().cuEventQuery(e)", __FILE__, __LINE__);
    return r;
  }
  CUresult synchronize(Event e) override { return GSWAP_CU(real().cuEventSynchronize(e)); }
  CUresult elapsed(Event from, Event to, float* ms) override {
    if (real().cuEventElapsedTime_v2) return real().cuEventElapsedTime_v2(ms, from, to);
    if (real().cuEventElapsedTime_v1) return real().cuEventElapsedTime_v1(ms, from, to);
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  CUresult is_capturing(Stream s, bool* capturing) override {
    CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
    CUresult e = GSWAP_CU(real().cuStreamIsCapturing(s, &st));
    *capturing = e == CUDA_SUCCESS && st != CU_STREAM_CAPTURE_STATUS_NONE;
    return e;
  }

  CUresult unsafe_call() override {
    CUdeviceptr p = 0;
    CUresult e = real().cuMemAlloc_v2(&p, 1);
    if (capture_refusal(e)) return e;  // the application's answer, not a failure of gswap's
    if (driver_checked(e, "cuMemAlloc_v2(1 byte)", __FILE__, __LINE__) != CUDA_SUCCESS)
      return CUDA_SUCCESS;
    e = real().cuMemFree_v2(p);
    // Refused only when a capture began meanwhile on another thread: the byte is left behind.
    if (capture_refusal(e)) return e;
    return driver_checked(e, "cuMemFree_v2(1 byte)", __FILE__, __LINE__);
  }

  bool is_device_memory(std::uint64_t addr) override {
    unsigned type = 0;
    return addr && real().cuPointerGetAttribute &&
           real().cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                        static_cast<CUdeviceptr>(addr)) == CUDA_SUCCESS &&
           (type == CU_MEMORYTYPE_DEVICE || type == CU_MEMORYTYPE_UNIFIED);
  }

  CUresult copy_d2h(void* host, std::uint64_t dev, std::uint64_t bytes, Stream s) override {
    return GSWAP_CU(real().cuMemcpyDtoHAsync_v2(host, dev, bytes, s));
  }
  CUresult copy_h2d(std::uint64_t dev, const void* host, std::uint64_t bytes, Stream s) override {
    return GSWAP_CU(real().cuMemcpyHtoDAsync_v2(dev, host, bytes, s));
  }
};

}  // namespace

Device& cuda_device() {
  static CudaDevice d;  // stateless: safe to use from destructors run after ours
  return d;
}

}  // namespace gswap::interpose
