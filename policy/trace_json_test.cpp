// trace_json_test.cpp: the JSON trace format round-trips and rejects malformed input by path.
#include "policy/trace_json.h"

#include <gtest/gtest.h>

#include <random>

#include "policy/analysis.h"
#include "policy/planners.h"
#include "policy/test_traces.h"

namespace gswap::policy {
namespace {

const char* kExample = R"({"format": "gswap-trace", "version": 1,
 "device": {"capacity_bytes": 85899345920, "h2d_bytes_per_s": 5.0e10, "d2h_bytes_per_s": 5.0e10},
 "regions": [{"id": 3, "bytes": 1024, "alloc_seq": 0, "free_seq": null},
             {"id": 7, "bytes": 33554432, "alloc_seq": 12, "free_seq": 480,
              "recompute": {"cost_us": 40.0, "sources": [3]}}],
 "launches": [{"seq": 12, "start_us": 103.5, "dur_us": 21.0, "stream": 0,
               "regions": [3, 7], "kernel": "sgemm_128x64"}],
 "iterations": [{"first_seq": 0, "last_seq": 999}]})";

TEST(TraceJsonTest, ParsesIssueExample) {
  Trace t;
  std::string err;
  ASSERT_TRUE(parse_trace_json(kExample, &t, &err)) << err;
  EXPECT_EQ(t.device.capacity_bytes, 85899345920ull);
  ASSERT_EQ(t.regions.size(), 2u);
  EXPECT_FALSE(t.regions[0].free_seq.has_value());
  EXPECT_EQ(*t.regions[1].free_seq, 480u);
  ASSERT_TRUE(t.regions[1].recompute.has_value());
  EXPECT_EQ(t.regions[1].recompute->sources, std::vector<RegionId>{3});
  ASSERT_EQ(t.launches.size(), 1u);
  EXPECT_EQ(t.launches[0].kernel, "sgemm_128x64");
  EXPECT_DOUBLE_EQ(t.launches[0].start_us, 103.5);
  ASSERT_EQ(t.iterations.size(), 1u);
  EXPECT_EQ(t.iterations[0].last_seq, 999u);
}

TEST(TraceJsonTest, RoundTripIsExact) {
  Trace t;
  std::string err;
  ASSERT_TRUE(parse_trace_json(kExample, &t, &err)) << err;
  t.launches[0].dur_us = 0.1 + 0.2;  // a value with no short decimal form
  Trace back;
  ASSERT_TRUE(parse_trace_json(write_trace_json(t), &back, &err)) << err;
  EXPECT_EQ(write_trace_json(back), write_trace_json(t));
  EXPECT_EQ(back.launches[0].dur_us, t.launches[0].dur_us);
  EXPECT_EQ(back.regions[1].recompute->cost_us, 40.0);
  EXPECT_EQ(back.launches[0].link, CopyLink::kNone);
}

// A launch that is the program's own copy over the link says which way it crosses.
TEST(TraceJsonTest, CopyLinks) {
  Trace t;
  std::string err;
  ASSERT_TRUE(parse_trace_json(kExample, &t, &err)) << err;
  ASSERT_EQ(t.launches.size(), 1u);
  Launch down = t.launches[0];
  down.seq += 1;
  t.launches.push_back(down);
  t.launches[0].link = CopyLink::kToDevice;
  t.launches[1].link = CopyLink::kToHost;
  const std::string text = write_trace_json(t);
  EXPECT_NE(text.find("\"link\":\"h2d\""), std::string::npos) << text;
  Trace back;
  ASSERT_TRUE(parse_trace_json(text, &back, &err)) << err;
  EXPECT_EQ(back.launches[0].link, CopyLink::kToDevice);
  EXPECT_EQ(back.launches[1].link, CopyLink::kToHost);
  std::string bad = text;
  bad.replace(bad.find("\"h2d\""), 5, "\"pcie\"");
  EXPECT_FALSE(parse_trace_json(bad, &back, &err));
  EXPECT_NE(err.find("launches[0].link"), std::string::npos) << err;
}

// A kernel name that is not UTF-8 (a program's own bytes) is written, not thrown on.
TEST(TraceJsonTest, WritesNamesThatAreNotUtf8) {
  Trace t;
  std::string err;
  ASSERT_TRUE(parse_trace_json(kExample, &t, &err)) << err;
  t.launches[0].kernel = "gemm\xff\xc3";
  std::string text;
  ASSERT_NO_THROW(text = write_trace_json(t));
  Trace back;
  ASSERT_TRUE(parse_trace_json(text, &back, &err)) << err;
  EXPECT_EQ(back.launches[0].kernel, "gemm\ufffd\ufffd");
}

std::string mutate(const std::string& from, const std::string& to) {
  std::string s = kExample;
  auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  return s.replace(pos, from.size(), to);
}

