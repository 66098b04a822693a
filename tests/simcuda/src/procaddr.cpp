// procaddr.cpp: cuGetProcAddress and cuGetProcAddress_v2, served from the one table in api.def.
// The table is immutable; lookups take no lock.
#include <string_view>

#include "internal.h"

namespace simcuda {
namespace {

struct ApiEntry {
  const char* name;
  int version;
  void* fn;
  void* pt_fn;  // per-thread-default-stream form, or nullptr
};

const ApiEntry kApi[] = {
#define SC_API(name, ver, sym) {#name, ver, reinterpret_cast<void*>(&sym), nullptr},
#define SC_API_PT(name, ver, sym, pt) \
  {#name, ver, reinterpret_cast<void*>(&sym), reinterpret_cast<void*>(&pt)},
#include "api.def"
#undef SC_API
#undef SC_API_PT
};

CUresult lookup(const char* symbol, void** pfn, int version, cuuint64_t flags,
                CUdriverProcAddressQueryResult* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  if (flags & ~static_cast<cuuint64_t>(CU_GET_PROC_ADDRESS_LEGACY_STREAM |
                                       CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
    return CUDA_ERROR_INVALID_VALUE;
  *pfn = nullptr;
  std::string_view want(symbol);
  const ApiEntry* best = nullptr;
  bool seen = false;
  for (const ApiEntry& e : kApi) {
    if (want != e.name) continue;
    seen = true;
    if (e.version <= version && (!best || e.version > best->version)) best = &e;
  }
  if (!best) {
    if (status)
      *status =
          seen ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  bool pt = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
  *pfn = pt && best->pt_fn ? best->pt_fn : best->fn;
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}

}  // namespace

// For the exports test: every symbol the table names, with its per-thread form.
extern "C" __attribute__((visibility("default"))) size_t simcuda_api_table(
    const char** names, int* versions, void** fns, void** pt_fns, size_t cap) {
  size_t n = sizeof(kApi) / sizeof(kApi[0]);
  for (size_t i = 0; i < n && i < cap; ++i) {
    if (names) names[i] = kApi[i].name;
    if (versions) versions[i] = kApi[i].version;
    if (fns) fns[i] = kApi[i].fn;
    if (pt_fns) pt_fns[i] = kApi[i].pt_fn;
  }
  return n;
}

}  // namespace simcuda

using namespace simcuda;

SC_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                       cuuint64_t flags, CUdriverProcAddressQueryResult* status) {
  SC_ENTRY(cuGetProcAddress_v2);
  return lookup(symbol, pfn, version, flags, status);
}
SC_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags) {
  SC_ENTRY(cuGetProcAddress);
  return lookup(symbol, pfn, version, flags, nullptr);
}
