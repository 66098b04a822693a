// dlsym_entry.cpp: libgswap's exported dlsym, in both glibc versions, as a trampoline of a few
// instructions per architecture.
//
// glibc resolves a lookup relative to the object that called dlsym, found from dlsym's return
// address: RTLD_NEXT means "after the caller", RTLD_DEFAULT searches the caller's scope, and any
// lookup records a dependency of the caller. A dlsym written in C++ that called the real one
// would make every lookup relative to libgswap: a shim preloaded after libgswap asking
// dlsym(RTLD_NEXT, "malloc") would get its own malloc back and recurse forever. So the exported
// dlsym saves its arguments, asks dlsym_answer (lookup.cpp) whether libgswap answers the name
// itself, and otherwise restores them and jumps, not calls, to the real dlsym, which then sees the
// original caller's return address exactly as if libgswap were not loaded. (GCC 12 has no
// musttail attribute that would guarantee such a tail call from C++.)
//
// The real dlsym of each version is found once, with dlvsym(RTLD_NEXT), on the first call; no
// state besides those two pointers.
#include <dlfcn.h>

#include "interpose/lookup.h"

namespace {

void* no_dlsym(void*, const char*) {
  return nullptr;
}

#if defined(__x86_64__)
constexpr const char* kOldDlsymVersion = "GLIBC_2.2.5";
#elif defined(__aarch64__)
constexpr const char* kOldDlsymVersion = "GLIBC_2.17";
#else
constexpr const char* kOldDlsymVersion = nullptr;
#endif

}  // namespace

extern "C" {

// Where the trampolines jump when libgswap does not answer: the real dlsym of their version.
__attribute__((visibility("hidden"))) void* gswap_real_dlsym_new = nullptr;
__attribute__((visibility("hidden"))) void* gswap_real_dlsym_old = nullptr;

// Called by both trampolines: libgswap's own answer, or nullptr to pass the lookup on.
__attribute__((visibility("hidden"))) void* gswap_dlsym_answer(void* handle, const char* name) {
  static const bool resolved = [] {
    // glibc 2.34 moved dlsym into libc under a new version; binaries built earlier bind the old
    // one. A glibc with only one of them serves both.
    void* n = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    void* o = kOldDlsymVersion ? dlvsym(RTLD_NEXT, "dlsym", kOldDlsymVersion) : nullptr;
    if (!n) n = o;
    if (!o) o = n;
    if (!n) n = o = reinterpret_cast<void*>(&no_dlsym);
    __atomic_store_n(&gswap_real_dlsym_new, n, __ATOMIC_RELEASE);
    __atomic_store_n(&gswap_real_dlsym_old, o, __ATOMIC_RELEASE);
    return true;
  }();
  (void)resolved;
  return gswap::interpose::dlsym_answer(handle, name);
}

}  // extern "C"

// clang-format off
// The trampoline: NAME(handle, name) returns gswap_dlsym_answer(handle, name) when that is not
// null, else tail-jumps to *REAL with the arguments and the return address it was called with.
#if defined(__x86_64__)
#if defined(__CET__)
#define GSWAP_BRANCH_TARGET "  endbr64\n"
#else
#define GSWAP_BRANCH_TARGET ""
#endif
// Two pushes and 8 bytes keep the stack 16-byte aligned at the call.
#define GSWAP_DLSYM_TRAMPOLINE(NAME, REAL)  \
  __asm__(".text\n"                         \
          ".globl " NAME "\n"               \
          ".type " NAME ", @function\n"     \
          ".p2align 4\n" NAME ":\n"         \
          "  .cfi_startproc\n"              \
          GSWAP_BRANCH_TARGET               \
          "  pushq %rdi\n"                  \
          "  .cfi_adjust_cfa_offset 8\n"    \
          "  pushq %rsi\n"                  \
          "  .cfi_adjust_cfa_offset 8\n"    \
          "  subq $8, %rsp\n"               \
          "  .cfi_adjust_cfa_offset 8\n"    \
          "  call gswap_dlsym_answer\n"     \
          "  addq $8, %rsp\n"               \
          "  .cfi_adjust_cfa_offset -8\n"   \
          "  popq %rsi\n"                   \
          "  .cfi_adjust_cfa_offset -8\n"   \
          "  popq %rdi\n"                   \
          "  .cfi_adjust_cfa_offset -8\n"   \
          "  testq %rax, %rax\n"            \
          "  jz 1f\n"                       \
          "  ret\n"                         \
          "1:\n"                            \
          "  jmp *" REAL "(%rip)\n"         \
          "  .cfi_endproc\n"                \
          ".size " NAME ", .-" NAME "\n")
