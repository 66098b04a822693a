// command_queue.h: the bounded lock-free queue that feeds the swapper thread (and the timing
// event pool, timings.h).
//
// Any number of producers and consumers. Each cell carries a sequence number (Vyukov's bounded
// queue), so a push or a pop is one CAS and two stores, never a lock, an allocation or a syscall:
// a full queue refuses the push and the caller falls back (a planned action is skipped and
// counted), an empty one refuses the pop.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace gswap::interpose {

template <class T, std::size_t Capacity>
class CommandQueue {
  static_assert((Capacity & (Capacity - 1)) == 0, "Capacity is a power of two");

 public:
  CommandQueue() {
    for (std::size_t i = 0; i < Capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }

  bool push(const T& v) {
    std::size_t pos = tail_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & (Capacity - 1)];
      std::size_t seq = c.seq.load(std::memory_order_acquire);
      auto diff = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos);
      if (diff == 0) {
        if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.value = v;
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // full
      } else {
        pos = tail_.load(std::memory_order_relaxed);
      }
    }
  }

  bool pop(T* out) {
    std::size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & (Capacity - 1)];
      std::size_t seq = c.seq.load(std::memory_order_acquire);
      auto diff = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos + 1);
      if (diff == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          *out = c.value;
          c.seq.store(pos + Capacity, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // empty
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }

  bool empty() const {
    std::size_t pos = head_.load(std::memory_order_relaxed);
    const Cell& c = cells_[pos & (Capacity - 1)];
    return static_cast<std::intptr_t>(c.seq.load(std::memory_order_acquire)) -
               static_cast<std::intptr_t>(pos + 1) <
           0;
  }

  // Back to empty. Only when no thread can push or pop (after fork, in the child).
  void reset() {
    for (std::size_t i = 0; i < Capacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
    tail_.store(0, std::memory_order_relaxed);
    head_.store(0, std::memory_order_relaxed);
  }

 private:
  struct Cell {
    std::atomic<std::size_t> seq;
    T value;
  };
  Cell cells_[Capacity];
  alignas(64) std::atomic<std::size_t> tail_{0};
  alignas(64) std::atomic<std::size_t> head_{0};
};

}  // namespace gswap::interpose
