// entry.h: what every exported driver entry point does before anything else. SC_ENTRY(symbol)
// counts the call under its ABI symbol and, when a test armed a failure for that call (SIMCUDA_FAIL
// or simcudaInjectFailure), returns the armed code before the function reads an argument or
// changes any state. The symbols are those of api.def, so the check covers every entry point
// however it was reached (by name, by dlsym or through cuGetProcAddress).
//
// Threading: call counts are sharded per thread (a launch from 16 threads must not contend on one
// cache line) and summed when read; armed rules are published through atomics and never freed
// while a caller may still hold them (inject.cpp).
#pragma once

#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace simcuda::api {

// Every ABI symbol of api.def in table order, each followed by its per-thread twin. A symbol
// listed twice (cuGraphInstantiateWithFlags) is counted in the slot of its first appearance.
inline constexpr std::string_view kSymbols[] = {
#define SC_API(name, ver, sym) #sym,
#define SC_API_PT(name, ver, sym, pt) #sym, #pt,
#include "api.def"
#undef SC_API
#undef SC_API_PT
};
inline constexpr int kNumSlots = static_cast<int>(sizeof(kSymbols) / sizeof(kSymbols[0]));

// The slot of an ABI symbol, or -1. consteval in SC_ENTRY, so a function that is not in api.def
// does not compile.
constexpr int slot_of(std::string_view sym) {
  for (int i = 0; i < kNumSlots; ++i)
    if (kSymbols[i] == sym) return i;
  return -1;
}

// Per-thread shards of the call counts (calls.cpp). 64 shards cover the 16 application threads
// of the hot-path targets with room for the stream workers and helper threads of a preload test.
inline constexpr int kShards = 64;
struct alignas(64) Shard {
  std::atomic<uint64_t> calls[kNumSlots];
};
extern Shard g_shards[kShards];
inline thread_local int t_shard = -1;  // this thread's shard, assigned at its first call
int assign_shard();                    // sets t_shard and returns it

// True while any failure is armed; the only thing the hot path reads beyond its own shard.
extern std::atomic<bool> g_armed;
CUresult armed_result(int slot);  // inject.cpp: the armed code for this call, or CUDA_SUCCESS

inline CUresult enter(int slot) {
  int shard = t_shard;
  if (__builtin_expect(shard < 0, 0)) shard = assign_shard();
  g_shards[shard].calls[slot].fetch_add(1, std::memory_order_relaxed);
  if (__builtin_expect(g_armed.load(std::memory_order_relaxed), 0)) return armed_result(slot);
  return CUDA_SUCCESS;
}

uint64_t calls(int slot);  // sum over the shards

}  // namespace simcuda::api

#define SC_ENTRY(sym)                                                            \
  do {                                                                           \
    constexpr int sc_slot_ = ::simcuda::api::slot_of(#sym);                      \
    static_assert(sc_slot_ >= 0, #sym " is exported but not listed in api.def"); \
    if (CUresult sc_r_ = ::simcuda::api::enter(sc_slot_)) return sc_r_;          \
  } while (0)