#elif defined(__aarch64__)
#if defined(__ARM_FEATURE_BTI_DEFAULT)
#define GSWAP_BRANCH_TARGET "  bti c\n"
#else
#define GSWAP_BRANCH_TARGET ""
#endif
// The frame holds x29/x30 and the two arguments; x16 (IP0) carries the jump.
#define GSWAP_DLSYM_TRAMPOLINE(NAME, REAL)     \
  __asm__(".text\n"                            \
          ".globl " NAME "\n"                  \
          ".type " NAME ", %function\n"        \
          ".p2align 4\n" NAME ":\n"            \
          "  .cfi_startproc\n"                 \
          GSWAP_BRANCH_TARGET                  \
          "  stp x29, x30, [sp, #-32]!\n"      \
          "  .cfi_def_cfa_offset 32\n"         \
          "  .cfi_offset 29, -32\n"            \
          "  .cfi_offset 30, -24\n"            \
          "  mov x29, sp\n"                    \
          "  stp x0, x1, [sp, #16]\n"          \
          "  bl gswap_dlsym_answer\n"          \
          "  cbz x0, 1f\n"                     \
          "  .cfi_remember_state\n"            \
          "  ldp x29, x30, [sp], #32\n"        \
          "  .cfi_def_cfa_offset 0\n"          \
          "  .cfi_restore 29\n"                \
          "  .cfi_restore 30\n"                \
          "  ret\n"                            \
          "1:\n"                               \
          "  .cfi_restore_state\n"             \
          "  ldp x0, x1, [sp, #16]\n"          \
          "  ldp x29, x30, [sp], #32\n"        \
          "  .cfi_def_cfa_offset 0\n"          \
          "  .cfi_restore 29\n"                \
          "  .cfi_restore 30\n"                \
          "  adrp x16, " REAL "\n"             \
          "  ldr x16, [x16, :lo12:" REAL "]\n" \
          "  br x16\n"                         \
          "  .cfi_endproc\n"                   \
          ".size " NAME ", .-" NAME "\n")
#endif

// clang-format on

#if defined(GSWAP_DLSYM_TRAMPOLINE)
GSWAP_DLSYM_TRAMPOLINE("interpose_dlsym_new", "gswap_real_dlsym_new");
GSWAP_DLSYM_TRAMPOLINE("interpose_dlsym_old", "gswap_real_dlsym_old");
#else
// Elsewhere, a plain call: lookups relative to the caller (RTLD_NEXT) resolve from libgswap.
extern "C" __attribute__((visibility("default"))) void* interpose_dlsym_new(void* h,
                                                                            const char* n) {
  void* ours = gswap_dlsym_answer(h, n);
  return ours ? ours : reinterpret_cast<void* (*)(void*, const char*)>(gswap_real_dlsym_new)(h, n);
}
extern "C" __attribute__((visibility("default"))) void* interpose_dlsym_old(void* h,
                                                                            const char* n) {
  void* ours = gswap_dlsym_answer(h, n);
  return ours ? ours : reinterpret_cast<void* (*)(void*, const char*)>(gswap_real_dlsym_old)(h, n);
}
#endif

// Both glibc versions of dlsym: binaries built against glibc >= 2.34 bind dlsym@GLIBC_2.34,
// older ones dlsym@GLIBC_2.2.5 (x86-64) or dlsym@GLIBC_2.17 (aarch64).
__asm__(".symver interpose_dlsym_new, dlsym@@GLIBC_2.34");
#if defined(__x86_64__)
__asm__(".symver interpose_dlsym_old, dlsym@GLIBC_2.2.5");
#elif defined(__aarch64__)
__asm__(".symver interpose_dlsym_old, dlsym@GLIBC_2.17");
#endif
