// check.h: invariant checks that stay on in release builds. A broken invariant inside someone
// else's process must stop it with file and line, never limp on and corrupt training data.
#pragma once

namespace gswap::interpose {
[[noreturn]] void check_failed(const char* file, int line, const char* expr);
}

#define GSWAP_CHECK(cond)                                                                          \
  do {                                                                                             \
    if (__builtin_expect(!(cond), 0)) ::gswap::interpose::check_failed(__FILE__, __LINE__, #cond); \
  } while (0)
