// api.cpp: the public C API of libgswap.so (include/gswap.h; the list is api.def).
//
// Every function is safe from any thread at any time (before cuInit too), never blocks on the
// device and never throws; errors are the GSWAP_ERROR_* codes of gswap.h.
#include "include/gswap.h"

#include "interpose/log.h"
#include "interpose/process.h"

namespace gswap::interpose {

int api_gswap_api_version() {
  return GSWAP_API_VERSION;
}

int api_gswap_check_version(int caller_version) {
  // Version 1 is the first; a caller built against a newer header may use functions this
  // library does not have.
  if (caller_version >= 1 && caller_version <= GSWAP_API_VERSION) return GSWAP_OK;
  GSWAP_LOG(kError,
            "a caller built against gswap.h API version %d was refused: this libgswap serves "
            "versions 1 to %d",
            caller_version, GSWAP_API_VERSION);
  return GSWAP_ERROR_VERSION;
}

int api_gswap_mark_iteration() {
  return mark_iteration();
}

int api_gswap_name_allocation(unsigned long long ptr, const char* name) {
  if (!ptr || !name) return GSWAP_ERROR_INVALID;
  return name_region(ptr, name);
}

int api_gswap_register_recompute(unsigned long long ptr, unsigned long long bytes,
                                 const unsigned long long* sources, int num_sources, double cost_us,
                                 gswap_recompute_fn fn, void* ctx) {
  if (!ptr) return GSWAP_ERROR_INVALID;
  return register_recompute(ptr, bytes, sources, num_sources, cost_us, fn, ctx);
}

int api_gswap_unregister_recompute(unsigned long long ptr) {
  if (!ptr) return GSWAP_ERROR_INVALID;
  return unregister_recompute(ptr);
}

}  // namespace gswap::interpose

#define GSWAP_API(name, ret, params, args)                            \
  extern "C" __attribute__((visibility("default"))) ret name params { \
    return ::gswap::interpose::api_##name args;                       \
  }
#include "interpose/api.def"
#undef GSWAP_API