void expect_rejected(const std::string& text, const std::string& path_prefix) {
  Trace t;
  std::string err;
  EXPECT_FALSE(parse_trace_json(text, &t, &err));
  EXPECT_EQ(err.rfind(path_prefix, 0), 0u) << "error was: " << err;
}

TEST(TraceJsonTest, RejectsWithJsonPath) {
  expect_rejected(mutate("\"regions\": [3, 7]", "\"regions\": [3, 99]"),
                  "launches[0].regions[1]: unknown region 99");
  expect_rejected(mutate("\"gswap-trace\"", "\"other\""), "format:");
  expect_rejected(mutate("\"version\": 1", "\"version\": 2"), "version:");
  expect_rejected(mutate("\"bytes\": 1024", "\"bytes\": -4"), "regions[0].bytes:");
  expect_rejected(mutate("\"sources\": [3]", "\"sources\": [3, 42]"),
                  "regions[1].recompute.sources[1]: unknown region 42");
  expect_rejected(mutate("\"dur_us\": 21.0", "\"dur_us\": \"x\""), "launches[0].dur_us:");
  expect_rejected(mutate("\"kernel\": \"sgemm_128x64\"", "\"kern\": 1"),
                  "launches[0].kernel: missing");
  expect_rejected(mutate("\"id\": 7", "\"id\": 3"), "regions[1].id: duplicate");
  expect_rejected(mutate("\"free_seq\": 480", "\"free_seq\": 5"), "regions[1].free_seq:");
  expect_rejected(mutate("\"h2d_bytes_per_s\": 5.0e10", "\"h2d_bytes_per_s\": 0"),
                  "device.h2d_bytes_per_s:");
  expect_rejected(mutate("\"last_seq\": 999", "\"last_seq\": \"a\""), "iterations[0].last_seq:");
  // Sizes whose sums could overflow (a region of 2^64 - 1 bytes would wrap the live bytes).
  expect_rejected(mutate("\"bytes\": 1024", "\"bytes\": 18446744073709551615"),
                  "regions[0].bytes: 18446744073709551615 bytes is larger than a region may be");
  expect_rejected(mutate("\"bytes\": 1024", "\"bytes\": 1125899906842625"),
                  "regions[0].bytes: 1125899906842625 bytes is larger");
  // A launch touches a region only between its allocation and its free.
  expect_rejected(
      mutate("\"seq\": 12", "\"seq\": 11"),
      "launches[0].regions[1]: region 7 is used before it was allocated (alloc_seq 12)");
  expect_rejected(mutate("\"seq\": 12", "\"seq\": 480"),
                  "launches[0].regions[1]: region 7 is used after it was freed (free_seq 480)");
  // A field given twice says two things; neither is taken.
  expect_rejected(mutate("\"dur_us\": 21.0", "\"dur_us\": 21.0, \"dur_us\": 99999.0"),
                  "launches[0].dur_us: given more than once");
  expect_rejected(mutate("\"version\": 1", "\"version\": 1, \"version\": 1"),
                  "version: given more than once");
  expect_rejected(mutate("\"sources\": [3]", "\"sources\": [3], \"sources\": [3]"),
                  "regions[1].recompute.sources: given more than once");
  // Nesting deeper than any trace has is refused where it goes too deep (an unknown field, which
  // is otherwise ignored, may not hold it either).
  expect_rejected(
      mutate("\"dur_us\": 21.0",
             "\"dur_us\": 21.0, \"x\": " + std::string(100, '[') + std::string(100, ']')),
      "launches[0].x" +
          [] {
            std::string p;
            for (int k = 0; k < 61; ++k) p += "[0]";
            return p;
          }() +
          ": nested more than 64 deep");
  {  // 63 levels are read.
    Trace t;
    std::string err;
    EXPECT_TRUE(parse_trace_json(
        mutate("\"dur_us\": 21.0",
               "\"dur_us\": 21.0, \"x\": " + std::string(59, '[') + std::string(59, ']')),
        &t, &err))
        << err;
  }
  expect_rejected("{\"format\": ", "$: not valid JSON");
  expect_rejected("[1,2]", "$: expected an object");
  // A NUL byte would end the reader's input, and the text after it go unread.
  expect_rejected(std::string(kExample) + std::string(1, '\0') + "garbage{{",
                  "$: not valid JSON: a NUL byte at offset");
}

