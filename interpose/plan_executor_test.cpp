// plan_executor_test.cpp: following a plan on the launch path (plan_executor.h) with hand-made
// plans and a fake PlanActions: how regions are resolved (persistent by id, per-iteration bound at
// their first access), when triggers and planned swap-outs fire, how a divergence stops the plan
// for the rest of its iteration, and that stale or out-of-range entries (a region that no longer
// exists, a recycled region object, a position past the iteration, a slot the access does not
// have) are ignored without a crash. A plan can cost time, never correctness: the executor only
// asks for moves, and it must never ask for one the plan does not justify.
#include "interpose/plan_executor.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <map>
#include <thread>
#include <vector>

namespace gswap::interpose {
namespace {

using proto::kNoOffset;

// Function ids as the launch path makes them: a kernel's handle | 1.
constexpr std::uint64_t kFwd = 0x1001, kBwd = 0x2001, kLoss = 0x3001, kSgd = 0x4001;
constexpr std::uint64_t kCopy = proto::kCopyFunction;

struct Call {
  Region* region;
  std::uint64_t id, tag;
};
struct Late {
  std::uint64_t generation, entry, late_ns;
  bool missed;
};
struct Divergence {
  std::uint64_t generation, offset, expected, got;
};

// Records what the executor asks for. A prefetch tags its region as the swapper would, so the
// back-access can tell an on-time restore.
class FakeActions : public PlanActions {
 public:
  std::map<std::uint64_t, Region*> live;
  std::vector<Call> evicts, prefetches, drops;  // drops: evictions that drop (kRecompute)
  std::vector<std::uint64_t> dues;              // per prefetch: its back-access's call number
  std::vector<Late> lateness_reports;
  std::vector<Divergence> divergences;
  int iterations = 0;
  bool refuse = false;                    // the command queue is full
  std::function<void()> during_prefetch;  // runs inside prefetch() (re-entry tests)

