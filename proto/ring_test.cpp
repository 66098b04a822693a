// ring_test.cpp: the SPSC ring wraps around, refuses groups that do not fit (the caller drops and
// counts), rejects impossible heads from a hostile producer, and keeps order across threads.
#include "proto/ring.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gswap::proto {
namespace {

struct TestRing {
  std::atomic<std::uint64_t> head{0}, tail{0};
  std::vector<EventRecord> slots;
  explicit TestRing(std::uint32_t cap) : slots(cap) {}
  RingProducer producer() { return RingProducer(&head, &tail, slots.data(), slots.size()); }
  RingConsumer consumer() { return RingConsumer(&head, &tail, slots.data(), slots.size()); }
};

EventRecord rec(std::uint64_t seq) {
  EventRecord r{};
  r.type = static_cast<std::uint16_t>(EventType::kStall);
  r.seq = seq;
  return r;
}

TEST(Ring, WrapsAroundManyTimes) {
  TestRing ring(8);
  auto p = ring.producer();
  auto c = ring.consumer();
  std::uint64_t next = 0, expect = 0;
  for (int round = 0; round < 100; ++round) {
    for (int k = 0; k < 5; ++k) {
      EventRecord r = rec(next);
      ASSERT_TRUE(p.push(&r, 1));
      ++next;
    }
    EventRecord out[8];
    ASSERT_EQ(c.peek(out, 8), 5);
    for (int k = 0; k < 5; ++k) EXPECT_EQ(out[k].seq, expect++);
    c.commit(5);
  }
  EXPECT_EQ(ring.head.load(), 500u);
  EXPECT_EQ(ring.tail.load(), 500u);
}

TEST(Ring, OverflowRefusesWholeGroup) {
  TestRing ring(4);
  auto p = ring.producer();
  EventRecord g[3] = {rec(1), rec(2), rec(3)};
  ASSERT_TRUE(p.push(g, 3));
  EXPECT_EQ(p.free_slots(), 1u);
  EXPECT_FALSE(p.push(g, 2));  // does not fit: nothing is written
  EXPECT_EQ(ring.head.load(), 3u);
  EXPECT_TRUE(p.push(g, 1));
  EXPECT_FALSE(p.push(g, 1));
  auto c = ring.consumer();
  c.commit(4);
  EXPECT_TRUE(p.push(g, 3));
}

TEST(Ring, ConsumerRejectsImpossibleHead) {
  TestRing ring(4);
  auto c = ring.consumer();
  ring.head.store(5);  // more than capacity ahead of tail
  EXPECT_EQ(c.available(), -1);
  EventRecord out[4];
  EXPECT_EQ(c.peek(out, 4), -1);
  ring.head.store(4);
  EXPECT_EQ(c.available(), 4);
}

TEST(Ring, ProducerDetectsImpossibleTail) {
  TestRing ring(4);
  auto p = ring.producer();
  ring.tail.store(7);
  EXPECT_TRUE(p.corrupt());
  EXPECT_EQ(p.free_slots(), 0u);
}

TEST(Ring, OrderKeptAcrossThreads) {
  TestRing ring(64);
  constexpr std::uint64_t kCount = 200000;
  std::thread producer([&] {
    auto p = ring.producer();
    for (std::uint64_t i = 0; i < kCount;) {
      EventRecord r = rec(i);
      if (p.push(&r, 1))
        ++i;
      else
        std::this_thread::yield();
    }
  });
  auto c = ring.consumer();
  std::uint64_t expect = 0;
  EventRecord out[64];
  while (expect < kCount) {
    std::int64_t n = c.peek(out, 64);
    ASSERT_GE(n, 0);
    for (std::int64_t k = 0; k < n; ++k) ASSERT_EQ(out[k].seq, expect++);
    c.commit(static_cast<std::uint64_t>(n));
    if (n == 0) std::this_thread::yield();
  }
  producer.join();
}

}  // namespace
}  // namespace gswap::proto
