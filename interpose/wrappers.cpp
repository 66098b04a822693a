// wrappers.cpp: the exported driver symbols, generated from hooks.def.
//
// Each exported symbol is an alias of a hidden gswap_w_<symbol> function that calls
// gswap::interpose::hook_<symbol>. The lookup table points at the hidden names, so handing out
// a wrapper never resolves libgswap's own exported symbols through the global scope (which could
// bind to another library, or recurse). Every wrapper loads the real driver table first: a
// program may call the driver before cuInit (the driver then answers
// CUDA_ERROR_NOT_INITIALIZED), and no hook may call through a table not yet loaded. Under
// GSWAP_HOOK_PROFILE a wrapper also times its hook (hook_profile.h).
#include "interpose/clock.h"
#include "interpose/driver.h"
#include "interpose/hook_profile.h"
#include "interpose/hooks.h"
#include "interpose/lookup.h"

namespace {
// Each hook's index in kHooks, for its profile counters.
enum HookIndex : std::size_t {
#define GSWAP_HOOK(sym, api, ver, pt, ret, params, args) kHookIndex_##sym,
#include "interpose/hooks.def"
#undef GSWAP_HOOK
  kHookCount
};
static_assert(kHookCount <= ::gswap::interpose::hook_profile::kMaxHooks);
}  // namespace

// The profiled call is a function of its own, out of line: the wrapper's usual path gains one
// load and a branch, nothing else.
#define GSWAP_HOOK(sym, api, ver, pt, ret, params, args)                                         \
  __attribute__((noinline, cold)) static ret gswap_p_##sym params {                              \
    const std::uint64_t t0 = ::gswap::interpose::monotonic_ns();                                 \
    ret r = ::gswap::interpose::hook_##sym args;                                                 \
    ::gswap::interpose::hook_profile::add(kHookIndex_##sym,                                      \
                                          ::gswap::interpose::monotonic_ns() - t0);              \
    return r;                                                                                    \
  }                                                                                              \
  extern "C" __attribute__((visibility("hidden"))) ret gswap_w_##sym params {                    \
    if (!::gswap::interpose::driver_loaded() && !::gswap::interpose::load_driver()) [[unlikely]] \
      return CUDA_ERROR_NOT_INITIALIZED;                                                         \
    if (::gswap::interpose::hook_profile::on()) [[unlikely]]                                     \
      return gswap_p_##sym args;                                                                 \
    return ::gswap::interpose::hook_##sym args;                                                  \
  }                                                                                              \
  extern "C" __attribute__((visibility("default"), alias("gswap_w_" #sym))) ret sym params;
#include "interpose/hooks.def"
#undef GSWAP_HOOK

namespace gswap::interpose {

const HookEntry kHooks[] = {
#define GSWAP_HOOK(sym, api, ver, pt, ret, params, args) \
  {#sym, api, ver, pt != 0, reinterpret_cast<void*>(&gswap_w_##sym), offsetof(Real, sym)},
#include "interpose/hooks.def"
#undef GSWAP_HOOK
};
const std::size_t kNumHooks = sizeof(kHooks) / sizeof(kHooks[0]);

}  // namespace gswap::interpose