  Region* region_by_id(std::uint64_t id) override {
    auto it = live.find(id);
    return it == live.end() ? nullptr : it->second;
  }
  bool evict(Region* r, std::uint64_t id, std::uint64_t tag, bool drop) override {
    if (refuse) return false;
    evicts.push_back({r, id, tag});
    if (drop) drops.push_back({r, id, tag});
    r->plan_tag.store(tag | plan_tag::kEvicted);
    return true;
  }
  bool prefetch(Region* r, std::uint64_t id, std::uint64_t tag, std::uint64_t due) override {
    if (during_prefetch) during_prefetch();
    if (refuse) return false;
    prefetches.push_back({r, id, tag});
    dues.push_back(due);
    r->plan_tag.store(tag | plan_tag::kPrefetched);
    return true;
  }
  void lateness(std::uint64_t generation, std::uint64_t entry, std::uint64_t late_ns,
                bool missed) override {
    lateness_reports.push_back({generation, entry, late_ns, missed});
  }
  void divergence(std::uint64_t generation, std::uint64_t offset, std::uint64_t expected,
                  std::uint64_t got) override {
    divergences.push_back({generation, offset, expected, got});
  }
  void iteration_started() override { ++iterations; }
};

// A region object as residency hands them out (recycled, never freed).
struct Regions {
  std::vector<std::unique_ptr<Region>> all;
  Region* make(std::uint64_t id) {
    all.push_back(std::make_unique<Region>());
    all.back()->id = id;
    all.back()->state.store(kRegionResident);
    return all.back().get();
  }
};

proto::PlanHeader guided(std::uint64_t generation, std::uint64_t seq_length,
                         std::vector<std::uint64_t> signature, std::uint32_t n,
                         std::uint32_t measure_every = 0) {
  proto::PlanHeader h{};
  h.generation = generation;
  h.mode = static_cast<std::uint32_t>(proto::PlanMode::kGuided);
  h.num_entries = n;
  h.iteration_length = seq_length;
  h.seq_length = seq_length;
  h.signature_length = static_cast<std::uint32_t>(signature.size());
  h.measure_every = measure_every;
  for (std::size_t i = 0; i < signature.size() && i < proto::kSignatureLength; ++i)
    h.signature[i] = signature[i];
  return h;
}

proto::PlanEntry swap_entry() {
  proto::PlanEntry e{};
  e.action = static_cast<std::uint16_t>(proto::PlanAction::kSwap);
  e.bind_offset = kNoOffset;
  e.evict_after = kNoOffset;
  e.trigger = kNoOffset;
  e.back_access = kNoOffset;
  return e;
}

// A per-iteration region: the second one the first forward kernel (offset 2) names, evicted
// after `evict_after`, prefetched before the first backward kernel (7), back at offset 8.
proto::PlanEntry activation_entry(std::uint64_t evict_after) {
  proto::PlanEntry e = swap_entry();
  e.bind_offset = 2;
  e.bind_slot = 1;
  e.evict_after = evict_after;
  e.evict_function = kFwd;
  e.trigger = 7;
  e.trigger_function = kBwd;
  e.back_access = 8;
  return e;
}

// One iteration of a small training step, as seq offsets: upload, upload, 3 forward kernels, the
// loss, 3 backward kernels, the update. The signature (copy, copy, fwd) occurs only at its start.
const std::vector<std::uint64_t> kIteration = {kCopy, kCopy, kFwd, kFwd, kFwd,
                                               kLoss, kBwd,  kBwd, kBwd, kSgd};
const std::vector<std::uint64_t> kSignature = {kCopy, kCopy, kFwd};
constexpr std::uint64_t kLen = 10;

// Where most tests start: region 7 (w) is live, an executor acts on `fake`, and `e` is a swap entry
// for region 7 to fill in.
class PlanExecutorOneRegion : public ::testing::Test {
 protected:
  PlanExecutorOneRegion() {
    fake.live[7] = w;
    e.region_id = 7;
  }
  FakeActions fake;
  Regions regions;
  Region* w = regions.make(7);
  PlanExecutor exec{fake};
  proto::PlanEntry e = swap_entry();
};

// Drives the executor like the launch path: before() once the access's regions are resident,
// the access, then after().
struct Driver {
  PlanExecutor& exec;
  std::uint64_t seq = 1000;  // calls are numbered from wherever the process is
  PlanExecutor::Step access(std::uint64_t function, std::vector<Region*> regions = {}) {
    TouchSet t;
    for (Region* r : regions) t.add(r);
    PlanExecutor::Step s;
    exec.before(seq++, function, t, &s);
    exec.after(s);
    return s;
  }
  // One iteration with kIteration's functions; regions[o] are the regions of the access at o.
  void iteration(const std::map<std::uint64_t, std::vector<Region*>>& regions = {}) {
    for (std::uint64_t o = 0; o < kLen; ++o) {
      auto it = regions.find(o);
      access(kIteration[o], it == regions.end() ? std::vector<Region*>{} : it->second);
    }
  }
};

TEST(PlanExecutor, PassiveUntilAPlanArrivesAndAfterItIsUnloaded) {
  FakeActions fake;
  PlanExecutor exec(fake);
  Driver d{exec};
  EXPECT_FALSE(exec.active());
  EXPECT_EQ(d.access(kFwd).plan, nullptr);

  proto::PlanHeader measure{};
  measure.generation = 3;
  measure.mode = static_cast<std::uint32_t>(proto::PlanMode::kMeasure);
  exec.load(measure, nullptr, 0);
  EXPECT_TRUE(exec.active());
  EXPECT_EQ(exec.generation(), 3u);
  EXPECT_TRUE(d.access(kFwd).measure) << "measure mode times every kernel";

  proto::PlanHeader passive{};
  passive.generation = 4;
  exec.load(passive, nullptr, 0);
  EXPECT_FALSE(exec.active());
  EXPECT_EQ(exec.generation(), 0u);
  PlanExecutor::Step s = d.access(kFwd);
  EXPECT_EQ(s.plan, nullptr);
  EXPECT_FALSE(s.measure);
}

TEST_F(PlanExecutorOneRegion, PersistentRegionEvictedAfterItsAccessAndPrefetchedAtItsTrigger) {
  e.evict_after = 3;  // after the second forward kernel
  e.evict_function = kFwd;
  e.trigger = 6;  // restore starts before the first backward kernel
  e.trigger_function = kBwd;
  e.back_access = 8;
  exec.load(guided(1, kLen, kSignature, 1), &e, 1);

  Driver d{exec};
  d.access(kSgd);  // the tail of an iteration the executor never saw the start of
  EXPECT_TRUE(fake.evicts.empty());
  for (std::uint64_t o = 0; o < kLen; ++o) {
    std::size_t evicts = fake.evicts.size(), prefetches = fake.prefetches.size();
    d.access(kIteration[o], o == 3 || o == 8 ? std::vector<Region*>{w} : std::vector<Region*>{});
    EXPECT_EQ(fake.evicts.size(), evicts + (o == 3)) << "offset " << o;
    EXPECT_EQ(fake.prefetches.size(), prefetches + (o == 6)) << "offset " << o;
  }
  ASSERT_EQ(fake.evicts.size(), 1u);
  EXPECT_EQ(fake.evicts[0].region, w);
  EXPECT_EQ(fake.evicts[0].id, 7u);
  EXPECT_EQ(fake.evicts[0].tag, plan_tag::make(1, 0));
  ASSERT_EQ(fake.prefetches.size(), 1u);
  EXPECT_EQ(fake.prefetches[0].tag, plan_tag::make(1, 0));
  EXPECT_EQ(fake.dues[0], 1001u + 8) << "the back-access's call number orders the prefetch";
  // The back-access found the region still tagged by its prefetch: on time, reported, untagged.
  ASSERT_EQ(fake.lateness_reports.size(), 1u);
  EXPECT_EQ(fake.lateness_reports[0].generation, 1u);
  EXPECT_EQ(fake.lateness_reports[0].entry, 0u);
  EXPECT_EQ(fake.lateness_reports[0].late_ns, 0u);
  EXPECT_FALSE(fake.lateness_reports[0].missed);
  EXPECT_EQ(w->plan_tag.load(), 0u);
  EXPECT_EQ(fake.iterations, 1);
  EXPECT_TRUE(fake.divergences.empty());

  // The next iteration does it again, and the first one counts as followed to its end.
  d.iteration({{3, {w}}, {8, {w}}});
  EXPECT_EQ(fake.evicts.size(), 2u);
  EXPECT_EQ(fake.prefetches.size(), 2u);
  EXPECT_EQ(exec.counters().guided_iterations.load(), 1u);
  EXPECT_EQ(exec.counters().divergences.load(), 0u);
  EXPECT_EQ(fake.dues[1], 1011u + 8);
}

TEST_F(PlanExecutorOneRegion, APrefetchForTheNextIterationIsDueThere) {
  e.evict_after = 4;  // a wrap: out after the last forward kernel, back at the next upload
  e.trigger = 9;
  e.back_access = 1;
  e.back_lead = 1;  // the upload at offset 0 prepares it (as an allocation would)
  exec.load(guided(1, kLen, kSignature, 1), &e, 1);
  proto::PlanEntry none = swap_entry();  // and one with no back-access: never due
  none.region_id = 7;
  none.evict_after = 4;
  none.trigger = 6;
  Driver d{exec};
  d.iteration({{1, {w}}, {4, {w}}});
  ASSERT_EQ(fake.dues.size(), 1u);
  EXPECT_EQ(fake.dues[0], 1000u + kLen + 1 - 1);
  proto::PlanEntry both[2] = {e, none};
  exec.load(guided(2, kLen, kSignature, 2), both, 2);
  d.iteration({{1, {w}}, {4, {w}}});
  ASSERT_EQ(fake.dues.size(), 3u);
  EXPECT_EQ(fake.dues[1], ~0ull);
  EXPECT_EQ(fake.dues[2], 1010u + kLen + 1 - 1);
}

// A trigger at the back-access itself is for that access (a restore at the last moment), not for
// the next iteration's: the simulator counts it so. Taken for the next iteration's, the prefetch
// cancelled the swap-out the same access begins.
TEST_F(PlanExecutorOneRegion, APrefetchAtItsBackAccessIsDueThere) {
  e.evict_after = 3;
  e.trigger = 3;
  e.back_access = 3;
  e.back_lead = 0;
  exec.load(guided(1, kLen, kSignature, 1), &e, 1);
  Driver d{exec};
  d.iteration({{3, {w}}});
  ASSERT_EQ(fake.dues.size(), 1u);
  EXPECT_EQ(fake.dues[0], 1000u + 3);
}

TEST(PlanExecutor, PerIterationRegionBoundAtItsFirstAccessEveryIteration) {
  FakeActions fake;
  Regions regions;
  PlanExecutor exec(fake);
  proto::PlanEntry e = activation_entry(2);  // the first forward kernel writes it
  exec.load(guided(1, kLen, kSignature, 1), &e, 1);
  Driver d{exec};
  for (int it = 0; it < 3; ++it) {
    // A new allocation every iteration (another object, another id), as activations are.
    Region* in = regions.make(100 + it);
    Region* act = regions.make(200 + it);
    d.iteration({{2, {in, act}}, {3, {act}}, {8, {act}}});
    ASSERT_EQ(fake.evicts.size(), it + 1u);
    EXPECT_EQ(fake.evicts.back().region, act) << "iteration " << it;
    EXPECT_EQ(fake.evicts.back().id, 200u + it);
    ASSERT_EQ(fake.prefetches.size(), it + 1u);
    EXPECT_EQ(fake.prefetches.back().region, act);
  }
  EXPECT_EQ(fake.lateness_reports.size(), 3u);
  EXPECT_TRUE(fake.divergences.empty());
}

TEST(PlanExecutor, RegionThatNoLongerExistsIsIgnored) {
  FakeActions fake;
  Regions regions;
  Region* recycled = regions.make(8);
  fake.live[8] = recycled;
  PlanExecutor exec(fake);
  proto::PlanEntry e[2] = {swap_entry(), swap_entry()};
  // Entry 0 names region 5, which is not alive when the plan arrives (freed since the daemon
  // planned): nothing to evict or prefetch.
  e[0].region_id = 5;
  e[0].evict_after = 3;
  e[0].evict_function = kFwd;
  e[0].trigger = 6;
  e[0].trigger_function = kBwd;
  e[0].back_access = 8;
  // Entry 1 names region 8, alive at load; its object is then recycled for another allocation
  // (another id): the entry must not move the new one.
  e[1] = e[0];
  e[1].region_id = 8;
  exec.load(guided(1, kLen, kSignature, 2), e, 2);
  recycled->id = 9;
  Driver d{exec};
  d.iteration({{3, {recycled}}, {8, {recycled}}});
  d.iteration({{3, {recycled}}, {8, {recycled}}});
  EXPECT_TRUE(fake.evicts.empty());
  EXPECT_TRUE(fake.prefetches.empty());
  EXPECT_TRUE(fake.lateness_reports.empty());
  EXPECT_TRUE(fake.divergences.empty()) << "a missing region is no divergence";
  EXPECT_EQ(exec.counters().skipped.load(), 4u) << "two planned swap-outs per iteration skipped";
  EXPECT_EQ(recycled->plan_tag.load(), 0u);
}

TEST(PlanExecutor, PositionsPastTheIterationAreIgnored) {
  FakeActions fake;
  Regions regions;
  Region* w = regions.make(7);
  fake.live[7] = w;
  PlanExecutor exec(fake);
  proto::PlanEntry e[4] = {swap_entry(), swap_entry(), swap_entry(), swap_entry()};
  e[0].region_id = 7;  // swap-out far past the end
  e[0].evict_after = kLen + 100;
  e[0].evict_function = kFwd;
  e[0].trigger = 6;
  e[0].trigger_function = kBwd;
  e[1].region_id = 7;  // trigger exactly one past the end, back-access at kNoOffset - 1
  e[1].evict_after = 3;
  e[1].evict_function = kFwd;
  e[1].trigger = kLen;
  e[1].trigger_function = kBwd;
  e[1].back_access = kNoOffset - 1;
  e[2].bind_offset = kLen + 1;  // bound at an access that never comes: never acts
  e[2].evict_after = 4;
  e[2].evict_function = kFwd;
  e[2].trigger = 7;
  e[2].trigger_function = kBwd;
  e[3].bind_offset = 2;  // a slot the access does not have
  e[3].bind_slot = 5;
  e[3].evict_after = 4;
  e[3].evict_function = kFwd;
  exec.load(guided(1, kLen, kSignature, 4), e, 4);
  ASSERT_TRUE(exec.active());
  Driver d{exec};
  for (int it = 0; it < 3; ++it) d.iteration({{2, {regions.make(300 + it)}}, {3, {w}}});
  // Only entry 1's swap-out is inside the iteration and names something that exists.
  ASSERT_EQ(fake.evicts.size(), 3u);
  for (const Call& c : fake.evicts) EXPECT_EQ(c.tag, plan_tag::make(1, 1));
  // Entry 0's trigger is inside the iteration: the prefetch of a resident region is harmless
  // (residency ignores it), and the executor does ask.
  ASSERT_EQ(fake.prefetches.size(), 3u);
  for (const Call& c : fake.prefetches) EXPECT_EQ(c.tag, plan_tag::make(1, 0));
  EXPECT_TRUE(fake.divergences.empty());
}

TEST(PlanExecutor, UnusablePlansAreRefusedAndTheLibraryRunsOnDemand) {
  FakeActions fake;
  PlanExecutor exec(fake);
  proto::PlanEntry e = swap_entry();
  e.region_id = 1;
  e.evict_after = 1;
  struct Case {
    const char* what;
    proto::PlanHeader h;
    std::uint32_t n;
  };
  std::vector<Case> cases = {
      {"empty iteration", guided(1, 0, kSignature, 1), 1},
      {"iteration longer than the library follows", guided(1, (1ull << 22) + 1, kSignature, 1), 1},
      {"no signature", guided(1, kLen, {}, 1), 1},
      {"too many entries", guided(1, kLen, kSignature, (1u << 20) + 1), (1u << 20) + 1},
  };
  proto::PlanHeader long_sig = guided(1, kLen, kSignature, 1);
  long_sig.signature_length = proto::kSignatureLength + 1;
  cases.push_back({"signature longer than the header holds", long_sig, 1});
  proto::PlanHeader bad_mode = guided(1, kLen, kSignature, 1);
  bad_mode.mode = 77;
  cases.push_back({"unknown mode", bad_mode, 1});
  for (const Case& c : cases) {
    exec.load(guided(9, kLen, kSignature, 1), &e, 1);  // a valid plan first
    ASSERT_TRUE(exec.active());
    // The entry pointer is only read once the header passed: one entry is enough even when the
    // header claims a million.
    exec.load(c.h, &e, c.n);
    EXPECT_FALSE(exec.active()) << c.what;
    Driver d{exec};
    EXPECT_EQ(d.access(kFwd).plan, nullptr) << c.what;
  }
}

// A recompute entry asks for a drop after its access, with no prefetch and no lateness report:
// residency decides whether the region can be dropped (a registration covers it) or is swapped.
TEST(PlanExecutor, RecomputeEntriesAskForADropAndNoPrefetch) {
  FakeActions fake;
  Regions regions;
  Region* w = regions.make(7);
  fake.live[7] = w;
  PlanExecutor exec(fake);
  proto::PlanEntry e = swap_entry();
  e.action = static_cast<std::uint16_t>(proto::PlanAction::kRecompute);
  e.region_id = 7;
  e.evict_after = 3;
  e.evict_function = kFwd;
  e.trigger = 5;
  e.trigger_function = kFwd;
  e.back_access = 6;
  exec.load(guided(1, kLen, kSignature, 1), &e, 1);
  Driver d{exec};
  d.iteration({{3, {w}}, {5, {}}, {6, {w}}});
  ASSERT_EQ(fake.drops.size(), 1u);
  EXPECT_EQ(fake.drops[0].region, w);
  EXPECT_TRUE(fake.prefetches.empty()) << "a dropped region is recomputed, never prefetched";
}

TEST(PlanExecutor, MismatchStopsThePlanForTheRestOfTheIteration) {
  FakeActions fake;
  Regions regions;
  Region* w = regions.make(7);
  fake.live[7] = w;
  PlanExecutor exec(fake);
  proto::PlanEntry e[2] = {swap_entry(), swap_entry()};
  e[0].region_id = 7;
  e[0].evict_after = 4;
  e[0].evict_function = kFwd;
  e[0].trigger = 6;
  e[0].trigger_function = kBwd;
  e[0].back_access = 8;
  e[1] = e[0];
  e[1].evict_after = 3;
  exec.load(guided(4, kLen, kSignature, 2), e, 2);
  Driver d{exec};
  // The program changed: a loss kernel where the plan expects the second forward kernel. Entry 1
  // (at offset 3) must not act, nor anything after it in this iteration.
  std::vector<std::uint64_t> changed = kIteration;
  changed[3] = kLoss;
  for (std::uint64_t o = 0; o < kLen; ++o) d.access(changed[o], {w});
  EXPECT_TRUE(fake.evicts.empty());
  EXPECT_TRUE(fake.prefetches.empty());
  ASSERT_EQ(fake.divergences.size(), 1u) << "one divergence per iteration";
  EXPECT_EQ(fake.divergences[0].generation, 4u);
  EXPECT_EQ(fake.divergences[0].offset, 3u);
  EXPECT_EQ(fake.divergences[0].expected, kFwd);
  EXPECT_EQ(fake.divergences[0].got, kLoss);
  EXPECT_EQ(exec.counters().divergences.load(), 1u);
  // A trigger at a mismatching position diverges too, before any prefetch.
  changed = kIteration;
  changed[6] = kSgd;
  for (std::uint64_t o = 0; o < kLen; ++o) d.access(changed[o], {w});
  EXPECT_EQ(fake.evicts.size(), 2u) << "both swap-outs come before the divergence";
  EXPECT_TRUE(fake.prefetches.empty());
  ASSERT_EQ(fake.divergences.size(), 2u);
  EXPECT_EQ(fake.divergences[1].offset, 6u);
  // The program returns to its planned shape: the next iteration follows the plan again, and
  // a diverged iteration never counts as followed.
  d.iteration({{3, {w}}, {4, {w}}, {8, {w}}});
  d.iteration({{3, {w}}, {4, {w}}, {8, {w}}});
  EXPECT_EQ(fake.prefetches.size(), 4u);
  EXPECT_EQ(fake.divergences.size(), 2u);
  EXPECT_EQ(exec.counters().guided_iterations.load(), 1u);
}

TEST(PlanExecutor, AnIterationThatNeverEndsIsADivergence) {
  FakeActions fake;
  PlanExecutor exec(fake);
  proto::PlanEntry e = swap_entry();
  e.region_id = 1;
  e.evict_after = 4;
  e.evict_function = kFwd;
  exec.load(guided(2, kLen, kSignature, 1), &e, 1);
  Driver d{exec};
  d.iteration();
  // The program now loops on something else: no signature ever comes back. Past a quarter of the
  // iteration and 64 calls of slack, that is one divergence, not one per call.
  for (int i = 0; i < 200; ++i) d.access(kSgd);
  ASSERT_EQ(fake.divergences.size(), 1u);
  EXPECT_EQ(fake.divergences[0].offset, kLen + kLen / 4 + 64);
  EXPECT_EQ(fake.divergences[0].expected, kCopy);
  // The signature comes back: a new iteration starts.
  int before = fake.iterations;
  d.iteration();
  EXPECT_EQ(fake.iterations, before + 1);
  EXPECT_EQ(fake.divergences.size(), 1u);
}

TEST(PlanExecutor, SignatureRecurringEarlyInTheIterationDoesNotRestartIt) {
  FakeActions fake;
  Regions regions;
  Region* w = regions.make(7);
  fake.live[7] = w;
  PlanExecutor exec(fake);
  // A longer iteration, whose signature (copy, copy, fwd) recurs at offset 3 (a second upload
  // inside the first half): positions stay counted from the real start.
  const std::vector<std::uint64_t> it = {kCopy, kCopy, kFwd, kCopy, kCopy, kFwd, kFwd,
                                         kLoss, kBwd,  kBwd, kBwd,  kBwd,  kSgd, kSgd};
  proto::PlanEntry e = swap_entry();
  e.region_id = 7;
  e.evict_after = 6;
  e.evict_function = kFwd;
  e.trigger = 9;
  e.trigger_function = kBwd;
  e.back_access = 11;
  exec.load(guided(1, it.size(), kSignature, 1), &e, 1);
  Driver d{exec};
  for (int n = 0; n < 2; ++n)
    for (std::uint64_t f : it) d.access(f, {w});
  EXPECT_EQ(fake.iterations, 2);
  EXPECT_EQ(fake.evicts.size(), 2u);
  EXPECT_EQ(fake.prefetches.size(), 2u);
  EXPECT_TRUE(fake.divergences.empty());
}

TEST_F(PlanExecutorOneRegion, RepublishedPlanOfTheSameShapeKeepsTheIteration) {
  e.evict_after = 3;
  e.evict_function = kFwd;
  e.trigger = 8;
  e.trigger_function = kBwd;
  e.back_access = 9;
  exec.load(guided(1, kLen, kSignature, 1), &e, 1);
  Driver d{exec};
  for (std::uint64_t o = 0; o < 5; ++o) d.access(kIteration[o], {w});
  // Feedback moved the trigger earlier (gswapd republishes mid-iteration): the executor keeps
  // its place, and the moved trigger acts with the new generation.
  e.trigger = 6;
  exec.load(guided(2, kLen, kSignature, 1), &e, 1);
  for (std::uint64_t o = 5; o < kLen; ++o) d.access(kIteration[o], {w});
  ASSERT_EQ(fake.prefetches.size(), 1u);
  EXPECT_EQ(fake.prefetches[0].tag, plan_tag::make(2, 0));
  EXPECT_TRUE(fake.divergences.empty());
  // A plan of another shape starts from its own signature, which this program never launches.
  exec.load(guided(3, kLen, {kSgd, kSgd}, 1), &e, 1);
  std::size_t prefetches = fake.prefetches.size();
  d.iteration({{3, {w}}});
  EXPECT_EQ(fake.prefetches.size(), prefetches) << "no iteration of the new shape seen yet";
}

// A region bound before a republished plan arrives (feedback moved a trigger mid-iteration) is
// still the one the new plan evicts and prefetches; a plan whose entry binds elsewhere starts
// unbound.
TEST(PlanExecutor, RepublishedPlanKeepsTheRegionsBoundThisIteration) {
  FakeActions fake;
  Regions regions;
  PlanExecutor exec(fake);
  proto::PlanEntry e = activation_entry(4);
  exec.load(guided(1, kLen, kSignature, 1), &e, 1);
  Driver d{exec};
  Region* in = regions.make(100);
  Region* act = regions.make(200);
  for (std::uint64_t o = 0; o < 3; ++o)
    d.access(kIteration[o], o == 2 ? std::vector<Region*>{in, act} : std::vector<Region*>{});
  e.trigger = 6;
  exec.load(guided(2, kLen, kSignature, 1), &e, 1);
  for (std::uint64_t o = 3; o < kLen; ++o)
    d.access(kIteration[o], o == 4 || o == 8 ? std::vector<Region*>{act} : std::vector<Region*>{});
  ASSERT_EQ(fake.evicts.size(), 1u);
  EXPECT_EQ(fake.evicts[0].region, act);
  EXPECT_EQ(fake.evicts[0].tag, plan_tag::make(2, 0));
  ASSERT_EQ(fake.prefetches.size(), 1u);
  EXPECT_EQ(fake.prefetches[0].region, act);

  // The same again, but the new plan binds its entry at another access: nothing carried over.
  for (std::uint64_t o = 0; o < 3; ++o)
    d.access(kIteration[o], o == 2 ? std::vector<Region*>{in, act} : std::vector<Region*>{});
  e.bind_offset = 3;
  exec.load(guided(3, kLen, kSignature, 1), &e, 1);
  d.access(kIteration[3]);  // names no region: the entry stays unbound
  d.access(kIteration[4], {act});
  EXPECT_EQ(fake.evicts.size(), 1u);
}

TEST(PlanExecutor, MeasuresOneIterationInMeasureEvery) {
  FakeActions fake;
  PlanExecutor exec(fake);
  proto::PlanEntry e = swap_entry();
  e.region_id = 1;
  e.evict_after = 3;
  exec.load(guided(1, kLen, kSignature, 1, /*measure_every=*/3), &e, 1);
  Driver d{exec};
  std::vector<int> measured;
  for (int it = 1; it <= 7; ++it) {
    int n = 0;
    for (std::uint64_t f : kIteration) n += d.access(f).measure;
    measured.push_back(n);
  }
  // Iterations are numbered from 1 as the executor sees them, and one runs from the access that
  // completes its signature to the access before the next one completes it: the third and sixth
  // are timed (their last eight accesses here, and the next iteration's first two), no other.
  const int tail = static_cast<int>(kLen - 2), head = 2;
  std::vector<int> want = {0, 0, tail, head, 0, tail, head};
  EXPECT_EQ(measured, want);
}

TEST_F(PlanExecutorOneRegion, BusyExecutorAndFullQueueSkipInsteadOfWaiting) {
  e.evict_after = 3;
  e.evict_function = kFwd;
  e.trigger = 6;
  e.trigger_function = kBwd;
  exec.load(guided(1, kLen, kSignature, 1), &e, 1);
  Driver d{exec};
  // Another thread's access arrives while this one holds the iteration state: it skips the plan
  // (counted) rather than waiting.
  bool inner_planned = true;
  fake.during_prefetch = [&] {
    PlanExecutor::Step inner = d.access(kSgd, {w});
    inner_planned = inner.evicts != 0 || inner.measure;
  };
  d.iteration({{3, {w}}});
  EXPECT_FALSE(inner_planned);
  EXPECT_EQ(exec.counters().skipped.load(), 1u);
  fake.during_prefetch = nullptr;
  // A full command queue: the moves are skipped and counted, the program goes on.
  fake.refuse = true;
  d.iteration({{3, {w}}});
  EXPECT_EQ(exec.counters().skipped.load(), 3u);
  EXPECT_TRUE(fake.divergences.empty());
}

TEST(PlanExecutor, ManyActionsAtOneAccessAreBounded) {
  FakeActions fake;
  Regions regions;
  PlanExecutor exec(fake);
  std::vector<proto::PlanEntry> e(12, swap_entry());
  std::vector<Region*> at3;
  for (std::uint32_t i = 0; i < e.size(); ++i) {
    at3.push_back(regions.make(50 + i));
    fake.live[50 + i] = at3.back();
    e[i].region_id = 50 + i;
    e[i].evict_after = 3;
    e[i].evict_function = kFwd;
  }
  exec.load(guided(1, kLen, kSignature, static_cast<std::uint32_t>(e.size())), e.data(),
            static_cast<std::uint32_t>(e.size()));
  Driver d{exec};
  d.iteration({{3, at3}});
  // A Step holds eight planned swap-outs; the rest are skipped, counted, never overflowed.
  EXPECT_EQ(fake.evicts.size(), 8u);
  EXPECT_EQ(exec.counters().skipped.load(), 4u);
}

// Launching threads and a reloading telemetry thread at once: every Step refers to a plan that is
// still alive, and the counters stay consistent. (Run under TSan/ASan to see more.)
TEST(PlanExecutor, ConcurrentLaunchesWhilePlansAreReloaded) {
  Regions regions;
  Region* w = regions.make(7);
  proto::PlanEntry e = swap_entry();
  e.region_id = 7;
  e.evict_after = 3;
  e.evict_function = kFwd;
  // The fake's vectors are not thread-safe: only count here.
  struct Counting : PlanActions {
    Region* w;
    std::atomic<int> evicts{0};
    Region* region_by_id(std::uint64_t) override { return w; }
    bool evict(Region*, std::uint64_t, std::uint64_t, bool) override {
      evicts.fetch_add(1);
      return true;
    }
    bool prefetch(Region*, std::uint64_t, std::uint64_t, std::uint64_t) override { return true; }
    void lateness(std::uint64_t, std::uint64_t, std::uint64_t, bool) override {}
    void divergence(std::uint64_t, std::uint64_t, std::uint64_t, std::uint64_t) override {}
  } counting;
  counting.w = w;
  PlanExecutor shared(counting);
  shared.load(guided(1, kLen, kSignature, 1), &e, 1);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> seq{0};
  std::vector<std::thread> launchers;
  for (int k = 0; k < 3; ++k)
    launchers.emplace_back([&] {
      while (!stop.load()) {
        std::uint64_t s = seq.fetch_add(1);
        TouchSet t;
        t.add(w);
        PlanExecutor::Step step;
        shared.before(s, kIteration[s % kLen], t, &step);
        shared.after(step);
      }
    });
  // Plans arrive far less often in a process (gswapd republishes at most every 300 ms): a Step
  // may refer to a plan until eight newer ones were loaded, so the loads here are spaced too.
  for (std::uint64_t g = 2; g <= 20; ++g) {
    shared.load(guided(g, kLen, kSignature, 1), &e, 1);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop.store(true);
  for (auto& t : launchers) t.join();
  EXPECT_GT(seq.load(), 0u);
  // Interleaved threads make odd orders, never more than one planned swap-out per iteration
  // start (and an iteration starts at most every half iteration).
  EXPECT_LE(static_cast<std::uint64_t>(counting.evicts.load()), seq.load() / (kLen / 2) + 1);
  EXPECT_EQ(shared.generation(), 20u);
}

// While gswapd measures, every access is timed, whatever other threads launch meanwhile: the
// measurement needs no iteration state, so no access finds it held and goes untimed (gswapd plans
// only from an iteration with nine launches in ten timed).
TEST(PlanExecutor, MeasureModeTimesEveryAccessOfConcurrentThreads) {
  FakeActions fake;
  PlanExecutor exec(fake);
  proto::PlanHeader measure{};
  measure.generation = 1;
  measure.mode = static_cast<std::uint32_t>(proto::PlanMode::kMeasure);
  exec.load(measure, nullptr, 0);
  std::atomic<std::uint64_t> seq{0}, untimed{0};
  std::vector<std::thread> launchers;
  for (int k = 0; k < 4; ++k)
    launchers.emplace_back([&] {
      for (int i = 0; i < 200000; ++i) {
        TouchSet t;
        PlanExecutor::Step step;
        exec.before(seq.fetch_add(1), kIteration[i % kLen], t, &step);
        if (!step.measure) untimed.fetch_add(1);
        exec.after(step);
      }
    });
  for (auto& t : launchers) t.join();
  EXPECT_EQ(untimed.load(), 0u);
  EXPECT_EQ(exec.counters().skipped.load(), 0u);
}

}  // namespace
}  // namespace gswap::interpose
