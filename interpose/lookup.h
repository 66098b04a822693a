// lookup.h: the hook table generated from hooks.def, and the lookups dlsym and cuGetProcAddress
// answer from it.
#pragma once

#include <cstddef>

#include "interpose/driver.h"

namespace gswap::interpose {

struct HookEntry {
  const char* symbol;       // ABI symbol
  const char* api;          // name as cuGetProcAddress is asked
  int version;              // CUDA version the ABI appeared in
  bool per_thread;          // _ptds/_ptsz flavour
  void* wrapper;            // libgswap's hidden wrapper
  std::size_t real_offset;  // offset of the real pointer in Real
};

extern const HookEntry kHooks[];
extern const std::size_t kNumHooks;

inline void* real_pointer(const HookEntry& e) {
  return *reinterpret_cast<void* const*>(reinterpret_cast<const char*>(&real()) + e.real_offset);
}

// The hook for an ABI symbol name, or nullptr.
const HookEntry* hook_by_symbol(const char* symbol);

// What libgswap's dlsym answers itself: its wrapper for a hooked name asked of libcuda, the global
// scope or RTLD_NEXT; nullptr for every other lookup, which goes to the real dlsym with the
// caller's own return address (dlsym_entry.cpp).
void* dlsym_answer(void* handle, const char* name);

}  // namespace gswap::interpose
