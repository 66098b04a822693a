// hooks.h: the namespaced implementations behind every exported wrapper (one per hooks.def
// entry). They return CUDA error codes and never throw.
#pragma once

#include "interpose/cuda_api.h"

namespace gswap::interpose {
#define GSWAP_HOOK(sym, api, ver, pt, ret, params, args) ret hook_##sym params;
#include "interpose/hooks.def"
#undef GSWAP_HOOK
}  // namespace gswap::interpose
