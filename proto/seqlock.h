// seqlock.h: a single-writer sequence lock over arrays of atomic 64-bit words in shared memory.
//
// Why words of std::atomic: the reader and the writer are different processes touching the same
// bytes at the same time; plain loads would be a data race. Relaxed atomic word copies plus the
// fences below give the classic seqlock without libc locks (which must never live in shared
// memory). Readers retry a bounded number of times, because the writer may be another process that
// died or misbehaves mid-write: a reader never hangs.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gswap::proto {

// Writer side: exactly one writer per seqlock (the library for the status block, the daemon for
// the plan area).
inline void seqlock_write(std::atomic<std::uint64_t>* seq, std::atomic<std::uint64_t>* words,
                          const std::uint64_t* src, std::size_t n) {
  std::uint64_t s = seq->load(std::memory_order_relaxed);
  seq->store(s + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t i = 0; i < n; ++i) words[i].store(src[i], std::memory_order_relaxed);
  seq->store(s + 2, std::memory_order_release);
}

// Reader side: copies words [0, n) into dst. Returns false when no consistent copy was obtained in
// max_tries attempts (writer busy, dead or hostile). *version receives the (even) sequence read.
inline bool seqlock_read(const std::atomic<std::uint64_t>* seq,
                         const std::atomic<std::uint64_t>* words, std::uint64_t* dst, std::size_t n,
                         std::uint64_t* version = nullptr, int max_tries = 64) {
  for (int attempt = 0; attempt < max_tries; ++attempt) {
    std::uint64_t s1 = seq->load(std::memory_order_acquire);
    if (s1 & 1) continue;
    for (std::size_t i = 0; i < n; ++i) dst[i] = words[i].load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    std::uint64_t s2 = seq->load(std::memory_order_relaxed);
    if (s1 == s2) {
      if (version) *version = s1;
      return true;
    }
  }
  return false;
}

}  // namespace gswap::proto