// Text nlohmann itself refuses, even by throwing (a number that overflows a double), is reported
// like any other malformed trace: false and a message, never an exception.
// A source named more than once is kept once, in the order first named.
TEST(TraceJsonTest, ASourceNamedTwiceIsKeptOnce) {
  Trace t;
  std::string err;
  ASSERT_TRUE(parse_trace_json(mutate("\"sources\": [3]", "\"sources\": [3, 3, 3]"), &t, &err))
      << err;
  bool found = false;
  for (const Region& r : t.regions)
    if (r.recompute) {
      found = true;
      EXPECT_EQ(r.recompute->sources, std::vector<RegionId>{3});
    }
  EXPECT_TRUE(found);
}

TEST(TraceJsonTest, NumbersThatOverflowAreRejectedNotThrown) {
  Trace t;
  std::string err;
  bool ok = true;
  EXPECT_NO_THROW(ok = parse_trace_json(mutate("\"dur_us\": 21.0", "\"dur_us\": 1e400"), &t, &err));
  EXPECT_FALSE(ok);
  EXPECT_EQ(err.rfind("$: not valid JSON: ", 0), 0u) << err;
  EXPECT_NE(err.find("1e400"), std::string::npos) << err;
  EXPECT_NO_THROW(ok = parse_trace_json(mutate("\"bytes\": 1024", "\"bytes\": -1e999"), &t, &err));
  EXPECT_FALSE(ok);
  EXPECT_EQ(err.rfind("$: not valid JSON: ", 0), 0u) << err;
}

// Times and bandwidths that would make the ideal timeline or a copy's time non-finite (or absurd)
// are refused: at most 1e12 us per start, duration or recompute cost, at least 1 byte/s.
TEST(TraceJsonTest, TimesAndBandwidthsStayFinite) {
  expect_rejected(mutate("\"dur_us\": 21.0", "\"dur_us\": 1e308"),
                  "launches[0].dur_us: 1e+308 us is longer than a trace time may be");
  expect_rejected(mutate("\"start_us\": 103.5", "\"start_us\": 1.5e12"),
                  "launches[0].start_us: 1.5e+12 us is longer");
  expect_rejected(mutate("\"cost_us\": 40.0", "\"cost_us\": 2e12"),
                  "regions[1].recompute.cost_us: 2e+12 us is longer");
  expect_rejected(mutate("\"h2d_bytes_per_s\": 5.0e10", "\"h2d_bytes_per_s\": 1e-300"),
                  "device.h2d_bytes_per_s: must be at least 1 byte/s, got 1e-300");
  expect_rejected(mutate("\"d2h_bytes_per_s\": 5.0e10", "\"d2h_bytes_per_s\": 0.5"),
                  "device.d2h_bytes_per_s: must be at least 1 byte/s");
  // Just past a limit, the message shows the value, not the limit it rounds to.
  expect_rejected(mutate("\"dur_us\": 21.0", "\"dur_us\": 1.0000001e12"),
                  "launches[0].dur_us: 1000000100000 us is longer");
  expect_rejected(mutate("\"h2d_bytes_per_s\": 5.0e10", "\"h2d_bytes_per_s\": 0.9999999"),
                  "device.h2d_bytes_per_s: must be at least 1 byte/s, got 0.9999999");
  Trace t;
  std::string err;
  EXPECT_TRUE(parse_trace_json(mutate("\"dur_us\": 21.0", "\"dur_us\": 1e12"), &t, &err)) << err;
  EXPECT_TRUE(
      parse_trace_json(mutate("\"h2d_bytes_per_s\": 5.0e10", "\"h2d_bytes_per_s\": 1"), &t, &err))
      << err;
}

// The edges of the limits: a region of exactly 1 PiB and a launch at its alloc_seq and just before
// its free_seq are accepted; 1,025 regions of 1 PiB hold more than 1 EiB together.
TEST(TraceJsonTest, LimitsAndLifetimes) {
  Trace t;
  std::string err;
  EXPECT_TRUE(parse_trace_json(mutate("\"bytes\": 1024", "\"bytes\": 1125899906842624"), &t, &err))
      << err;
  EXPECT_TRUE(parse_trace_json(mutate("\"seq\": 12", "\"seq\": 479"), &t, &err)) << err;
  std::string many = R"({"format": "gswap-trace", "version": 1,
 "device": {"capacity_bytes": 1, "h2d_bytes_per_s": 1, "d2h_bytes_per_s": 1}, "regions": [)";
  for (int i = 0; i < 1025; ++i)
    many += (i ? "," : "") + std::string("{\"id\": ") + std::to_string(i) +
            ", \"bytes\": 1125899906842624, \"alloc_seq\": 0}";
  many += R"(], "launches": []})";
  expect_rejected(many, "regions[1024].bytes: the regions hold more than 1 EiB");
}

