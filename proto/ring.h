// ring.h: the single-producer single-consumer event ring, used in shared memory (library ->
// daemon) and in process memory (per-thread staging buffers inside the library).
//
// Ownership: the producer alone writes `head` and the slots in [tail, head + capacity); the
// consumer alone writes `tail`. head and tail count records forever (64-bit, never wrap in
// practice); slot = index & (capacity - 1). Groups (a launch and its continuations) are published
// with one head store, so a consumer never sees half a group.
//
// The consumer in the daemon reads a head written by an untrusted process: RingConsumer checks
// head - tail <= capacity before touching any slot, and copies records out before decoding them.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

#include "proto/wire.h"

namespace gswap::proto {

class RingProducer {
 public:
  RingProducer() = default;
  RingProducer(std::atomic<std::uint64_t>* head, const std::atomic<std::uint64_t>* tail,
               EventRecord* slots, std::uint32_t capacity)
      : head_(head), tail_(tail), slots_(slots), mask_(capacity - 1) {
    cached_head_ = head_->load(std::memory_order_relaxed);
  }

  // Records that can be pushed now.
  std::uint64_t free_slots() const {
    std::uint64_t used = cached_head_ - tail_->load(std::memory_order_acquire);
    return used > mask_ + 1 ? 0 : mask_ + 1 - used;
  }

  // Pushes n records as one group, or nothing when they do not fit. Never blocks.
  bool push(const EventRecord* records, std::uint32_t n) {
    if (free_slots() < n) return false;
    for (std::uint32_t i = 0; i < n; ++i)
      std::memcpy(&slots_[(cached_head_ + i) & mask_], &records[i], sizeof(EventRecord));
    cached_head_ += n;
    head_->store(cached_head_, std::memory_order_release);
    return true;
  }

  // True when the consumer's tail is impossible (a corrupted or hostile peer).
  bool corrupt() const {
    std::uint64_t tail = tail_->load(std::memory_order_acquire);
    return tail > cached_head_;
  }

 private:
  std::atomic<std::uint64_t>* head_ = nullptr;
  const std::atomic<std::uint64_t>* tail_ = nullptr;
  EventRecord* slots_ = nullptr;
  std::uint64_t mask_ = 0;
  std::uint64_t cached_head_ = 0;
};

class RingConsumer {
 public:
  RingConsumer() = default;
  RingConsumer(const std::atomic<std::uint64_t>* head, std::atomic<std::uint64_t>* tail,
               const EventRecord* slots, std::uint32_t capacity)
      : head_(head), tail_(tail), slots_(slots), mask_(capacity - 1) {
    cached_tail_ = tail_->load(std::memory_order_relaxed);
  }

  // Records available, or -1 when the producer's head is impossible (more than capacity ahead of
  // tail, or behind it): the peer is broken or hostile.
  std::int64_t available() const {
    std::uint64_t head = head_->load(std::memory_order_acquire);
    std::uint64_t n = head - cached_tail_;
    if (head < cached_tail_ || n > mask_ + 1) return -1;
    return static_cast<std::int64_t>(n);
  }

  // Copies up to max records into out without consuming them (the producer cannot overwrite them
  // until commit()). Returns the number copied, or -1 on a broken head.
  std::int64_t peek(EventRecord* out, std::uint64_t max) const {
    std::int64_t avail = available();
    if (avail < 0) return -1;
    std::uint64_t n =
        static_cast<std::uint64_t>(avail) < max ? static_cast<std::uint64_t>(avail) : max;
    for (std::uint64_t i = 0; i < n; ++i)
      std::memcpy(&out[i], &slots_[(cached_tail_ + i) & mask_], sizeof(EventRecord));
    return static_cast<std::int64_t>(n);
  }

  // Releases n records to the producer.
  void commit(std::uint64_t n) {
    cached_tail_ += n;
    tail_->store(cached_tail_, std::memory_order_release);
  }

 private:
  const std::atomic<std::uint64_t>* head_ = nullptr;
  std::atomic<std::uint64_t>* tail_ = nullptr;
  const EventRecord* slots_ = nullptr;
  std::uint64_t mask_ = 0;
  std::uint64_t cached_tail_ = 0;
};

}  // namespace gswap::proto
