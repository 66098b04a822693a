// layout_cache.h: kernel parameter layouts, cached per function handle.
//
// Lock-free for readers: an open-addressing table of (handle, layout) published with release
// stores, which grows (doubling, entries copied into a new table published with one store) so
// that any number of functions stay cached. The first launch of a function fills its entry under
// a mutex (off the common path); layouts are immutable and never freed.
#pragma once

#include <atomic>
#include <cstdint>

#include "interpose/cuda_api.h"
#include "interpose/param_scan.h"

namespace gswap::interpose {

struct CachedLayout {
  ParamLayout layout;
  bool known = false;          // false: the driver could not describe the parameters (untrackable)
  const char* name = nullptr;  // cuFuncGetName / cuKernelGetName, copied (nullptr: unknown)
  // The gswapd connection (telemetry::connection()) the name was last sent on.
  mutable std::atomic<std::uint32_t> name_sent{0};
  // The driver knows the handle neither as a function nor as a kernel: a launch of it fails, and
  // is refused before it can make anything resident. Such answers are not cached.
  bool invalid_handle = false;
};

// The layout of f, filling the cache on first use. Never null.
const CachedLayout* layout_of(CUfunction f);
void layout_cache_reset();  // after fork
// Forgets the layout of every cached handle for which belongs(handle, ctx) is true (before their
// module is unloaded: the driver may hand the same handles out again for other kernels). The next
// launch of such a handle asks the driver again.
void layout_cache_forget(bool (*belongs)(CUfunction f, void* ctx), void* ctx);

}  // namespace gswap::interpose