// Plans: what gswapd follows, written by `gswapctl trace dump --plan-out` and read by
// `gswapctl simulate --plan`, checked against the trace it was made for.
// What every policy plans reads back as written (DELTA once released at the iteration's end with
// a position past it, which the reader refuses).
TEST(PlanJsonTest, EveryPolicysPlansReadBack) {
  std::mt19937_64 rng(11);
  for (int k = 0; k < 150; ++k) {
    const Trace t = testing::random_trace(rng);
    const Analysis a = analyze(t);
    for (int pct : {30, 50, 70, 90}) {
      const std::uint64_t budget = a.peak_bytes * pct / 100;
      for (PolicyKind p : kAllPolicies) {
        const Plan plan = make_plan(p, a, budget);
        Plan back;
        std::string err;
        ASSERT_TRUE(parse_plan_json(write_plan_json(plan), t, &back, &err))
            << policy_name(p) << " trace " << k << " at " << pct << "%: " << err;
        ASSERT_EQ(back.entries.size(), plan.entries.size());
        for (std::size_t e = 0; e < plan.entries.size(); ++e) {
          EXPECT_EQ(back.entries[e].evict_after, plan.entries[e].evict_after);
          EXPECT_EQ(back.entries[e].evict_at, plan.entries[e].evict_at);
          EXPECT_EQ(back.entries[e].trigger, plan.entries[e].trigger);
          EXPECT_EQ(back.entries[e].back_access, plan.entries[e].back_access);
        }
      }
    }
  }
}

TEST(PlanJsonTest, RoundTripAndChecksAgainstTheTrace) {
  Trace t;
  std::string err;
  ASSERT_TRUE(parse_trace_json(kExample, &t, &err)) << err;
  Plan plan;
  plan.policy = "capuchin";
  PlanEntry a;
  a.region = 7;
  a.kind = EvictKind::kRecompute;
  a.evict_after = 0;
  a.back_access = 0;  // a wrap
  a.swap_in_us = 0.1 + 0.2;
  PlanEntry b;
  b.region = 3;
  b.evict_after = 0;  // no trigger, no back access: null positions
  // A copy's time may be past what a trace's times may be: 2^50 bytes over a 1 byte/s link.
  b.swap_in_us = 0x1p50 * 1e6;
  plan.entries = {a, b};
  Plan back;
  ASSERT_TRUE(parse_plan_json(write_plan_json(plan), t, &back, &err)) << err;
  EXPECT_EQ(back.entries[1].swap_in_us, 0x1p50 * 1e6);
  EXPECT_EQ(back.policy, "capuchin");
  ASSERT_EQ(back.entries.size(), 2u);
  EXPECT_EQ(back.entries[0].kind, EvictKind::kRecompute);
  EXPECT_EQ(back.entries[0].back_access, 0u);
  EXPECT_EQ(back.entries[0].swap_in_us, 0.1 + 0.2);
  EXPECT_EQ(back.entries[1].trigger, kNoLaunch);
  EXPECT_EQ(back.entries[1].back_access, kNoLaunch);
  EXPECT_EQ(back.entries[1].evict_at, kNoLaunch);

  auto rejects = [&](const std::string& text, const std::string& path) {
    Plan p;
    std::string e;
    EXPECT_FALSE(parse_plan_json(text, t, &p, &e)) << text;
    EXPECT_EQ(e.rfind(path, 0), 0u) << e;
  };
  const std::string head = R"({"format": "gswap-plan", "version": 1, "entries": [)";
  rejects(head + R"({"region": 9, "kind": "swap", "evict_after": 0, "trigger": null,
          "back_access": null}]})",
          "entries[0].region: unknown region 9");
  rejects(head + R"({"region": 3, "kind": "swap", "evict_after": 1, "trigger": null,
          "back_access": null}]})",
          "entries[0].evict_after: 1 is past");
  rejects(head + R"({"region": 3, "kind": "drop", "evict_after": 0, "trigger": null,
          "back_access": null}]})",
          "entries[0].kind");
  rejects(head + R"({"region": 3, "kind": "swap", "evict_after": 0, "trigger": null,
          "back_access": null}, {"region": 3, "region": 3, "kind": "swap"}]})",
          "entries[1].region: given more than once");
  rejects(head + R"({"region": 3, "kind": "recompute", "evict_after": 0, "trigger": null,
          "back_access": null}]})",
          "entries[0].kind: region 3 is not recomputable");
  rejects(head + R"({"region": 3, "kind": "swap", "evict_after": 0, "trigger": -1,
          "back_access": null}]})",
          "entries[0].trigger");
  rejects(head + R"({"region": 3, "kind": "swap", "evict_after": 0}]})",
          "entries[0].trigger: missing");
  rejects(R"({"format": "gswap-trace", "version": 1, "entries": []})", "format");
  rejects(R"({"format": "gswap-plan", "version": 2, "entries": []})", "version");
  rejects("[1, 2", "$: not valid JSON");
}

}  // namespace
}  // namespace gswap::policy
