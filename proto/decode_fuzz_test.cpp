// decode_fuzz_test.cpp: a randomized test that throws over a million malformed handshake messages
// and ring-record batches at the daemon-side decoders. No input may crash or hang them, valid
// input must decode, and every corruption that breaks a rule must be reported (the daemon then
// drops the client).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "proto/decode.h"
#include "proto/wire.h"

namespace gswap::proto {
namespace {

// Counts what it is given and checks the decoder's promises about launch region lists.
struct CountingSink final : EventSink {
  std::uint64_t events = 0;
  void on_alloc(std::uint64_t, std::uint32_t, std::uint64_t region, std::uint64_t,
                std::uint64_t bytes) override {
    EXPECT_NE(region, 0u);
    EXPECT_NE(bytes, 0u);
    ++events;
  }
  void on_free(std::uint64_t, std::uint64_t) override { ++events; }
  void on_launch(std::uint64_t, std::uint32_t, std::uint64_t, const std::uint64_t* regions,
                 std::uint32_t n, bool) override {
    EXPECT_LE(n, kMaxLaunchRegions);
    for (std::uint32_t i = 0; i < n; ++i) EXPECT_NE(regions[i], 0u);
    ++events;
  }
  void on_copy(std::uint64_t, std::uint32_t, std::uint64_t, std::uint64_t, std::uint64_t,
               std::uint32_t link) override {
    EXPECT_LE(link, kCopyLinkToHost);
    ++events;
  }
  void on_eviction(std::uint64_t, std::uint64_t, std::uint64_t) override { ++events; }
  void on_restore(std::uint64_t, std::uint64_t, std::uint64_t, bool) override { ++events; }
  void on_stall(std::uint64_t, std::uint64_t) override { ++events; }
  void on_gpu_timing(std::uint64_t, std::uint64_t, std::uint64_t) override { ++events; }
  void on_iteration_mark(std::uint64_t) override { ++events; }
  void on_name(NameKind, std::uint64_t, std::uint32_t, const char*, bool) override { ++events; }
  void on_lateness(std::uint64_t, std::uint64_t, std::uint64_t, bool) override { ++events; }
  void on_divergence(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t) override {
    ++events;
  }
  void on_swap_done(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t,
                    std::uint64_t) override {
    ++events;
  }
  void on_clock(std::uint64_t, std::uint64_t) override { ++events; }
  void on_recomputable(std::uint64_t, std::uint64_t, const std::uint64_t*, std::uint32_t) override {
    ++events;
  }
  void on_not_recomputable(std::uint64_t) override { ++events; }
  void on_recomputed(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t, bool) override {
    ++events;
  }
};

// Appends a valid event of a random kind.
void append_valid(std::mt19937_64& rng, std::vector<EventRecord>& out) {
  EventRecord r{};
  r.seq = rng();
  r.stream = static_cast<std::uint32_t>(rng() % 4);
  int kind = static_cast<int>(rng() % 14);
  if (kind == 0) {
    r.type = static_cast<std::uint16_t>(EventType::kAlloc);
    r.w[0] = 1 + rng() % 1000;
    r.w[1] = 1ull << 32;
    r.w[2] = 1 + rng() % (1 << 20);
    out.push_back(r);
  } else if (kind == 1) {
    std::uint32_t n = static_cast<std::uint32_t>(rng() % 40);
    r.type = static_cast<std::uint16_t>(EventType::kLaunch);
    r.count = static_cast<std::uint16_t>(n);
    r.w[0] = rng();
    std::uint32_t k = 0;
    for (; k < n && k < kLaunchInlineRegions; ++k) r.w[1 + k] = 1 + rng() % 1000;
    out.push_back(r);
    while (k < n) {
      EventRecord m{};
      m.type = static_cast<std::uint16_t>(EventType::kLaunchMore);
      m.seq = r.seq;
      m.stream = r.stream;
      std::uint32_t j = 0;
      for (; j < kLaunchMoreRegions && k < n; ++j, ++k) m.w[j] = 1 + rng() % 1000;
      m.count = static_cast<std::uint16_t>(j);
      out.push_back(m);
    }
  } else if (kind == 2) {
    r.type = static_cast<std::uint16_t>(EventType::kFree);
    r.w[0] = 1 + rng() % 1000;
    out.push_back(r);
  } else if (kind == 3) {
    r.type = static_cast<std::uint16_t>(EventType::kRestore);
    r.w[0] = 1 + rng() % 1000;
    r.w[1] = rng() % 4096;
    r.w[2] = rng() % 2;
    out.push_back(r);
  } else if (kind == 4) {
    r.type = static_cast<std::uint16_t>(EventType::kGpuTiming);
    r.w[0] = rng();
    r.w[1] = rng();
    out.push_back(r);
  } else if (kind == 5) {
    r.type =
        static_cast<std::uint16_t>(rng() % 2 ? EventType::kKernelName : EventType::kRegionName);
    r.w[0] = 1 + rng();
    r.count = static_cast<std::uint16_t>(rng() % kMaxNameChunks);
    r.flags = static_cast<std::uint16_t>(rng() % 2 ? kLastChunk : 0);
    for (int k = 1; k < 5; ++k) r.w[k] = rng();
    out.push_back(r);
  } else if (kind == 6) {
    r.type = static_cast<std::uint16_t>(EventType::kLateness);
    r.w[0] = rng();
    r.w[1] = rng() % 1000;
    r.w[2] = rng();
    r.w[3] = rng() % 2;
    out.push_back(r);
  } else if (kind == 7) {
    r.type = static_cast<std::uint16_t>(EventType::kDivergence);
    for (int k = 0; k < 4; ++k) r.w[k] = rng();
    out.push_back(r);
  } else if (kind == 8) {
    r.type = static_cast<std::uint16_t>(EventType::kSwapDone);
    r.w[0] = 1 + rng() % 1000;
    r.w[1] = rng();
    r.w[2] = rng() >> 2;
    r.w[3] = r.w[2] + rng() % 1000000;
    r.w[4] = rng() % 4;
    out.push_back(r);
  } else if (kind == 10) {
    r.type = static_cast<std::uint16_t>(EventType::kRecomputable);
    std::uint32_t count = static_cast<std::uint32_t>(rng() % (kMaxRecomputeSources + 1));
    r.count = static_cast<std::uint16_t>(count);
    r.w[0] = 1000 + rng() % 1000;
    r.w[1] = rng() % 1000000;
    for (std::uint32_t k = 0; k < count && k < kRecomputableInlineSources; ++k)
      r.w[2 + k] = 1 + rng() % 999;
    out.push_back(r);
    if (count > kRecomputableInlineSources) {
      EventRecord m{};
      m.type = static_cast<std::uint16_t>(EventType::kRecomputableMore);
      m.seq = r.seq;
      m.count = static_cast<std::uint16_t>(count - kRecomputableInlineSources);
      for (std::uint32_t k = 0; k < m.count; ++k) m.w[k] = 1 + rng() % 999;
      out.push_back(m);
    }
  } else if (kind == 11) {
    r.type = static_cast<std::uint16_t>(EventType::kNotRecomputable);
    r.w[0] = 1 + rng() % 1000;
    out.push_back(r);
  } else if (kind == 12) {
    r.type = static_cast<std::uint16_t>(EventType::kRecomputed);
    r.w[0] = 1 + rng() % 1000;
    r.w[1] = rng();
    r.w[2] = rng() >> 2;
    r.w[3] = r.w[2] + rng() % 1000;
    r.w[4] = rng() % 2;
    out.push_back(r);
  } else if (kind == 9) {
    r.type = static_cast<std::uint16_t>(EventType::kClock);
    r.w[0] = rng();
    r.w[1] = rng();
    out.push_back(r);
  } else {
    r.type = static_cast<std::uint16_t>(EventType::kIterationMark);
    out.push_back(r);
  }
}

TEST(DecodeFuzz, ValidStreamsDecodeFully) {
  std::mt19937_64 rng(1);
  for (int round = 0; round < 2000; ++round) {
    std::vector<EventRecord> recs;
    for (int k = 0; k < 20; ++k) append_valid(rng, recs);
    CountingSink sink;
    DecodeResult r = decode_events(recs.data(), recs.size(), true, sink);
    ASSERT_TRUE(r.ok) << r.error << " at " << r.error_index;
    EXPECT_EQ(r.consumed, recs.size());
    EXPECT_EQ(sink.events, 20u);
  }
}

TEST(DecodeFuzz, MillionMalformedBatchesAndHellos) {
  std::mt19937_64 rng(12345);
  const std::uint8_t uuid[16] = {9, 9, 9};
  std::uint64_t rejected = 0, total = 0;
  std::vector<EventRecord> recs;
  std::vector<unsigned char> bytes;
  for (int round = 0; round < 1000000; ++round) {
    CountingSink sink;
    int mode = round % 4;
    if (mode == 0) {
      // Pure garbage of random length (often not a multiple of the record size).
      bytes.resize(rng() % 300);
      for (auto& b : bytes) b = static_cast<unsigned char>(rng());
      DecodeResult r = decode_event_bytes(bytes.data(), bytes.size(), sink);
      if (!r.ok) ++rejected;
      ++total;
    } else if (mode == 1) {
      // A valid batch with one field broken in a way that violates a rule.
      recs.clear();
      for (int k = 0; k < 4; ++k) append_valid(rng, recs);
      EventRecord& victim = recs[rng() % recs.size()];
      switch (rng() % 7) {
        case 0:
          victim.type = static_cast<std::uint16_t>(kMaxEventType + 1 + rng() % 60000);
          break;
        case 1:
          victim.reserved0 = static_cast<std::uint16_t>(1 + rng() % 60000);
          break;
        case 2:
          victim.reserved1 = static_cast<std::uint32_t>(1 + rng() % 1000);
          break;
        case 3:
          victim.flags = static_cast<std::uint16_t>(2 + rng() % 100);
          break;
        case 4:
          if (victim.type == static_cast<std::uint16_t>(EventType::kLaunchMore))
            victim.count = 0;  // a continuation that carries fewer ids than its launch needs
          else
            victim.type = static_cast<std::uint16_t>(EventType::kLaunchMore);
          break;
        case 5:
          victim.type = static_cast<std::uint16_t>(EventType::kLaunch);
          victim.count = static_cast<std::uint16_t>(kMaxLaunchRegions + 1 + rng() % 1000);
          break;
        default:
          victim.w[4] = 1 + rng() % 1000;
          victim.type = static_cast<std::uint16_t>(EventType::kFree);
          victim.count = 0;
          victim.flags = 0;
          break;
      }
      DecodeResult r = decode_events(recs.data(), recs.size(), true, sink);
      EXPECT_FALSE(r.ok) << "round " << round;
      if (!r.ok) ++rejected;
      ++total;
    } else if (mode == 2) {
      // A valid batch cut mid-group or bit-flipped anywhere: must never crash.
      recs.clear();
      for (int k = 0; k < 3; ++k) append_valid(rng, recs);
      auto* raw = reinterpret_cast<unsigned char*>(recs.data());
      std::size_t len = recs.size() * sizeof(EventRecord);
      raw[rng() % len] ^= static_cast<unsigned char>(1u << (rng() % 8));
      std::size_t cut = recs.size() - rng() % 2;
      decode_events(recs.data(), cut, true, sink);
      ++total;
    } else {
      // Handshake messages: random sizes, and a good hello with one byte changed.
      Hello h{};
      h.magic = kHelloMagic;
      h.version = kProtocolVersion;
      h.kind = 1;
      h.pid = 7;
      std::memcpy(h.gpu_uuid, uuid, 16);
      auto* raw = reinterpret_cast<unsigned char*>(&h);
      // Magic, version, kind and UUID bytes (a changed pid may legitimately be another process).
      std::size_t pos = rng() % 28;
      if (pos >= 12) pos += 4;
      raw[pos] ^= static_cast<unsigned char>(1 + rng() % 255);
      std::size_t len = (rng() % 8 == 0) ? rng() % (2 * sizeof(Hello)) : sizeof(Hello);
      bytes.assign(raw, raw + sizeof(Hello));
      bytes.resize(len < 1 ? 1 : len);
      Hello out;
      HelloStatus st = check_hello(bytes.data(), bytes.size(), uuid, &out);
      // Changing kind to control (2) is legitimately accepted; every other change is refused.
      bool became_control = len == sizeof(Hello) && pos >= 8 && pos < 12 && h.kind == 2;
      if (!became_control) {
        EXPECT_NE(st, HelloStatus::kOk) << "pos " << pos;
      }
      if (st != HelloStatus::kOk) ++rejected;
      ++total;
    }
  }
  EXPECT_EQ(total, 1000000u);
  EXPECT_GT(rejected, 700000u);
}

}  // namespace
}  // namespace gswap::proto
