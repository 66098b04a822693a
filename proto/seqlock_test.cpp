// seqlock_test.cpp: readers racing a writer never see a torn copy, and a writer stuck mid-write
// makes readers give up instead of hanging.
#include "proto/seqlock.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace gswap::proto {
namespace {

TEST(Seqlock, NoTornReadsUnderConcurrentWriter) {
  constexpr std::size_t kWords = 16;
  std::atomic<std::uint64_t> seq{0};
  std::atomic<std::uint64_t> words[kWords] = {};
  std::atomic<bool> done{false};
  std::thread writer([&] {
    std::uint64_t v[kWords];
    for (std::uint64_t gen = 1; gen < 300000; ++gen) {
      for (auto& w : v) w = gen;  // every word carries the same generation
      seqlock_write(&seq, words, v, kWords);
    }
    done = true;
  });
  std::vector<std::thread> readers;
  std::atomic<std::uint64_t> torn{0}, good{0};
  for (int r = 0; r < 2; ++r) {
    readers.emplace_back([&] {
      std::uint64_t v[kWords];
      std::uint64_t last = 0, mine = 0;
      // Until the writer is done, and at least once each (a loaded machine may not run a reader
      // before the writer finishes; after that the words are stable and a read succeeds).
      while (!done.load() || mine == 0) {
        if (!seqlock_read(&seq, words, v, kWords, nullptr, 1000)) continue;
        ++mine;
        for (auto w : v)
          if (w != v[0]) ++torn;
        if (v[0] < last) ++torn;  // generations never go backwards
        last = v[0];
        ++good;
      }
    });
  }
  writer.join();
  for (auto& t : readers) t.join();
  EXPECT_EQ(torn.load(), 0u);
  EXPECT_GT(good.load(), 0u);
}

TEST(Seqlock, StuckWriterDoesNotHangReaders) {
  std::atomic<std::uint64_t> seq{3};  // odd: a writer died mid-write
  std::atomic<std::uint64_t> words[2] = {};
  std::uint64_t v[2];
  EXPECT_FALSE(seqlock_read(&seq, words, v, 2));
  seq = 4;
  EXPECT_TRUE(seqlock_read(&seq, words, v, 2));
}

}  // namespace
}  // namespace gswap::proto
